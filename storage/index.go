package storage

import (
	"encoding/binary"
	"fmt"
	"sort"

	"github.com/fjordlog/fjord/storage/recordbatch"
)

// offsetEntry maps a batch's last offset (relative to the segment base) to
// the batch's byte position in the .log file.
type offsetEntry struct {
	rel int32
	pos int32
}

// timeEntry records that up to relative offset rel, the largest timestamp in
// the segment is ts. Entries are sparse (one per offset index entry at the
// most): the segment's own maximum can be past the last one (segState.maxTS).
type timeEntry struct {
	ts  int64
	rel int32
}

const (
	offsetEntryLen = 8
	timeEntryLen   = 12
)

// index holds a segment's sparse offset and time indexes in memory: the
// active segment's, which serve its lookups. The .index and .timeindex
// files are written whole when the segment is sealed or the log closes
// cleanly (segment.writeIndexFiles), so no descriptor stays open for them;
// a sealed segment's lookups read them back through the IndexCache.
//
// Invariant: offsets and positions increase strictly along offs; timestamps
// increase strictly along times.
// Owner: the log's writer (under Log.mu) appends; readers get the slices
// through segment.publish and search them without locks, since appends never
// modify existing elements.
type index struct {
	offs  []offsetEntry
	times []timeEntry
}

func (ix *index) appendOffset(rel, pos int32) {
	if n := len(ix.offs); n > 0 && (ix.offs[n-1].rel >= rel || ix.offs[n-1].pos >= pos) {
		return
	}
	ix.offs = append(ix.offs, offsetEntry{rel, pos})
}

func (ix *index) appendTime(ts int64, rel int32) {
	if n := len(ix.times); n > 0 && (ix.times[n-1].ts >= ts || ix.times[n-1].rel > rel) {
		return
	}
	ix.times = append(ix.times, timeEntry{ts, rel})
}

// lookupPos returns the position to start scanning from for relative offset
// rel: the position of the last indexed batch ending before rel, or 0.
func lookupPos(offs []offsetEntry, rel int32) int32 {
	i := sort.Search(len(offs), func(i int) bool { return offs[i].rel >= rel })
	if i == 0 {
		return 0
	}
	// offs[i-1] ends before rel, so rel lies after its batch.
	return offs[i-1].pos
}

// lookupTime returns the relative offset to start scanning from for the first
// record with timestamp >= ts: the last entry whose running maximum is below
// ts ends a prefix with nothing matching.
func lookupTime(times []timeEntry, ts int64) int32 {
	i := sort.Search(len(times), func(i int) bool { return times[i].ts >= ts })
	if i == 0 {
		return 0
	}
	return times[i-1].rel + 1
}

// loadIndexFiles reads index files; a malformed file is reported so the
// caller rebuilds from the log.
func loadIndexFiles(fs FS, offPath, timePath string, logSize int64) ([]offsetEntry, []timeEntry, error) {
	ob, err := readFile(fs, offPath)
	if err != nil {
		return nil, nil, err
	}
	tb, err := readFile(fs, timePath)
	if err != nil {
		return nil, nil, err
	}
	if len(ob)%offsetEntryLen != 0 || len(tb)%timeEntryLen != 0 {
		return nil, nil, fmt.Errorf("index sizes %d/%d are not whole entries", len(ob), len(tb))
	}
	offs := make([]offsetEntry, 0, len(ob)/offsetEntryLen)
	for b := ob; len(b) > 0; b = b[offsetEntryLen:] {
		e := offsetEntry{int32(binary.BigEndian.Uint32(b)), int32(binary.BigEndian.Uint32(b[4:]))}
		if e.pos < 0 || int64(e.pos)+recordbatch.HeaderLen > logSize || (len(offs) > 0 && (e.rel <= offs[len(offs)-1].rel || e.pos <= offs[len(offs)-1].pos)) {
			return nil, nil, fmt.Errorf("offset index entry %d (%d@%d) out of order or past the log", len(offs), e.rel, e.pos)
		}
		offs = append(offs, e)
	}
	times := make([]timeEntry, 0, len(tb)/timeEntryLen)
	for b := tb; len(b) > 0; b = b[timeEntryLen:] {
		e := timeEntry{int64(binary.BigEndian.Uint64(b)), int32(binary.BigEndian.Uint32(b[8:]))}
		if len(times) > 0 && (e.ts <= times[len(times)-1].ts || e.rel < times[len(times)-1].rel) {
			return nil, nil, fmt.Errorf("time index entry %d out of order", len(times))
		}
		times = append(times, e)
	}
	return offs, times, nil
}
