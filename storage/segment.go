package storage

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"sync/atomic"
	"time"

	"github.com/fjordlog/fjord/storage/recordbatch"
)

// segment is one .log file and its indexes.
//
// Invariants: base <= every offset in the file < next; size is the byte
// length of the complete batches in the file (the file may be longer only
// transiently during a failed write, which the log truncates back).
// Writer-owned fields (next, size, bytesSinceIndex, maxTS, maxTSOffset,
// firstAppend, lastEpoch, ix) change under Log.mu and are published to
// readers under Log.view (see Log).
type segment struct {
	base int64
	path string // the .log file
	fs   FS
	// h is the .log file in the node's FileCache; readers pin it for each
	// read. f is the writer's own pin of it: set while the segment is the
	// active one (and while Open or compaction sets it up), nil once it
	// is sealed, so a sealed segment holds no descriptor while idle.
	// Writer-owned like next and size.
	h *cachedFile
	f File

	next            int64 // offset after the last batch
	size            int64 // bytes of complete batches
	bytesSinceIndex int32
	maxTS           int64 // largest batch max timestamp, -1 when empty
	maxTSOffset     int64 // last offset of the batch that carried maxTS (as in the time index)
	firstAppend     time.Time
	lastEpoch       int32 // leader epoch of the last batch, -1 when empty or unstamped
	ix              index
	// ixOnDisk: the indexes are in the segment's index files, durably,
	// and not in ix (empty): a sealed segment's, which readers get from
	// the log's IndexCache. Writer-owned; published in segState.onDisk.
	ixOnDisk bool
	// ixGen and ixRetired are the IndexCache's, under its mu: ixGen
	// moves whenever the writer changes what the segment's index files
	// say (a roll installs them, a truncation takes them back), so a
	// load that read the files before does not cache what it read;
	// ixRetired: the segment is gone or replaced, and nothing of it is
	// cached again. ixWarned: its files were found unusable, and said so
	// once (with a budget of 0 nothing is cached, and every lookup loads).
	ixGen     uint64
	ixRetired bool
	ixWarned  bool
	// allocated is the file's length on disk, which runs ahead of size in
	// preallocated chunks: an fdatasync after a write that grows the file
	// must also commit the new length, and costs several times more than
	// one after a write into space already allocated (measured here: p50
	// 95 µs vs 58 µs, p99 0.3-1.4 ms vs 0.2 ms). Allocated is not written:
	// the first write-back into each fallocated block still converts its
	// extent, a journal commit; zeros written ahead would spare it, at the
	// costs docs/benchmarks.md weighs ("Fallocated space is not written
	// space"). The zeroed tail beyond size is never read (readers stop at
	// size), recovery stops at it (a zero batch length is invalid), and it
	// is cut off at roll and at close.
	// Invariant: size <= allocated.
	allocated  int64
	noPrealloc bool // the filesystem refused fallocate

	// txn is the aborted transaction index (txnindex.go); nil while the
	// segment holds no abort that ended a transaction, and then there is
	// no .txnindex file. Writer-owned; aborted publishes its entries.
	txn     *txnIndex
	aborted atomic.Pointer[[]AbortedTxn]

	pub     atomic.Pointer[segState] // what readers may see; replaced by publish
	removed atomic.Bool              // set when retention deleted the files
}

// segState is a segment's readable state at one moment. Index slices are
// shared with the writer, which only ever appends to them, so the prefix a
// reader holds never changes.
type segState struct {
	size  int64
	offs  []offsetEntry
	times []timeEntry
	// maxTS is the segment's largest batch max timestamp (-1: none): the
	// sparse time index's last entry can be behind it.
	maxTS int64
	// onDisk: offs and times are nil, and the indexes are in the
	// segment's files (Log.indexesOf).
	onDisk bool
}

// publish makes the writer's current state visible to readers.
// REQUIRES: Log.mu held (or the segment not yet shared).
func (s *segment) publish() {
	s.pub.Store(&segState{size: s.size, offs: s.ix.offs, times: s.ix.times, maxTS: s.maxTS, onDisk: s.ixOnDisk})
}

// indexOnDisk leaves the segment's indexes to its files, which must hold
// them durably (written at its roll or by Open), and returns what the
// writer held; publish makes readers look there.
// REQUIRES: Log.mu held (or the segment not yet shared).
func (s *segment) indexOnDisk() index {
	ix := s.ix
	s.ix, s.ixOnDisk = index{}, true
	return ix
}

// dir is the directory of the segment's files.
func (s *segment) dir() string { return filepath.Dir(s.path) }

// preallocChunk is how far ahead of the data a segment file is extended.
const preallocChunk = 4 << 20

// ensureSpace extends the file so that n more bytes fit without growing it.
// A filesystem without fallocate just grows the file with each write.
func (s *segment) ensureSpace(n int, limit int64) {
	if s.noPrealloc || s.size+int64(n) <= s.allocated {
		return
	}
	want := max(s.size+int64(n), min(s.allocated+preallocChunk, limit))
	if err := s.f.Preallocate(s.allocated, want-s.allocated); err != nil {
		s.noPrealloc = true
		return
	}
	s.allocated = want
}

// trimTail cuts the preallocated tail so the file holds exactly its batches,
// as Kafka's tools expect.
func (s *segment) trimTail() error {
	if s.allocated == s.size {
		return nil
	}
	if err := s.f.Truncate(s.size); err != nil {
		return fmt.Errorf("segment %d: trim preallocated tail: %w", s.base, err)
	}
	s.allocated = s.size
	return nil
}

func segmentPath(dir string, base int64, ext string) string {
	return filepath.Join(dir, fmt.Sprintf("%020d%s", base, ext))
}

// createSegment creates an empty active segment. Its index files are not
// created: an active segment's indexes live in memory, and are written out
// when it is sealed (roll) or the log closes cleanly; after a crash
// recovery rebuilds them from the .log anyway. Stale index files of an
// older segment of this base are removed, so a clean start cannot take
// them for this one's.
func createSegment(fs FS, files *FileCache, dir string, base int64) (*segment, error) {
	s := &segment{base: base, next: base, path: segmentPath(dir, base, ".log"), fs: fs, maxTS: -1, maxTSOffset: -1, lastEpoch: -1}
	f, err := fs.OpenFile(s.path, os.O_RDWR|os.O_CREATE|os.O_TRUNC, FileMode)
	if err != nil {
		return nil, fmt.Errorf("segment %d: %w", base, err)
	}
	s.h, s.f = files.adopt(fs, s.path, f), f
	if err := s.removeIndexFiles(); err != nil {
		s.close()
		return nil, err
	}
	// The new file's directory entry must survive a crash once data in it
	// is acknowledged.
	if err := fs.SyncDir(dir); err != nil {
		s.close()
		return nil, fmt.Errorf("segment %d: sync directory: %w", base, err)
	}
	return s, nil
}

// unpinWriter gives up the writer's pin of the .log file (at a seal, or
// after Open set up a sealed segment): it may now be closed while idle.
// REQUIRES: Log.mu held (or the segment not yet shared).
func (s *segment) unpinWriter() {
	if s.f != nil {
		s.f = nil
		s.h.release()
	}
}

// pinWriter takes the writer's pin of the .log file, for a sealed segment
// that becomes the active one again (truncation).
// REQUIRES: Log.mu held.
func (s *segment) pinWriter() error {
	if s.f != nil {
		return nil
	}
	f, err := s.h.acquire()
	if err != nil {
		return fmt.Errorf("segment %d: %w", s.base, err)
	}
	s.f = f
	return nil
}

// writeIndexFiles writes the in-memory indexes to the .index and
// .timeindex files whole, fdatasynced when sync is set. The files are
// closed again: no descriptor stays open for them.
func (s *segment) writeIndexFiles(sync bool) error {
	if s.ixOnDisk {
		return nil // the files hold them already
	}
	offs := make([]byte, 0, len(s.ix.offs)*offsetEntryLen)
	for _, e := range s.ix.offs {
		offs = binary.BigEndian.AppendUint32(offs, uint32(e.rel))
		offs = binary.BigEndian.AppendUint32(offs, uint32(e.pos))
	}
	entries := s.ix.times
	if n := len(entries); s.maxTS >= 0 && (n == 0 || entries[n-1].ts < s.maxTS) {
		// The file ends with the segment's largest timestamp, as Kafka's
		// does once a segment rolls: a restart trusts it as the maximum
		// (indexesAgree). A copy, so the writer's slice, which readers
		// share, is not appended to here.
		entries = append(slices.Clip(entries), timeEntry{s.maxTS, int32(s.maxTSOffset - s.base)})
	}
	times := make([]byte, 0, len(entries)*timeEntryLen)
	for _, e := range entries {
		times = binary.BigEndian.AppendUint64(times, uint64(e.ts))
		times = binary.BigEndian.AppendUint32(times, uint32(e.rel))
	}
	dir := filepath.Dir(s.path)
	for _, w := range []struct {
		ext  string
		data []byte
	}{{".index", offs}, {".timeindex", times}} {
		if err := writeWhole(s.fs, segmentPath(dir, s.base, w.ext), w.data, sync); err != nil {
			return fmt.Errorf("segment %d: write %s: %w", s.base, w.ext, err)
		}
	}
	return nil
}

// removeIndexFiles removes the segment's index files, if any: their
// entries no longer describe the .log (a new segment, or one truncated).
func (s *segment) removeIndexFiles() error {
	for _, ext := range []string{".index", ".timeindex"} {
		if err := s.fs.Remove(segmentPath(filepath.Dir(s.path), s.base, ext)); err != nil && !os.IsNotExist(err) {
			return fmt.Errorf("segment %d: %w", s.base, err)
		}
	}
	return nil
}

// seenBatch is what recovery replays into the producer table.
type seenBatch struct {
	base   int64
	info   recordbatch.Info
	marker *recordbatch.EndTxnMarker // a control batch's; nil if none is readable
}

// replayFunc takes a batch recovery replays: its base offset, header and,
// for a control batch, its marker (nil if unreadable).
type replayFunc func(base int64, info recordbatch.Info, m *recordbatch.EndTxnMarker)

// markerOf returns the marker of a control batch whose whole bytes are b,
// nil for a data batch or a control batch without a readable marker (an
// empty one, or one no leader of ours writes, which then ends nothing).
func markerOf(b []byte, info recordbatch.Info) *recordbatch.EndTxnMarker {
	if !info.Control || len(b) < info.Bytes {
		return nil
	}
	m, err := recordbatch.ParseEndTxnMarker(b[:info.Bytes], info)
	if err != nil {
		return nil
	}
	return &m
}

// openSegment opens an existing segment. When recover is set (an unclean
// shutdown, or the index files are unusable) every batch is read and checked
// (CRC-32C included), a torn or corrupt tail is cut off, and the indexes are
// rebuilt. Otherwise only the batch headers are walked, to find next and the
// largest timestamp, and the index files are trusted.
//
// contiguous says every batch must start exactly where the previous one
// ended: the active segment of a log that is never compacted (see
// Config.Compacted). Elsewhere gaps are legitimate (plausibleBase).
//
// beforeCut, if not nil, runs before recovery cuts a damaged tail off the
// file (with the position of the cut); an error from it leaves the file
// as it is and fails the open.
//
// The segment comes back with the writer's pin of its file held (s.f):
// the caller unpins a sealed one. writeIndex has rebuilt indexes written
// out (fdatasynced); an active segment's stay in memory until its seal or
// a clean close (createSegment).
//
// onBatch, if not nil, sees every batch from replayFrom on (those whose
// last offset is at or past it); a trusted segment is then walked from
// its last index entry below replayFrom, not from its start. A recovering
// open hands each batch to onBatch as it is checked (no rebuild can
// follow it); a trusting one holds them until the segment is accepted.
// Either way what is held is bounded by the batches after replayFrom,
// not by the segment: replaying a 1 GiB active segment from its start
// held 90 bytes a batch, a transient 100-250 MiB at every restart of a
// soak's nodes.
func openSegment(fs FS, files *FileCache, dir string, base int64, recover, contiguous, writeIndex bool, indexInterval int32, onBatch replayFunc, replayFrom int64, beforeCut func(pos int64) error) (*segment, error) {
	s := &segment{base: base, next: base, path: segmentPath(dir, base, ".log"), fs: fs, maxTS: -1, maxTSOffset: -1, lastEpoch: -1}
	s.h = files.handle(fs, s.path)
	var err error
	if s.f, err = s.h.acquire(); err != nil {
		s.h.drop()
		return nil, fmt.Errorf("segment %d: %w", base, err)
	}
	st, err := s.f.Stat()
	if err != nil {
		s.close()
		return nil, fmt.Errorf("segment %d: %w", base, err)
	}
	fileSize := st.Size()
	var offs []offsetEntry
	var times []timeEntry
	if !recover {
		offs, times, err = loadIndexFiles(fs, segmentPath(dir, base, ".index"), segmentPath(dir, base, ".timeindex"), fileSize)
		if err != nil {
			recover = true
		}
	}
	rebuild := recover
	// A trusted segment is walked only from its last index entry, to find
	// its end; everything before is known from the indexes. Recovery, and a
	// caller that must see every batch, walk it all.
	var start int64
	if !recover {
		// The time index ends with the segment's largest timestamp; the
		// walk only adds what follows its start.
		if n := len(times); n > 0 {
			s.maxTS, s.maxTSOffset = times[n-1].ts, base+int64(times[n-1].rel)
		}
		// From the last index entry (its batch ends below replayFrom, so
		// every batch replay needs comes after it).
		for _, e := range offs {
			if onBatch != nil && base+int64(e.rel) >= replayFrom {
				break
			}
			start = int64(e.pos)
		}
	}
	// A trusting pass may end in a rebuild, which must not replay its
	// batches twice: it hands them to onBatch only once the segment is
	// accepted. A recovering pass is final.
	var seen []seenBatch
	var collect func([]byte, recordbatch.Info)
	switch {
	case onBatch == nil:
	case recover:
		collect = func(b []byte, info recordbatch.Info) {
			if base := recordbatch.BaseOffset(b); base+int64(info.LastDelta) >= replayFrom {
				onBatch(base, info, markerOf(b, info))
			}
		}
	default:
		collect = func(b []byte, info recordbatch.Info) {
			if base := recordbatch.BaseOffset(b); base+int64(info.LastDelta) >= replayFrom {
				seen = append(seen, seenBatch{base, info, markerOf(b, info)})
			}
		}
	}
	good, err := s.scan(start, fileSize, recover, contiguous, rebuild, indexInterval, collect)
	if err != nil {
		s.close()
		return nil, err
	}
	s.size = good // indexesAgree reads up to it
	if !recover && !indexesAgree(s, offs, times) {
		// Well-formed but wrong index files: rebuild from the log.
		s.close()
		return openSegment(fs, files, dir, base, true, contiguous, writeIndex, indexInterval, onBatch, replayFrom, beforeCut)
	}
	if good < fileSize {
		if !recover {
			// A clean shutdown never leaves a partial batch: the file changed
			// behind our back. Rebuild everything from what is valid.
			s.close()
			return openSegment(fs, files, dir, base, true, contiguous, writeIndex, indexInterval, onBatch, replayFrom, beforeCut)
		}
		if beforeCut != nil {
			if err := beforeCut(good); err != nil {
				s.close()
				return nil, fmt.Errorf("segment %d: %w", base, err)
			}
		}
		// A cut that starts at a zero header (the preallocated tail every
		// kill -9 leaves, or zeroed damage) need not be durable: every
		// later open, clean or not, stops at a zero header too and cuts
		// there again. (An unclean Open of a log with data fdatasyncs the
		// active segment after this, which commits the cut by the way.) A
		// cut of anything else must be durable: a clean close that wrote
		// nothing more would let a power cut bring back a damaged batch
		// under a clean-shutdown marker, whose open walks headers without
		// checking CRCs.
		zeros := zeroHeaderAt(s.f, good, fileSize)
		if err := s.f.Truncate(good); err != nil {
			s.close()
			return nil, fmt.Errorf("segment %d: truncate torn tail at %d: %w", base, good, err)
		}
		if !zeros {
			if err := s.f.Sync(); err != nil {
				s.close()
				return nil, fmt.Errorf("segment %d: sync after truncate: %w", base, err)
			}
		}
	}
	s.size, s.allocated = good, good
	for _, sb := range seen {
		onBatch(sb.base, sb.info, sb.marker)
	}
	if !rebuild {
		s.ix.offs, s.ix.times = offs, times
	} else if writeIndex {
		// scan filled the in-memory indexes; write them out, durably (a
		// clean close, which used to sync every index, now writes only
		// the active segment's), so a later clean start can trust them.
		if err := s.writeIndexFiles(true); err != nil {
			s.close()
			return nil, err
		}
	}
	return s, nil
}

// scan walks the batches in [start, fileSize) and returns the length
// of the valid prefix. With check, each batch's CRC is verified; with
// rebuild, the in-memory indexes are filled. onBatch sees each good batch
// (its bytes when check is set, and for a control batch, whose CRC is then
// verified too: replay needs its marker; header bytes otherwise).
func (s *segment) scan(start, fileSize int64, check, contiguous, rebuild bool, indexInterval int32, onBatch func([]byte, recordbatch.Info)) (int64, error) {
	// Large reads for large segments, but no more than the segment: Open
	// scans every active segment, and a broker with many small partitions
	// would otherwise allocate 256 KiB for each.
	r := bufio.NewReaderSize(io.NewSectionReader(s.f, start, fileSize-start), int(min(256<<10, fileSize-start)))
	pos := start
	var hdr [recordbatch.HeaderLen]byte
	var buf []byte
	var sinceIndex int32
	for pos < fileSize {
		if _, err := io.ReadFull(r, hdr[:]); err != nil {
			return pos, nil // torn header
		}
		info, err := recordbatch.ParseHeader(hdr[:])
		base := recordbatch.BaseOffset(hdr[:])
		// A scan starting mid-segment (at an index entry) takes its first
		// batch's base as given.
		if err != nil || pos+int64(info.Bytes) > fileSize || info.LastDelta < 0 || !plausibleBase(s, base, info.LastDelta) ||
			(contiguous && base != s.next && (pos != start || start == 0)) {
			return pos, nil
		}
		batch := hdr[:]
		if check || (onBatch != nil && info.Control) {
			if cap(buf) < info.Bytes {
				buf = make([]byte, info.Bytes)
			}
			buf = buf[:info.Bytes]
			copy(buf, hdr[:])
			if _, err := io.ReadFull(r, buf[recordbatch.HeaderLen:]); err != nil {
				return pos, nil
			}
			if recordbatch.CheckCRC(buf) != nil {
				return pos, nil
			}
			batch = buf
		} else if _, err := r.Discard(info.Bytes - recordbatch.HeaderLen); err != nil {
			return pos, nil
		}
		last := base + int64(info.LastDelta)
		if info.MaxTimestamp > s.maxTS {
			s.maxTS, s.maxTSOffset = info.MaxTimestamp, last
		}
		if rebuild {
			sinceIndex += int32(info.Bytes)
			if sinceIndex >= indexInterval || len(s.ix.offs) == 0 {
				s.ix.offs = append(s.ix.offs, offsetEntry{int32(last - s.base), int32(pos)})
				sinceIndex = 0
				s.noteTime()
			}
		}
		if onBatch != nil {
			onBatch(batch, info)
		}
		s.next = last + 1
		s.lastEpoch = recordbatch.PartitionLeaderEpoch(hdr[:])
		pos += int64(info.Bytes)
	}
	return pos, nil
}

// zeroHeaderAt reports whether the bytes of f from pos, up to a batch
// header's length or end, are all zero: no batch header a scan could
// accept starts there. A read that fails says no, which costs a sync.
func zeroHeaderAt(f File, pos, end int64) bool {
	var hdr [recordbatch.HeaderLen]byte
	n := int(min(int64(len(hdr)), end-pos))
	if _, err := f.ReadAt(hdr[:n], pos); err != nil {
		return false
	}
	for _, b := range hdr[:n] {
		if b != 0 {
			return false
		}
	}
	return true
}

// plausibleBase says whether a batch at base ending lastDelta later may
// follow the batches scanned so far in s. The base offset is not under the
// CRC, so this is all that guards it: offsets must go strictly forward
// (base >= s.next), and the batch must end within the offsets, relative
// to the segment base, that the indexes can hold as int32 (every writer
// rolls before that; Kafka's recovery checks the same). The absolute bound
// keeps base + lastDelta + 1 from overflowing. A batch that fails ends the
// valid prefix: recovery cuts it off with everything after it.
//
// Where a log may hold gaps (its topic is compacted: Config.Compacted),
// they are accepted anywhere, in the active segment too, as Kafka accepts
// them: a follower copies the gaps compaction leaves in its leader's log
// (AppendReplica), and Truncate can make a compacted segment the active
// one, so a gap is no sign of damage. A tighter bound on gaps would have
// recovery cut valid data (and every batch after it) whenever compaction
// removed more offsets than the bound, on a leader as much as a follower,
// since a follower keeps its log when promoted. What it gives up is a
// corrupt base offset that still goes forward and stays in the segment's
// range: such a batch is kept at the wrong offsets. A follower's log end
// pushed past the leader's that way is OFFSET_OUT_OF_RANGE at its next
// fetch and is truncated back (OffsetForLeaderEpoch); one that stays below
// it is not detected, as in Kafka. A log that is never compacted has no
// gaps, so its active segment must also be contiguous (scan's contiguous
// flag), which catches a base offset that jumps forward as well.
func plausibleBase(s *segment, base int64, lastDelta int32) bool {
	return base >= s.next && base <= maxBaseOffset && base+int64(lastDelta)-s.base <= maxRelOffset
}

// noteAppended updates the writer's state for a batch of n bytes just
// written at pos: size, indexes, largest timestamp, next offset.
// REQUIRES: Log.mu held.
func (s *segment) noteAppended(pos int64, n int, last, maxTS int64, epoch int32, now int64, indexInterval int32) {
	s.size = pos + int64(n)
	if s.firstAppend.IsZero() {
		s.firstAppend = time.UnixMilli(now)
	}
	s.bytesSinceIndex += int32(n)
	if maxTS > s.maxTS {
		s.maxTS, s.maxTSOffset = maxTS, last
	}
	if s.bytesSinceIndex >= indexInterval || len(s.ix.offs) == 0 {
		s.ix.appendOffset(int32(last-s.base), int32(pos))
		s.bytesSinceIndex = 0
		s.noteTime()
	}
	s.next = last + 1
	s.lastEpoch = epoch
}

// noteTime adds a time index entry for the largest timestamp so far, if it
// grew since the last entry. It is called where the offset index takes an
// entry (every index.interval.bytes), as Kafka's time index is: an entry
// per batch whose timestamp rises, which is nearly every batch, held 12
// bytes of memory per batch for the life of the segment.
func (s *segment) noteTime() {
	if s.maxTS >= 0 {
		s.ix.appendTime(s.maxTS, int32(s.maxTSOffset-s.base))
	}
}

// walkHeaders reads the headers of the batches in [pos, size), in order,
// and calls fn with each batch's position and header (recordbatch.HeaderLen bytes,
// valid during the call only) until fn returns false or an error. pos must
// be a batch boundary; a length that cannot be a batch, or runs past size,
// is recordbatch.ErrCorrupt.
func (s *segment) walkHeaders(pos, size int64, fn func(pos int64, hdr []byte) (bool, error)) error {
	f, err := s.h.acquire()
	if err != nil {
		return fmt.Errorf("segment %d: %w", s.base, err)
	}
	defer s.h.release()
	var hdr [recordbatch.HeaderLen]byte
	for pos < size {
		if _, err := f.ReadAt(hdr[:], pos); err != nil {
			return fmt.Errorf("segment %d: read header at %d: %w", s.base, pos, err)
		}
		n := recordbatch.Length(hdr[:])
		if n < recordbatch.HeaderLen || pos+n > size {
			return fmt.Errorf("%w: segment %d: batch length %d at %d of %d", recordbatch.ErrCorrupt, s.base, n, pos, size)
		}
		if more, err := fn(pos, hdr[:]); err != nil || !more {
			return err
		}
		pos += n
	}
	return nil
}

// readAt reads n bytes at pos, fewer at the end of the file.
func (s *segment) readAt(pos int64, n int) ([]byte, error) {
	return s.readInto(nil, pos, n)
}

// readInto reads n bytes at pos into dst's storage when it is large enough.
func (s *segment) readInto(dst []byte, pos int64, n int) ([]byte, error) {
	buf := dst[:0]
	if cap(buf) < n {
		buf = make([]byte, n)
	}
	buf = buf[:n]
	f, err := s.h.acquire()
	if err != nil {
		return nil, fmt.Errorf("segment %d: %w", s.base, err)
	}
	got, err := f.ReadAt(buf, pos)
	s.h.release()
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("segment %d: read at %d: %w", s.base, pos, err)
	}
	return buf[:got], nil
}

// findBatch returns the position of the batch containing offset, scanning
// batch headers forward from the index's hint. size bounds the scan.
//
// The hint is only a hint: its entry says the batch at its position ends
// at its offset, and a header there that does not (a length below a
// header's or past the segment, another last offset) says the index is
// wrong, not the log. The scan then starts again from the segment's first
// batch. Only a header met after a checked start is damage
// (CorruptLogError), which makes a leader resign and a follower cut its
// log: an index file gone bad must do neither, nor skip records.
func (s *segment) findBatch(offs []offsetEntry, offset int64, size int64) (int64, error) {
	// An offset below the base (a read walking on across a gap between
	// segments, perhaps wider than an int32) starts at the first batch.
	rel := int32(min(max(offset-s.base, 0), math.MaxInt32))
	i := sort.Search(len(offs), func(i int) bool { return offs[i].rel >= rel })
	var hint, hintLast int64 // offs[i-1] ends before rel, so rel lies after its batch
	if i > 0 {
		hint, hintLast = int64(offs[i-1].pos), s.base+int64(offs[i-1].rel)
	}
	pos := hint
	if pos >= size {
		return size, nil
	}
	f, err := s.h.acquire()
	if err != nil {
		return 0, fmt.Errorf("segment %d: %w", s.base, err)
	}
	defer s.h.release()
	var hdr [recordbatch.HeaderLen]byte
	for pos < size {
		if pos == hint && hint > 0 && pos+recordbatch.HeaderLen > size {
			pos, hint = 0, 0 // no batch starts there
			continue
		}
		if _, err := f.ReadAt(hdr[:], pos); err != nil {
			return 0, fmt.Errorf("segment %d: read header at %d: %w", s.base, pos, err)
		}
		n := recordbatch.Length(hdr[:])
		if pos == hint && hint > 0 {
			if n < recordbatch.HeaderLen || pos+n > size || recordbatch.LastOffset(hdr[:]) != hintLast {
				pos, hint = 0, 0
				continue
			}
		}
		if n < recordbatch.HeaderLen {
			return 0, &CorruptLogError{Segment: s.base, Position: pos, Offset: offset,
				Reason: fmt.Sprintf("batch length %d", n-recordbatch.PrefixLen)}
		}
		if recordbatch.LastOffset(hdr[:]) >= offset {
			return pos, nil
		}
		pos += n
	}
	return size, nil
}

// close gives the segment's descriptors back: the .log's once no reader
// holds it. REQUIRES: Log.mu held, or the segment not shared (or no
// longer reachable by the writer: see remove).
func (s *segment) close() {
	s.unpinWriter()
	if s.h != nil {
		s.h.drop()
	}
	s.closeTxnIndex()
}

// remove unlinks the segment's files. The descriptors stay open for a grace
// period so reads already under way finish (Kafka's file.delete.delay.ms).
// The .log goes first and the aborted transaction index last: a crash part
// way (retention does not sync the directory) then leaves either the whole
// segment back, index included, or a .txnindex without its .log, which
// Open removes.
func (s *segment) remove(grace time.Duration) error {
	s.removed.Store(true)
	s.keepOpen()
	exts := []string{".log", ".index", ".timeindex"}
	if s.txn != nil {
		exts = append(exts, txnIndexExt)
	}
	var errs []error
	for _, ext := range exts {
		if err := s.fs.Remove(segmentPath(filepath.Dir(s.path), s.base, ext)); err != nil && !os.IsNotExist(err) {
			errs = append(errs, err)
		}
	}
	s.unpinWriter()
	time.AfterFunc(grace, s.close)
	return errors.Join(errs...)
}

// keepOpen retires the segment's file open: readers that reach the
// segment until its close (after the grace period) read the file as it is
// now, and nothing reopens it by its name, which is about to go or to
// name another file. Should the open fail, they get errFileRetired.
// Log.mu held.
func (s *segment) keepOpen() {
	if _, err := s.h.acquire(); err == nil {
		s.h.retire()
		s.h.release()
		return
	}
	s.h.retire()
}

// indexesAgree cross-checks trusted index files against the log after the
// tail scan: every entry must lie inside the segment, the time index must
// know the largest timestamp the tail holds, and its last entry must name a
// batch that carries that timestamp.
func indexesAgree(s *segment, offs []offsetEntry, times []timeEntry) bool {
	span := s.next - s.base
	if n := len(offs); n > 0 && int64(offs[n-1].rel) >= span {
		return false
	}
	n := len(times)
	if n == 0 {
		return s.maxTS < 0
	}
	last := times[n-1]
	if int64(last.rel) >= span || last.rel < 0 || s.maxTS != last.ts {
		return false
	}
	pos, err := s.findBatch(offs, s.base+int64(last.rel), s.size)
	if err != nil || pos >= s.size {
		return false
	}
	hdr, err := s.readAt(pos, recordbatch.HeaderLen)
	if err != nil {
		return false
	}
	info, err := recordbatch.ParseHeader(hdr)
	return err == nil && info.MaxTimestamp == last.ts && recordbatch.LastOffset(hdr) == s.base+int64(last.rel)
}
