package replica

import (
	"encoding/binary"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Pipelined replication: a follower's durable end apart from its fetch
// offset.
//
// Kafka's follower fetches at its log end, and its leader counts that
// offset as on the follower's disk. Fjord keeps fsync-before-ack (an
// acks=all record is acknowledged only once every ISR member, the leader
// included, has fsynced it), so a follower that fetched at its log end had
// to fsync what it appended before fetching again: leader append, fetch,
// follower append, fsync, next fetch, all in series. Between Fjord nodes
// the fetch carries more:
//
//   - The follower's Fetch carries, per partition, its durable end in a
//     tagged field (DurableEndTag, a signed varint), whenever that end is
//     below the fetch offset. The leader counts the smaller of the two for
//     the high watermark (FollowerDurableEnd); a partition without the tag
//     counts its fetch offset, which is Kafka's rule and that of a Fjord
//     follower that fsynced before fetching. So the leader needs no
//     knowledge of which kind of follower asks: the tag's presence decides,
//     and a follower never reports, by tag or by omitting it, an end it has
//     not fsynced.
//   - The leader marks every answer to a follower (the response's
//     DurableEndTag, empty): "I count durable ends". Only after such an
//     answer, on the same connection, does a follower fetch again before
//     its fsync of what it just appended ends (the fsync runs beside the
//     next fetch, whose tag reports the end reached so far). An older Fjord
//     leader ignores the tag and would count the fetch offset; it never
//     marks, so its followers keep the serial rule. A fetch error or a new
//     connection drops the mark until the next answer (a leader restarted
//     as an older binary). Not closed: a connection the fetch itself dials
//     to such a leader after a marked answer — the fetch before it would
//     have to see no error across the restart.
//   - The leader already reads up to its log end for followers, not its
//     durable end: its own fsync overlaps the followers' fetch, append and
//     fsync. The high watermark is the minimum durable end over the ISR,
//     this leader's own included (Core).
//
// The tag number is Fjord's ("FJ", as replicamgr's TagImageVersion): far
// above Kafka's own tag numbers, which count up from 0.
const DurableEndTag = 0x464a

// PutDurableEnd sets a follower's fetch of rp to report durable as its
// durable end. A durable end at or past the fetch offset is left out:
// the fetch offset then counts, and says the same.
func PutDurableEnd(rp *kmsg.FetchRequestTopicPartition, durable int64) {
	if durable < rp.FetchOffset {
		rp.UnknownTags.Set(DurableEndTag, binary.AppendVarint(nil, durable))
	}
}

// FollowerDurableEnd is the durable end a leader counts for a follower's
// fetch of rp: the DurableEndTag's value, at most the fetch offset; the
// fetch offset when the tag is absent; -1 (nothing counts) when the tag
// is damaged.
func FollowerDurableEnd(rp *kmsg.FetchRequestTopicPartition) int64 {
	durable := rp.FetchOffset
	if rp.UnknownTags.Len() == 0 {
		return durable
	}
	rp.UnknownTags.Each(func(tag uint32, val []byte) {
		if tag != DurableEndTag {
			return
		}
		x, n := binary.Varint(val)
		if n <= 0 || n != len(val) || x < 0 {
			durable = -1
			return
		}
		durable = min(x, rp.FetchOffset)
	})
	return durable
}

// MarkCountsDurableEnds marks a leader's answer to a follower's fetch: this
// leader counts DurableEndTag, so the follower may fetch before its fsync.
func MarkCountsDurableEnds(resp *kmsg.FetchResponse) {
	resp.UnknownTags.Set(DurableEndTag, nil)
}

// countsDurableEnds reports whether a leader's answer carries the mark.
func countsDurableEnds(resp *kmsg.FetchResponse) bool {
	found := false
	if resp.UnknownTags.Len() > 0 {
		resp.UnknownTags.Each(func(tag uint32, _ []byte) { found = found || tag == DurableEndTag })
	}
	return found
}
