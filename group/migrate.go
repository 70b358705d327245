package group

import (
	"bytes"
	"strings"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Online migration between this package's classic groups and KIP-848
// consumer groups (package group/consumer, which does the converting; the
// coordinator swaps the groups). A classic group with members becomes a
// consumer group when a ConsumerGroupHeartbeat joins it (Migration, then
// Abandon); a consumer group whose last ConsumerGroupHeartbeat member
// left becomes a classic group restored from the GroupMetadataValue the
// conversion wrote (Restore, then Rebalance).

// Migration is what an online upgrade takes from a classic group: its
// generation, protocol type and chosen protocol ("" before the first
// generation), and every member in join order.
type Migration struct {
	Generation   int32
	ProtocolType string
	Protocol     string
	Members      []MigratingMember
}

// MigratingMember is one member of a Migration: its identity, its
// timeouts, every protocol it supports with its metadata, and the
// assignment the leader last gave it (nil if none).
type MigratingMember struct {
	ID                 string
	InstanceID         *string
	ClientID           string
	ClientHost         string
	SessionTimeoutMs   int32
	RebalanceTimeoutMs int32
	Protocols          []kmsg.JoinGroupRequestProtocol
	Assignment         []byte
}

// Migration describes the group for an upgrade. The result shares
// nothing with the group.
func (g *Group) Migration() Migration {
	mg := Migration{Generation: g.generation, ProtocolType: g.protocolType, Protocol: g.protocol}
	for _, m := range g.order {
		mm := MigratingMember{
			ID: m.id, ClientID: m.clientID, ClientHost: m.clientHost,
			SessionTimeoutMs: m.sessionTimeoutMs, RebalanceTimeoutMs: m.rebalanceTimeoutMs,
			Protocols: copyProtocols(m.protocols), Assignment: bytes.Clone(m.assignment),
		}
		if m.instanceID != nil {
			s := strings.Clone(*m.instanceID)
			mm.InstanceID = &s
		}
		mg.Members = append(mg.Members, mm)
	}
	return mg
}

// Abandon ends the group because it became a consumer group: every parked
// JoinGroup and SyncGroup is answered REBALANCE_IN_PROGRESS (its member
// rejoins, now into the consumer group), and the group is Dead. The
// caller drops it.
func (g *Group) Abandon() []Reply {
	g.out = nil
	for _, m := range g.order {
		if m.join != nil {
			g.reply(m.join.token, joinError(m.join.version, m.id, ErrRebalanceInProgress))
			m.join = nil
		}
		if m.sync != nil {
			g.reply(m.sync.token, syncError(m.sync.version, ErrRebalanceInProgress))
			m.sync = nil
		}
	}
	g.state = stateDead
	clear(g.pending)
	return g.flush()
}

// Rebalance starts a rebalance of a Stable group, as Kafka does after an
// online downgrade: the members, restored at the consumer group's epoch
// with their target assignments, rejoin to agree on an assignment of
// their own. Anything but a Stable group is left as it is.
func (g *Group) Rebalance(now int64) []Reply {
	g.out = nil
	if g.state == stateStable {
		g.prepareRebalance(now, CauseDowngrade, "")
	}
	return g.flush()
}
