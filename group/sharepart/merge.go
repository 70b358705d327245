package sharepart

import "slices"

// The share coordinator's side of the state batches (broker/sharecoord):
// it keeps each share-partition's batches merged, as Kafka's
// PersisterStateBatchCombiner does, and must reject what Restore would
// call corrupt before it writes it.

// Merge returns base with more merged in, cut at start: the parts of
// either below start are dropped (none when start is -1, "unchanged"),
// and where batches overlap each offset takes the greatest (delivery
// count, then state) any of them gives it, as Restore replays updates.
// The result is sorted and disjoint, neighbours that agree are joined,
// Acquired reads as Available (a lock does not outlive its leader), and
// offsets left available and never delivered are left out, which Restore
// reads the same way. Neither input is modified; the caller owns the
// result.
func Merge(start int64, base, more []StateBatch) []StateBatch {
	all := make([]StateBatch, 0, len(base)+len(more))
	all = append(all, base...)
	all = append(all, more...)
	out := combine(prune(all, start))
	return slices.Clip(out)
}

// CheckBatches reports, as an error wrapping ErrCorrupt, batches no share
// coordinator may store: a start offset below -1, an empty or negative
// range, a range ending at the largest offset, an unknown delivery state,
// a negative delivery count. Restore refuses records holding them.
func CheckBatches(start int64, bs []StateBatch) error { return checkBatches(start, bs) }
