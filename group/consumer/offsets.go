package consumer

import (
	"github.com/fjordlog/fjord/group"
)

// ValidateOffsetCommit reports whether an OffsetCommit (not transactional)
// quoting memberID and memberEpoch (the GenerationIdOrMemberEpoch field)
// may commit to this group, by Kafka's ConsumerGroup.validateOffsetCommit:
//
//   - a commit with a negative epoch to a group without members is
//     accepted: admin clients and consumers that assign partitions
//     themselves ("simple" commits, epoch -1, empty member id);
//   - otherwise the member must exist (group.ErrUnknownMember, also for a
//     simple commit while the group has members);
//   - OffsetCommit below v9 cannot carry a member epoch, and members of a
//     consumer group must use v9+ (group.ErrUnsupportedVersion);
//   - the epoch must be the member's current one
//     (group.ErrStaleMemberEpoch).
//
// A Dead group answers group.ErrGroupDead: the caller should have dropped
// it.
func (g *Group) ValidateOffsetCommit(memberID string, memberEpoch int32, version int16) error {
	if g.dead {
		return errf(group.ErrGroupDead, "The group %s was deleted.", g.id)
	}
	if memberEpoch < 0 && len(g.members) == 0 {
		return nil
	}
	m := g.members[memberID]
	if m == nil {
		return errf(group.ErrUnknownMember, "Member %s is not a member of group %s.", memberID, g.id)
	}
	if version < 9 {
		return errf(group.ErrUnsupportedVersion, "OffsetCommit version 9 or above must be used by members using the modern group protocol")
	}
	return checkOffsetEpoch(m, memberEpoch)
}

// ValidateOffsetFetch reports whether an OffsetFetch (v9+ carries the
// member) may read, by Kafka's ConsumerGroup.validateOffsetFetch: without
// a member id ("" for Kafka's null) and with a negative epoch, anyone may
// (admin clients, older clients); otherwise the member must exist and
// quote its current epoch.
func (g *Group) ValidateOffsetFetch(memberID string, memberEpoch int32) error {
	if g.dead {
		return errf(group.ErrGroupDead, "The group %s was deleted.", g.id)
	}
	if memberID == "" && memberEpoch < 0 {
		return nil
	}
	m := g.members[memberID]
	if m == nil {
		return errf(group.ErrUnknownMember, "Member %s is not a member of group %s.", memberID, g.id)
	}
	return checkOffsetEpoch(m, memberEpoch)
}

func checkOffsetEpoch(m *member, epoch int32) error {
	if epoch != m.cur.epoch {
		return errf(group.ErrStaleMemberEpoch, "The received member epoch %d does not match the expected member epoch %d.", epoch, m.cur.epoch)
	}
	return nil
}
