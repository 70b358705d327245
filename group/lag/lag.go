// Package lag is a consumer group's lag per partition, computed one way
// for every place that shows it: `fjord group lag`, which gathers its
// inputs over the Kafka protocol (DescribeGroups, OffsetFetch,
// ListOffsets), and the web console's group page, which reads them from
// the node (the coordinator's group and offsets, the local replicas).
//
// Which partitions: every partition of every topic the group's members
// subscribe to (the consumer protocol's JoinGroup metadata), are assigned
// or the group committed to, so a partition the group was never committed
// on is listed too, entirely lagging, as kafka-consumer-groups.sh and
// kadm.Lag list it.
//
// How much: behind a commit, the end offset (the high watermark) minus the
// commit; with no commit, the end minus the log start offset: every record
// still there. Never below zero (a commit past the end, or a start passing
// the end between two listings).
//
// A leaf: no clock, no I/O, nothing of Fjord imported.
package lag

import (
	"cmp"
	"errors"
	"slices"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// ErrUnlisted is a row's error when the partition's offsets were not
// given: a committed or assigned partition of a topic (or partition) that
// no longer exists, or a listing that failed for it.
var ErrUnlisted = errors.New("lag: the partition's offsets are not known (no such topic or partition?)")

// TP names a partition.
type TP struct {
	Topic     string
	Partition int32
}

// Member is what the lag needs of a group member.
type Member struct {
	ID string
	// Subscribed are the topics it asked for when it joined.
	Subscribed []string
	// Assigned are its partitions by topic.
	Assigned map[string][]int32
}

// KIP848Member is a member of a KIP-848 consumer group as
// ConsumerGroupDescribe returns it: its subscribed topic names and its
// current assignment (a regular expression's topics show only once
// assigned).
func KIP848Member(m kmsg.ConsumerGroupDescribeResponseGroupMember) Member {
	lm := Member{ID: m.MemberID, Subscribed: append([]string(nil), m.SubscribedTopics...), Assigned: map[string][]int32{}}
	for _, t := range m.Assignment.TopicPartitions {
		lm.Assigned[t.Topic] = append(lm.Assigned[t.Topic], t.Partitions...)
	}
	return lm
}

// ConsumerMember decodes a member of a group of protocol type "consumer"
// from its protocol metadata and assignment as DescribeGroups returns
// them (both empty unless the group is Stable). Bytes that do not decode
// leave the part out: the member then only names no partition.
func ConsumerMember(id string, metadata, assignment []byte) Member {
	m := Member{ID: id}
	if len(metadata) > 0 {
		var md kmsg.ConsumerMemberMetadata
		if md.ReadFrom(metadata) == nil {
			m.Subscribed = md.Topics
		}
	}
	if len(assignment) > 0 {
		var a kmsg.ConsumerMemberAssignment
		if a.ReadFrom(assignment) == nil {
			m.Assigned = map[string][]int32{}
			for _, t := range a.Topics {
				m.Assigned[t.Topic] = append(m.Assigned[t.Topic], t.Partitions...)
			}
		}
	}
	return m
}

// Commit is a committed offset.
type Commit struct {
	Offset int64 // < 0: none
	Err    error // from the OffsetFetch, if any
}

// Offsets are a partition's log start and end offsets.
type Offsets struct {
	Start, End int64
	Err        error // the listing failed: the lag is unknown
}

// Row is one partition's lag.
type Row struct {
	Topic     string
	Partition int32
	Committed int64 // -1: no commit
	Start     int64 // the log start offset; meaningful only when Err is nil
	End       int64 // the end offset (high watermark); meaningful only when Err is nil
	Lag       int64 // -1 when unknown (Err is set)
	Member    string
	Err       error
}

// Topics are the topics a group's lag covers: subscribed, assigned or
// committed to; sorted. A caller lists their partitions' offsets.
func Topics(members []Member, commits map[TP]Commit) []string {
	var ts []string
	for _, m := range members {
		ts = append(ts, m.Subscribed...)
		for t := range m.Assigned {
			ts = append(ts, t)
		}
	}
	for tp := range commits {
		ts = append(ts, tp.Topic)
	}
	slices.Sort(ts)
	return slices.Compact(ts)
}

// Compute returns a row per partition the group's lag covers, sorted by
// topic and partition: every partition offsets lists of a topic in
// Topics(members, commits), and every assigned or committed partition
// (with ErrUnlisted when offsets lacks it). offsets may hold partitions
// of other topics; they are left out.
func Compute(members []Member, commits map[TP]Commit, offsets map[TP]Offsets) []Row {
	owner := map[TP]string{}
	for _, m := range members {
		for t, ps := range m.Assigned {
			for _, p := range ps {
				owner[TP{t, p}] = m.ID
			}
		}
	}
	want := map[TP]bool{}
	for tp := range owner {
		want[tp] = true
	}
	for tp := range commits {
		want[tp] = true
	}
	topics := Topics(members, commits)
	for tp := range offsets {
		if _, ok := slices.BinarySearch(topics, tp.Topic); ok {
			want[tp] = true
		}
	}
	rows := make([]Row, 0, len(want))
	for tp := range want {
		r := Row{Topic: tp.Topic, Partition: tp.Partition, Committed: -1, Lag: -1, Member: owner[tp]}
		c, committed := commits[tp]
		if committed && c.Offset >= 0 {
			r.Committed = c.Offset
		}
		o, listed := offsets[tp]
		switch {
		case committed && c.Err != nil:
			r.Err = c.Err
		case !listed:
			r.Err = ErrUnlisted
		case o.Err != nil:
			r.Err = o.Err
		default:
			r.Start, r.End = o.Start, o.End
			r.Lag = Of(r.Committed, o.Start, o.End)
		}
		rows = append(rows, r)
	}
	slices.SortFunc(rows, func(a, b Row) int {
		return cmp.Or(cmp.Compare(a.Topic, b.Topic), cmp.Compare(a.Partition, b.Partition))
	})
	return rows
}

// Of is the lag of a partition whose log spans [start, end) for a
// committed offset (< 0: none).
func Of(committed, start, end int64) int64 {
	from := start
	if committed >= 0 {
		from = committed
	}
	return max(end-from, 0)
}
