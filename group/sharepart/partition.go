package sharepart

import (
	"cmp"
	"fmt"
	"slices"
)

// Partition is the delivery state of one share-partition (share group,
// topic, partition): which records between SPSO and SPEO are available,
// acquired by which member until when, acknowledged or archived, and how
// often each was delivered.
//
// Steps: every mutating method first ends the locks whose deadline is at
// or before now (as Tick), then does its work, then merges runs that came
// to agree (normalize), moves SPSO past the done records at the head
// (advanceStart), and turns what changed durably into at most one
// __share_group_state record (finish). The caller appends the returned
// records, in order, to the state topic and answers the request only once
// they are durable; if a write fails, the Partition must be dropped and
// rebuilt with Restore from what was written.
//
// Invariants (checked by checkInvariants in tests after every step):
//   - 0 <= spso <= speo; runs tile [spso, speo) in order, without holes or
//     overlaps, and no two neighbours are sameAs each other (normalized).
//   - runs[0], if any, is not done (Acknowledged or Archived): SPSO is the
//     first offset that still needs work.
//   - every run keeps its own invariants (see run): a record is Acquired
//     iff it has a member iff it has a lock deadline; so no record is held
//     by two members, each offset being in exactly one run.
//   - acquired == the number of Acquired offsets <= PartitionMaxRecordLocks.
//   - complete == the number of Acknowledged or Archived offsets.
//   - dirty is empty and startMoved false between steps.
//   - delivery counts never decrease while an offset stays in flight
//     (checked by the tests across steps).
type Partition struct {
	key Key
	cfg Config

	// spso is the share-partition start offset: every record below it is
	// done. speo is the share-partition end offset: the next offset no
	// fetch has considered yet. [spso, speo) is the in-flight window.
	spso, speo int64
	// runs tile [spso, speo). Their number is at most about twice the
	// records in flight, themselves at most PartitionMaxRecordLocks after a
	// step that added records.
	runs []run
	// acquired and complete count Acquired and done offsets in the window.
	acquired, complete int64

	// stateEpoch is bumped by every reset of the start offset
	// (AlterShareGroupOffsets); leaderEpoch is the epoch of the leader of
	// the topic-partition that runs this Partition. Both go into records.
	stateEpoch, leaderEpoch int32
	// snapshotEpoch counts ShareSnapshot records; updates carry the epoch
	// of the snapshot they follow. updates counts updates since then.
	snapshotEpoch int32
	updates       int32

	// Per step: offset ranges whose durable form changed, and whether SPSO
	// moved. finish turns them into a record and clears them.
	dirty      []StateBatch // only offsets are used
	startMoved bool
}

// Init is where a new share-partition starts.
type Init struct {
	// StartOffset is the initial SPSO, resolved by the caller from
	// share.auto.offset.reset (see ParseAutoOffsetReset) or given by
	// AlterShareGroupOffsets. Range: >= 0.
	StartOffset int64
	// StateEpoch is the share group's state epoch for this partition (0 for
	// a partition never reset).
	StateEpoch int32
	// LeaderEpoch is the current leader epoch of the topic-partition.
	LeaderEpoch int32
}

// New starts a share-partition with nothing in flight. The returned
// ShareSnapshot record must be written before the Partition serves
// anything, so that Restore finds it.
func New(key Key, cfg Config, init Init, now int64) (*Partition, []Record) {
	if err := cfg.Validate(); err != nil {
		panic(err)
	}
	if init.StartOffset < 0 {
		panic(fmt.Sprintf("sharepart: %s: negative start offset %d", key, init.StartOffset))
	}
	p := &Partition{
		key:         key,
		cfg:         cfg.withDefaults(),
		spso:        init.StartOffset,
		speo:        init.StartOffset,
		stateEpoch:  init.StateEpoch,
		leaderEpoch: init.LeaderEpoch,
		// The first snapshot has epoch 0, as Kafka's.
		snapshotEpoch: -1,
	}
	return p, []Record{p.snapshot(now)}
}

// Key returns the share-partition's key.
func (p *Partition) Key() Key { return p.key }

// StartOffset is the share-partition start offset (SPSO): every record
// below it has been acknowledged or archived.
func (p *Partition) StartOffset() int64 { return p.spso }

// EndOffset is the share-partition end offset (SPEO): the next offset that
// no fetch has considered. Kafka's endOffset is this minus one.
func (p *Partition) EndOffset() int64 { return p.speo }

// StateEpoch is the share-partition's state epoch, bumped by every
// ResetStartOffset.
func (p *Partition) StateEpoch() int32 { return p.stateEpoch }

// LeaderEpoch is the leader epoch this Partition writes its records under.
func (p *Partition) LeaderEpoch() int32 { return p.leaderEpoch }

// DeliveryCompleteCount is the number of acknowledged or archived offsets
// at or above SPSO (KIP-1226).
func (p *Partition) DeliveryCompleteCount() int64 { return p.complete }

// Lag is KIP-1226's share-partition lag given the partition's end offset
// (high watermark, or last stable offset under read_committed): the
// records from SPSO on that are not yet done. Never negative.
func (p *Partition) Lag(partitionEnd int64) int64 {
	return max(0, partitionEnd-p.spso-p.complete)
}

// Counts is the number of offsets in each state in the in-flight window.
type Counts struct {
	Available, Acquired, Acknowledged, Archived int64
}

// Counts returns how many in-flight offsets are in each state.
func (p *Partition) Counts() Counts {
	var c Counts
	for _, r := range p.runs {
		switch r.state {
		case Available:
			c.Available += r.len()
		case Acquired:
			c.Acquired += r.len()
		case Acknowledged:
			c.Acknowledged += r.len()
		case Archived:
			c.Archived += r.len()
		}
	}
	return c
}

// Batch describes in-flight offsets [First, Last] that share a state.
type Batch struct {
	First, Last   int64
	State         State
	DeliveryCount int16
	Member        string // while Acquired
	Deadline      int64  // while Acquired: Unix ms when the lock ends; else -1
}

// Batches returns the in-flight window [StartOffset, EndOffset) in order,
// one Batch per run of records that agree on everything. The caller owns
// the slice.
func (p *Partition) Batches() []Batch {
	out := make([]Batch, len(p.runs))
	for i, r := range p.runs {
		out[i] = Batch{r.first, r.last, r.state, r.count, r.member, r.deadline}
	}
	return out
}

// markDirty notes that the durable form of [first, last] changed.
func (p *Partition) markDirty(first, last int64) {
	if n := len(p.dirty); n > 0 && p.dirty[n-1].LastOffset+1 == first {
		p.dirty[n-1].LastOffset = last
		return
	}
	p.dirty = append(p.dirty, StateBatch{FirstOffset: first, LastOffset: last})
}

// finish ends a step: it merges runs, moves SPSO, and returns the record
// that makes the step durable, if anything durable changed.
func (p *Partition) finish(now int64) []Record {
	p.normalize()
	p.advanceStart()
	if len(p.dirty) == 0 && !p.startMoved {
		return nil
	}
	batches := p.durableBatches(p.dirty)
	p.dirty, p.startMoved = p.dirty[:0], false
	if p.updates >= p.cfg.SnapshotUpdateRecordsPerSnapshot {
		return []Record{p.snapshot(now)}
	}
	p.updates++
	return []Record{EncodeUpdate(p.key, &UpdateValue{
		SnapshotEpoch:         p.snapshotEpoch,
		LeaderEpoch:           p.leaderEpoch,
		StartOffset:           p.spso,
		DeliveryCompleteCount: clampCount(p.complete),
		StateBatches:          batches,
	})}
}

// Snapshot returns a ShareSnapshot record of the whole durable state. Once
// it is written, Restore needs no older record of this share-partition, so
// the caller may prune them. Steps write snapshots on their own every
// SnapshotUpdateRecordsPerSnapshot records.
func (p *Partition) Snapshot(now int64) []Record {
	return []Record{p.snapshot(now)}
}

func (p *Partition) snapshot(now int64) Record {
	p.snapshotEpoch++
	p.updates = 0
	all := []StateBatch{{FirstOffset: p.spso, LastOffset: p.speo - 1}}
	if p.spso == p.speo {
		all = nil
	}
	return EncodeSnapshot(p.key, &SnapshotValue{
		SnapshotEpoch:         p.snapshotEpoch,
		StateEpoch:            p.stateEpoch,
		LeaderEpoch:           p.leaderEpoch,
		StartOffset:           p.spso,
		CreateTimestamp:       now,
		WriteTimestamp:        now,
		DeliveryCompleteCount: clampCount(p.complete),
		StateBatches:          p.durableBatches(all),
	})
}

// durableBatches returns the durable form of the in-flight offsets in
// ranges (sorted or not, possibly overlapping, possibly reaching outside
// the window), leaving out never-delivered available offsets, which need no
// record. Neighbouring batches that agree are merged.
func (p *Partition) durableBatches(ranges []StateBatch) []StateBatch {
	sortBatches(ranges)
	var out []StateBatch
	covered := p.spso // offsets below are done or already emitted
	for _, rg := range ranges {
		first, last := max(rg.FirstOffset, covered), min(rg.LastOffset, p.speo-1)
		if first > last {
			continue
		}
		covered = last + 1
		for i := p.find(first); i < len(p.runs) && p.runs[i].first <= last; i++ {
			r := p.runs[i]
			st, n := r.durable()
			if st == Available && n == 0 {
				continue
			}
			sb := StateBatch{max(r.first, first), min(r.last, last), st, n}
			if k := len(out); k > 0 && out[k-1].LastOffset+1 == sb.FirstOffset &&
				out[k-1].DeliveryState == st && out[k-1].DeliveryCount == n {
				out[k-1].LastOffset = sb.LastOffset
				continue
			}
			out = append(out, sb)
		}
	}
	return out
}

func sortBatches(bs []StateBatch) {
	slices.SortFunc(bs, func(a, b StateBatch) int { return cmp.Compare(a.FirstOffset, b.FirstOffset) })
}

func clampCount(n int64) int32 {
	return int32(min(n, 1<<31-1))
}
