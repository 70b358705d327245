package consumer

import (
	"maps"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordlog/fjord/group"
)

// Online migration (KIP-848): a classic group becomes a consumer group
// when a ConsumerGroupHeartbeat joins it (Upgrade, Kafka's
// convertToConsumerGroup and ConsumerGroup.fromClassicGroup), and a
// consumer group becomes a classic group again when the last member using
// ConsumerGroupHeartbeat leaves, is removed or is replaced by a static
// classic member while classic members remain (downgrade, Kafka's
// convertToClassicGroup and ClassicGroup.fromConsumerGroup). Config.MigrationPolicy allows either.
//
// Both write Kafka's records: an upgrade tombstones the classic
// GroupMetadata and writes every member (with its ClassicMemberMetadata),
// the group epoch (the generation), the target assignment (each member's
// classic assignment) and every current assignment; a downgrade
// tombstones every consumer group record and writes a classic
// GroupMetadata (generation = group epoch, each member with its target
// assignment), which the coordinator restores as a classic group and
// rebalances.

// Upgrade converts classic group cl, which has members, into a consumer
// group of id, as Kafka does when a ConsumerGroupHeartbeat joins it: every
// classic member becomes a classic-protocol member at epoch = the
// generation, stable, owning (and targeted with) the partitions of its
// classic assignment, its session (its classic session timeout) starting
// at now. It returns the group and the records of the
// conversion; the caller then runs the joining heartbeat on the group, and
// keeps the classic group if that fails. It refuses (GROUP_ID_NOT_FOUND,
// with Kafka's message) when the policy does not allow upgrades, the
// classic group's protocol type is not "consumer", it has more members
// than Config.MaxSize, a member's subscription or assignment does not
// parse, or an assignment carries user data (a custom assignor's, which
// the server assignor would lose).
func Upgrade(id string, cfg Config, now int64, img *Image, cl group.Migration) (*Group, []Record, error) {
	notConsumer := errf(group.ErrGroupNotFound, "Group %s is not a consumer group.", id)
	switch {
	case !cfg.MigrationPolicy.Upgrade(), cl.ProtocolType != ConsumerProtocolType, int64(len(cl.Members)) > int64(cfg.MaxSize):
		return nil, nil, notConsumer
	}
	malformed := errf(group.ErrGroupNotFound, "Cannot upgrade classic group %s to consumer group because the embedded consumer protocol is malformed.", id)
	g := New(id, cfg)
	g.emit(classicTombstone{})
	type converted struct {
		id   string
		meta memberMeta
		a    assignment
	}
	var ms []converted
	for _, cm := range cl.Members {
		if len(cm.Protocols) == 0 {
			return nil, nil, malformed
		}
		metadata := cm.Protocols[0].Metadata
		for _, p := range cm.Protocols {
			if p.Name == cl.Protocol {
				metadata = p.Metadata
			}
		}
		var sub kmsg.ConsumerMemberMetadata
		if err := sub.ReadFrom(metadata); err != nil {
			return nil, nil, malformed
		}
		a := assignment{}
		if len(cm.Assignment) > 0 {
			var ca kmsg.ConsumerMemberAssignment
			if err := ca.ReadFrom(cm.Assignment); err != nil {
				return nil, nil, malformed
			}
			if len(ca.UserData) > 0 {
				return nil, nil, errf(group.ErrGroupNotFound, "Cannot upgrade classic group %s to consumer group because an unsupported custom assignor is in use. "+
					"Please refer to the documentation or switch to a default assignor before re-attempting the upgrade.", id)
			}
			raw := map[TopicID][]int32{}
			for _, t := range ca.Topics {
				if topic, ok := img.ByName(t.Topic); ok {
					raw[topic.ID] = append(raw[topic.ID], t.Partitions...)
				}
			}
			a = normalize(raw)
		}
		protocols := make([]classicProtocol, len(cm.Protocols))
		for i, p := range cm.Protocols {
			protocols[i] = classicProtocol{name: strings.Clone(p.Name), metadata: slices.Clone(p.Metadata)}
		}
		meta := memberMeta{
			instanceID:         cloneString(cm.InstanceID),
			rackID:             cloneString(sub.Rack),
			clientID:           cm.ClientID,
			clientHost:         cm.ClientHost,
			topics:             sortedNames(sub.Topics),
			rebalanceTimeoutMs: cm.RebalanceTimeoutMs,
			classic:            &classicMeta{sessionTimeoutMs: cm.SessionTimeoutMs, protocols: protocols},
		}
		ms = append(ms, converted{id: cm.ID, meta: meta, a: a})
	}
	slices.SortFunc(ms, func(x, y converted) int { return strings.Compare(x.id, y.id) })
	// Two classic members cannot own one partition (the leader assigned
	// them), but a malformed assignment could say so: refuse rather than
	// break the ownership invariant.
	seen := assignment{}
	for _, m := range ms {
		if m.a.intersects(seen) {
			return nil, nil, malformed
		}
		seen = seen.union(m.a)
	}
	for _, m := range ms {
		g.emit(memberRec{id: m.id, meta: m.meta})
	}
	g.emit(groupRec{epoch: cl.Generation, hash: img.MetadataHash(g.groupTopics())})
	for _, m := range ms {
		g.emit(targetMemberRec{id: m.id, a: m.a})
	}
	g.emit(targetEpochRec{epoch: cl.Generation})
	for _, m := range ms {
		cur := currentState{epoch: cl.Generation, prevEpoch: cl.Generation, state: memberStable,
			assigned: m.a, revoking: assignment{}, since: epochsOf(m.a, max(cl.Generation, 0))}
		g.emit(currentRec{id: m.id, cur: cur})
		g.members[m.id].sessionDeadline = now + int64(m.meta.classic.sessionTimeoutMs)
	}
	return g, g.flush(), nil
}

// canDowngrade is Kafka's validateOnlineDowngradeWithFencedMember: the
// member being removed is the last one using ConsumerGroupHeartbeat,
// classic members remain, the policy allows downgrades, and they fit in a
// classic group (Config.ClassicMaxSize).
func (g *Group) canDowngrade(leaving string) bool {
	m := g.members[leaving]
	if m == nil || m.meta.classic != nil || len(g.members) <= 1 || !g.cfg.MigrationPolicy.Downgrade() {
		return false
	}
	for _, o := range g.members {
		if o.id != leaving && o.meta.classic == nil {
			return false
		}
	}
	return g.cfg.ClassicMaxSize == 0 || int64(len(g.members)-1) <= int64(g.cfg.ClassicMaxSize)
}

// canDowngradeReplacing is Kafka's
// validateOnlineDowngradeWithReplacedMemberId: a static classic member
// joins under the instance id of member replaced, the last one using
// ConsumerGroupHeartbeat; the policy allows downgrades and the members
// fit in a classic group.
func (g *Group) canDowngradeReplacing(replaced string) bool {
	m := g.members[replaced]
	if m == nil || m.meta.classic != nil || !g.cfg.MigrationPolicy.Downgrade() {
		return false
	}
	for _, o := range g.members {
		if o.id != replaced && o.meta.classic == nil {
			return false
		}
	}
	return g.cfg.ClassicMaxSize == 0 || int64(len(g.members)) <= int64(g.cfg.ClassicMaxSize)
}

// downgrade converts the group into a classic group without member
// leaving ("" for none) (Kafka's convertToClassicGroup): the tombstones of every record
// of the group, then the classic GroupMetadata, Stable at generation =
// the group epoch, with every remaining member, the protocol the classic
// group would choose, the first member (by id) as leader, and each
// member's target assignment encoded in its subscription's version. The
// group ends Dead; Downgraded holds the classic group's value for the
// caller, which restores it and starts a rebalance, as Kafka does.
func (g *Group) downgrade(now int64, leaving string, img *Image) {
	v := kmsg.NewGroupMetadataValue()
	v.Version = 3
	v.ProtocolType = ConsumerProtocolType
	v.Generation = g.epoch
	v.CurrentStateTimestamp = now
	var rest []*member
	for _, m := range g.sortedMembers() {
		if m.id != leaving {
			rest = append(rest, m)
		}
	}
	protocol := selectClassicProtocol(rest)
	leader := rest[0].id
	v.Protocol, v.Leader = &protocol, &leader
	for _, m := range rest {
		vm := kmsg.NewGroupMetadataValueMember()
		vm.MemberID, vm.InstanceID = m.id, cloneString(m.meta.instanceID)
		vm.ClientID, vm.ClientHost = m.meta.clientID, m.meta.clientHost
		vm.RebalanceTimeoutMillis, vm.SessionTimeoutMillis = m.meta.rebalanceTimeoutMs, m.meta.classic.sessionTimeoutMs
		for _, p := range m.meta.classic.protocols {
			if p.name == protocol {
				vm.Subscription = slices.Clone(p.metadata)
			}
		}
		vm.Assignment = encodeClassicAssignment(g.target[m.id], img, vm.Subscription)
		v.Members = append(v.Members, vm)
	}
	g.tombstoneAll()
	g.emit(classicRec{v: &v})
	g.downgraded, g.downgradeRebalance = &v, true
}

// tombstoneAll writes the tombstones of every record of the group, in
// Kafka's order (ConsumerGroup.createGroupTombstoneRecords); the group is
// Dead after them.
func (g *Group) tombstoneAll() {
	ms := g.sortedMembers()
	for _, m := range ms {
		g.emit(currentRec{id: m.id, tomb: true})
	}
	for _, m := range ms {
		g.emit(targetMemberRec{id: m.id, tomb: true})
	}
	g.emit(targetEpochRec{tomb: true})
	for _, m := range ms {
		g.emit(memberRec{id: m.id, tomb: true})
	}
	for _, re := range slices.Sorted(maps.Keys(g.regexes)) {
		g.emit(regexRec{regex: re, tomb: true})
	}
	if g.partitionMeta {
		g.emit(partitionMetaRec{tomb: true})
	}
	g.emit(groupRec{tomb: true})
}

// selectClassicProtocol is the classic group's choice among ms's
// protocols: those every member supports, each member voting for the one
// it prefers most, most votes winning, ties to the first member's
// preference (package group's rule).
func selectClassicProtocol(ms []*member) string {
	var candidates []string
	for _, p := range ms[0].meta.classic.protocols {
		all := true
		for _, m := range ms {
			all = all && m.meta.classic.supports(p.name)
		}
		if all && !slices.Contains(candidates, p.name) {
			candidates = append(candidates, p.name)
		}
	}
	votes := map[string]int{}
	for _, m := range ms {
		for _, p := range m.meta.classic.protocols {
			if slices.Contains(candidates, p.name) {
				votes[p.name]++
				break
			}
		}
	}
	best := ""
	for _, c := range candidates {
		if best == "" || votes[c] > votes[best] {
			best = c
		}
	}
	if best == "" {
		// No protocol shared by all (JoinGroup's check keeps one while
		// the members are classic): the first member's; the members
		// rejoin and the classic group sorts them out.
		best = ms[0].meta.classic.protocols[0].name
	}
	return best
}

// Downgraded is the classic group this group became (its stored form,
// which the caller restores with group.Restore), or nil, and whether the
// caller then starts its rebalance (group.Group.Rebalance): Kafka does
// when the downgrade came from a member leaving or being removed, not
// when a static classic member replaced the last consumer-protocol
// member. The group itself is Dead once downgraded.
func (g *Group) Downgraded() (v *kmsg.GroupMetadataValue, rebalance bool) {
	return g.downgraded, g.downgradeRebalance
}

// classicTombstone is the tombstone of the classic group's GroupMetadata
// (key version 2), written by an upgrade.
type classicTombstone struct{}

func (classicTombstone) encode(group string) Record {
	k := kmsg.NewGroupMetadataKey()
	k.Version, k.Group = 2, group
	return Record{Key: k.AppendTo(nil)}
}

func (classicTombstone) apply(*Group) error { return nil }

// classicRec is the classic GroupMetadata a downgrade writes. It is not a
// record of this package (the coordinator restores it as a classic group);
// applying it changes nothing here.
type classicRec struct{ v *kmsg.GroupMetadataValue }

func (r classicRec) encode(group string) Record {
	k := kmsg.NewGroupMetadataKey()
	k.Version, k.Group = 2, group
	return Record{Key: k.AppendTo(nil), Value: r.v.AppendTo(nil)}
}

func (classicRec) apply(*Group) error { return nil }

// ClassicGroupOfKey reports the group of a classic GroupMetadata key
// (version 2), which an upgrade tombstones and a downgrade writes.
func ClassicGroupOfKey(k []byte) (string, bool) {
	var gk kmsg.GroupMetadataKey
	if len(k) < 2 || k[0] != 0 || k[1] != 2 || gk.ReadFrom(k) != nil {
		return "", false
	}
	return gk.Group, true
}
