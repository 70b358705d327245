package group

import (
	"bytes"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Persistence: a group's completed generation is stored as Kafka's
// GroupMetadataValue (version 3) in the offsets topic, so that after a
// restart or a coordinator move the members carry on in the same generation
// without a rebalance. Only Stable and Empty groups are stored: a group in
// the middle of a rebalance is stored once it settles, and one restored from
// an older generation simply sends its members through a rebalance
// (ILLEGAL_GENERATION), which is safe.

// Snapshot returns the group's durable form, or nil while it rebalances or
// after it is Dead. now is the state timestamp recorded with it.
func (g *Group) Snapshot(now int64) *kmsg.GroupMetadataValue {
	if g.state != stateStable && g.state != stateEmpty {
		return nil
	}
	v := kmsg.NewGroupMetadataValue()
	v.Version = 3
	v.ProtocolType = g.protocolType
	v.Generation = g.generation
	v.CurrentStateTimestamp = now
	if g.state == stateStable {
		protocol, leader := g.protocol, g.leader
		v.Protocol, v.Leader = &protocol, &leader
		for _, m := range g.order {
			vm := kmsg.NewGroupMetadataValueMember()
			vm.MemberID, vm.InstanceID, vm.ClientID, vm.ClientHost = m.id, m.instanceID, m.clientID, m.clientHost
			vm.RebalanceTimeoutMillis, vm.SessionTimeoutMillis = m.rebalanceTimeoutMs, m.sessionTimeoutMs
			for _, p := range m.protocols {
				if p.Name == g.protocol {
					vm.Subscription = p.Metadata
				}
			}
			vm.Assignment = m.assignment
			v.Members = append(v.Members, vm)
		}
	}
	return &v
}

// Restore rebuilds a group from Snapshot's form: Stable with its members,
// whose sessions start again at now, or Empty. Values that do not describe a
// consistent group (no leader among the members, an unknown protocol) give
// an Empty group of that generation: its members rejoin.
func Restore(id string, cfg Config, v *kmsg.GroupMetadataValue, now int64) *Group {
	g := NewGroup(id, cfg)
	g.generation = v.Generation
	g.protocolType = v.ProtocolType
	if len(v.Members) == 0 || v.Protocol == nil || v.Leader == nil || *v.Protocol == "" {
		return g
	}
	leaderFound := false
	for _, vm := range v.Members {
		if vm.MemberID == "" || g.members[vm.MemberID] != nil || vm.SessionTimeoutMillis <= 0 {
			return NewGroupAt(id, cfg, v.Generation, v.ProtocolType)
		}
		m := &member{
			id:                 vm.MemberID,
			clientID:           vm.ClientID,
			clientHost:         vm.ClientHost,
			sessionTimeoutMs:   vm.SessionTimeoutMillis,
			rebalanceTimeoutMs: max(vm.RebalanceTimeoutMillis, 1),
			protocols:          []kmsg.JoinGroupRequestProtocol{{Name: *v.Protocol, Metadata: bytes.Clone(vm.Subscription)}},
			assignment:         bytes.Clone(vm.Assignment),
		}
		if vm.InstanceID != nil {
			inst := *vm.InstanceID
			m.instanceID = &inst
			if g.static[inst] != nil {
				return NewGroupAt(id, cfg, v.Generation, v.ProtocolType)
			}
			g.static[inst] = m
		}
		m.refreshSession(now)
		g.members[m.id] = m
		g.order = append(g.order, m)
		leaderFound = leaderFound || m.id == *v.Leader
	}
	if !leaderFound {
		return NewGroupAt(id, cfg, v.Generation, v.ProtocolType)
	}
	g.state = stateStable
	g.protocol, g.leader = *v.Protocol, *v.Leader
	return g
}

// NewGroupAt is an Empty group that remembers its generation and protocol
// type.
func NewGroupAt(id string, cfg Config, generation int32, protocolType string) *Group {
	g := NewGroup(id, cfg)
	g.generation, g.protocolType = generation, protocolType
	return g
}
