// Package tier is tiered storage's remote log manager (KIP-405): on each
// partition leader of a topic with remote.storage.enable=true, it copies
// sealed segments to the remote object store (storage/remote.Store),
// records each copy in the metadata log (controller/remote.go: the
// RemoteSegment and RemoteSegmentStateChange records, proposed through
// the RemoteLogSegment request), cleans up attempts that never finished,
// and deletes remote segments past retention.ms / retention.bytes.
//
// Files:
//   - plan.go, the pure part: Plan decides, from a snapshot of one
//     partition (its sealed local segments, its watermarks, the image's
//     remote segment entries), what to do next. It reads no clock (now is
//     an input), touches no store and proposes nothing.
//   - copier.go: Copier, the I/O half: it carries out Plan's actions
//     against a remote.Store, a storage.Log's files and a Proposer (the
//     controller), and counts bytes and errors by kind.
//   - manager.go: Manager, the rounds: every interval, every partition
//     this node leads of a tiered topic, a bounded number at a time,
//     with a doubling, bounded backoff after a failed round, logged once
//     per change between failing and working.
//   - reader.go: Reader and SegmentFor, reading copied records back from
//     the store (what Fetch below the local log start uses).
//   - aborted.go: Reader.TxnIndex and Reader.Aborted, a read_committed
//     read's aborted transactions from the copied segments' .txnindex
//     objects (one the metadata does not list is none; a store failure
//     or a damaged object an error), with a small cache by segment id.
//   - health.go: Health, what waits to be copied and whether rounds fail
//     on the store (the metrics and the console's alert card), and the
//     node's one log line per change between working and failing.
//   - verify.go: the checks a read makes of every batch before serving
//     it (CRC, offsets against the segment's metadata, the object's
//     size); ErrDamaged.
//   - objects.go: the checks of every other object read back (.index,
//     .timeindex, .txnindex, .snapshot) against the length and CRC-32C
//     the segment's COPY_STARTED record lists; a listed object missing
//     from the store is damaged, not absent.
//   - follower.go: KIP-405's follower path: PlanRestart and
//     Reader.Restart, where a replica below its leader's local log
//     restarts (the end of the copied segment holding the offset before
//     it) and with what (the copy's leader epochs and producer snapshot).
//   - keys.go: the objects' keys.
//
// One attempt's steps (the driver's):
//
//	propose COPY_STARTED (a fresh segment id) ─► wait until committed
//	Put .log, .index, .timeindex, .snapshot, .leader-epoch-checkpoint[, .txnindex]
//	propose COPY_FINISHED
//
// A crash or a leader change between the two proposals leaves a
// COPY_STARTED entry whose objects may be partial. Readers use only
// COPY_FINISHED entries, so nothing partial is ever visible; the next
// leader (Plan's Abandon) proposes DELETE_STARTED, deletes that attempt's
// objects, proposes DELETE_FINISHED, and uploads the segment again under
// a new id. The controller fences every proposal by the partition's
// current leader and leader epoch, so an old leader cannot finish its
// attempt after a new one took over.
package tier

import (
	"github.com/fjordlog/fjord/controller"
)

// LocalSegment is a sealed local segment: offsets [Base, Last], Size
// bytes of .log, MaxTimestamp the largest record timestamp (-1: none).
type LocalSegment struct {
	Base, Last   int64
	Size         int64
	MaxTimestamp int64
}

// Partition is what Plan reads of one partition, at one instant.
//
// Invariant: Sealed is oldest first and excludes the active segment;
// Remote is the image's list (controller.Image.RemoteSegments), in its
// order.
type Partition struct {
	Broker      int32 // this broker
	Leader      bool  // this broker leads the partition now
	LeaderEpoch int32 // the partition's leader epoch (this broker's, when Leader)
	Enabled     bool  // remote.storage.enable
	// HighWatermark and LastStable are the partition's high watermark and
	// last stable offset (both exclusive ends): a segment is copied only
	// once every record in it is below both, so the store never holds a
	// record that a leader change could truncate, or an open transaction.
	HighWatermark, LastStable int64
	Sealed                    []LocalSegment
	// LocalBytesAbove is the local bytes not yet copied (sealed segments
	// above the copied end and the active one): part of the partition's
	// total size, which retention.bytes bounds.
	LocalBytesAbove int64
	Remote          []controller.RemoteSegmentMeta
	// InFlight is the segment id of this broker's own attempt in
	// progress, zero when none: its COPY_STARTED entry is not abandoned.
	InFlight [16]byte
	// RetentionMs and RetentionBytes are retention.ms and retention.bytes
	// (-1: unbounded): they bound the whole log, remote and local.
	RetentionMs, RetentionBytes int64
	Now                         int64 // ms
}

// Kind is what an Action does.
type Kind int

const (
	// Abandon: a COPY_STARTED attempt that will never finish (its leader
	// is gone, or crashed): propose DELETE_STARTED, then as FinishDelete.
	Abandon Kind = iota + 1
	// FinishDelete: a DELETE_STARTED entry: delete its objects (every
	// suffix; a missing one is fine), then propose DELETE_FINISHED.
	FinishDelete
	// Expire: a COPY_FINISHED segment past retention: propose
	// DELETE_STARTED, then as FinishDelete.
	Expire
	// Upload: copy Local as a new attempt.
	Upload
)

func (k Kind) String() string {
	switch k {
	case Abandon:
		return "abandon"
	case FinishDelete:
		return "finish-delete"
	case Expire:
		return "expire"
	case Upload:
		return "upload"
	}
	return "none"
}

// Action is one step for the driver: Remote names the entry for Abandon,
// FinishDelete and Expire; Local the segment for Upload.
type Action struct {
	Kind   Kind
	Remote controller.RemoteSegmentMeta
	Local  LocalSegment
}

// Plan returns what to do for p now, in order: clean-ups first (deletions
// to finish, attempts to abandon), then retention, then at most one
// upload. Only a leader of an enabled topic acts. A partition uploads one
// segment at a time, in offset order, and not while any COPY_STARTED
// entry remains: the controller accepts a new attempt only above every
// live one's end, and an abandoned attempt's segment is copied again
// after its entry is gone. The caller owns the slice.
func Plan(p Partition) []Action {
	if !p.Leader || !p.Enabled {
		return nil
	}
	var out []Action
	started := false
	for _, s := range p.Remote {
		switch s.State {
		case controller.RemoteDeleteStarted:
			out = append(out, Action{Kind: FinishDelete, Remote: s})
		case controller.RemoteCopyStarted:
			started = true
			if s.SegmentID != p.InFlight || s.Broker != p.Broker || s.LeaderEpoch != p.LeaderEpoch {
				out = append(out, Action{Kind: Abandon, Remote: s})
			}
		}
	}
	out = append(out, expire(p)...)
	if started || p.InFlight != ([16]byte{}) {
		return out
	}
	if s, ok := Candidate(p); ok {
		out = append(out, Action{Kind: Upload, Local: s})
	}
	return out
}

// CopiedEnd is the highest end offset of the COPY_FINISHED entries, -1
// when none.
func CopiedEnd(remote []controller.RemoteSegmentMeta) int64 {
	end := int64(-1)
	for _, s := range remote {
		if s.State == controller.RemoteCopyFinished {
			end = max(end, s.EndOffset)
		}
	}
	return end
}

// Candidate is the next segment to copy: the oldest sealed segment whose
// last offset is above the copied end and below both the high watermark
// and the last stable offset.
func Candidate(p Partition) (LocalSegment, bool) {
	copied := CopiedEnd(p.Remote)
	limit := min(p.HighWatermark, p.LastStable)
	for _, s := range p.Sealed {
		if s.Last <= copied {
			continue
		}
		if s.Last < limit {
			return s, true
		}
		break // later segments end later still
	}
	return LocalSegment{}, false
}

// expire is the retention step: COPY_FINISHED segments, oldest first,
// while the oldest is older than retention.ms or the partition without it
// is still at least retention.bytes (storage's rule for local segments,
// applied to the whole log). It stops at the first one that stays, so
// the remote log start only moves forward over a prefix.
//
// The newest COPY_FINISHED segment never expires here: its end is the
// copied end (CopiedEnd), which must not move back, or a local segment
// still on disk below it (local retention runs on its own clock) would be
// copied again. So retention keeps at most one segment more than it
// bounds until the next copy.
func expire(p Partition) []Action {
	total := p.LocalBytesAbove
	newest := -1
	for i, s := range p.Remote {
		if s.State == controller.RemoteCopyFinished {
			total += s.SizeBytes
			if newest < 0 || s.EndOffset > p.Remote[newest].EndOffset {
				newest = i
			}
		}
	}
	var out []Action
	for i, s := range p.Remote {
		if s.State != controller.RemoteCopyFinished {
			continue
		}
		if i == newest {
			break
		}
		expired := p.RetentionMs >= 0 && s.MaxTimestamp >= 0 && p.Now-s.MaxTimestamp > p.RetentionMs
		oversize := p.RetentionBytes >= 0 && total-s.SizeBytes >= p.RetentionBytes
		if !expired && !oversize {
			break
		}
		total -= s.SizeBytes
		out = append(out, Action{Kind: Expire, Remote: s})
	}
	return out
}
