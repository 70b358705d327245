package consumer

import (
	"github.com/fjordlog/fjord/group"
)

// CheckOffsetCommit is Kafka 4.3's ConsumerGroup.validateOffsetCommit with
// KIP-1251's assignment epochs: it checks an OffsetCommit quoting memberID
// and memberEpoch (the GenerationIdOrMemberEpoch field) against the group,
// and returns the check each partition of the commit must then pass.
//
// The request as a whole (the error):
//
//   - a commit with a negative epoch to a group without members is
//     accepted, every partition of it: admin clients and consumers that
//     assign partitions themselves ("simple" commits, epoch -1, empty
//     member id);
//   - otherwise the member must exist (group.ErrUnknownMember, also for a
//     simple commit while the group has members);
//   - OffsetCommit below v9 cannot carry a member epoch, and members of a
//     consumer group must use v9+ (group.ErrUnsupportedVersion); a
//     TxnOffsetCommit, which has no such rule, passes 9;
//   - an epoch above the member's is group.ErrStaleMemberEpoch;
//   - a classic member (classic.go) commits with any version, quoting its
//     epoch as its generation exactly, else group.ErrIllegalGeneration.
//
// Each partition (CommitCheck.Partition): at the member's epoch, any; at
// an older epoch (the response that moved the member on was lost, or the
// client commits while it heartbeats), only a partition the member owns,
// assigned or pending revocation, and was assigned at that epoch or
// earlier. Nobody else can have owned it in between, so the commit is
// not a zombie's.
//
// A Dead group answers group.ErrGroupDead: the caller should have dropped
// it.
func (g *Group) CheckOffsetCommit(memberID string, memberEpoch int32, version int16) (CommitCheck, error) {
	if g.dead {
		return CommitCheck{}, errf(group.ErrGroupDead, "The group %s was deleted.", g.id)
	}
	if memberEpoch < 0 && len(g.members) == 0 {
		return CommitCheck{}, nil
	}
	m := g.members[memberID]
	if m == nil {
		return CommitCheck{}, errf(group.ErrUnknownMember, "Member %s is not a member of group %s.", memberID, g.id)
	}
	if m.meta.classic != nil {
		// A classic member commits with any version, at its generation
		// (its member epoch) exactly, as in a classic group.
		return CommitCheck{}, checkOffsetEpoch(m, memberEpoch)
	}
	if version < 9 {
		return CommitCheck{}, errf(group.ErrUnsupportedVersion, "OffsetCommit version 9 or above must be used by members using the modern group protocol")
	}
	switch {
	case memberEpoch == m.cur.epoch:
		return CommitCheck{}, nil
	case memberEpoch > m.cur.epoch:
		return CommitCheck{}, errf(group.ErrStaleMemberEpoch, "The received member epoch %d is larger than the expected member epoch %d.", memberEpoch, m.cur.epoch)
	}
	return CommitCheck{lagging: true, member: m.id, epoch: memberEpoch, since: m.cur.since}, nil
}

// CommitCheck says which partitions an OffsetCommit that passed
// CheckOffsetCommit may write (Kafka's CommitPartitionValidator). The zero
// value accepts every partition.
//
// It holds the member's assignment epochs as they were when
// CheckOffsetCommit ran, never modified afterwards (see partitionEpochs),
// so it answers for that moment even once the group has moved on, and
// may be used without whatever guards the group.
type CommitCheck struct {
	lagging bool // the request's epoch is older than the member's
	member  string
	epoch   int32
	since   partitionEpochs
}

// Partition checks one partition of the commit: topic is its id (the
// caller resolves a name through its metadata image; an unknown topic's
// zero id is owned by nobody) and name is what the error message calls it.
// A refusal is group.ErrStaleMemberEpoch. Kafka fails the whole request
// with the first refusal, writing nothing: the caller decides.
func (c CommitCheck) Partition(name string, topic TopicID, partition int32) error {
	if !c.lagging {
		return nil
	}
	since, ok := c.since.of(topic, partition)
	switch {
	case !ok:
		return errf(group.ErrStaleMemberEpoch, "Partition %s-%d is not assigned to member %s.", name, partition, c.member)
	case c.epoch < since:
		return errf(group.ErrStaleMemberEpoch, "The received member epoch %d is older than the assignment epoch %d for partition %s-%d.", c.epoch, since, name, partition)
	}
	return nil
}

// ValidateOffsetCommit is the check before KIP-1251, for a caller that
// does not check partitions: CheckOffsetCommit's, and an epoch older than
// the member's is group.ErrStaleMemberEpoch as well (Kafka before 4.3).
func (g *Group) ValidateOffsetCommit(memberID string, memberEpoch int32, version int16) error {
	check, err := g.CheckOffsetCommit(memberID, memberEpoch, version)
	if err == nil && check.lagging {
		err = checkOffsetEpoch(g.members[memberID], memberEpoch)
	}
	return err
}

// ValidateOffsetFetch reports whether an OffsetFetch (v9+ carries the
// member) may read, by Kafka's ConsumerGroup.validateOffsetFetch: without
// a member id ("" for Kafka's null) and with a negative epoch, anyone may
// (admin clients, older clients); otherwise the member must exist and
// quote its current epoch. KIP-1251 leaves it so: a fetch with an older
// epoch is refused, and the client retries once its heartbeat caught up.
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

// checkOffsetEpoch is Kafka's validateMemberEpoch: the member's epoch
// exactly; a classic member quotes it as its generation and gets
// ILLEGAL_GENERATION.
func checkOffsetEpoch(m *member, epoch int32) error {
	if epoch != m.cur.epoch && m.meta.classic != nil {
		return errf(group.ErrIllegalGeneration, "The received generation id %d does not match the expected member epoch %d.", epoch, m.cur.epoch)
	}
	if epoch != m.cur.epoch {
		return errf(group.ErrStaleMemberEpoch, "The received member epoch %d does not match the expected member epoch %d.", epoch, m.cur.epoch)
	}
	return nil
}
