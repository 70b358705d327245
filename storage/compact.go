package storage

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"time"

	"github.com/fjordlog/fjord/storage/recordbatch"
)

// CompactStats reports one cleaning pass.
type CompactStats struct {
	Segments      int   // segments rewritten
	BytesRead     int64 // bytes of the segments examined
	BytesWritten  int64
	RecordsKept   int64
	RecordsPurged int64 // superseded records and expired tombstones
	Duration      time.Duration
}

const cleanedExt = ".cleaned"

// Compact is log compaction (cleanup.policy=compact): in every segment but
// the active one, a record is kept only if it is the latest for its key
// among those segments; a tombstone (null value) that is the latest for its
// key is kept until its segment is older than deleteRetentionMs, then
// removed too. Offsets never change: kept records keep their offsets, and
// each rewritten batch keeps its base offset, offset range and producer
// fields, so reads, indexes and producer state stay valid. Records without a
// key are kept.
//
// Transactions, as in Kafka: only segments wholly below the first unstable
// offset are cleaned (a transaction there is decided, and its marker
// replicated); the batches of aborted transactions (found through the
// aborted transaction indexes) are removed whole and take no part in
// choosing the latest record of a key, so an aborted value never shadows a
// committed one; committed transactions' records are compacted like any
// others. Control batches (markers) are kept, always: Kafka removes one
// once its transaction's records are gone and delete.retention.ms has
// passed, which saves a few bytes per transaction at the cost of rules
// about when a consumer may have missed it; keeping them is the simple
// safe choice. The aborted transaction indexes are left as they are (the
// entries still describe the markers kept).
//
// Rewritten batches keep their codec. A segment is rewritten into
// <base>.log.cleaned, fsynced, its old index files are removed, and the
// cleaned file is renamed over the .log (atomic), so a crash leaves either
// the old segment or the new one; a leftover .cleaned file is removed at
// start-up and missing indexes are rebuilt. Appends continue throughout:
// only the final swap takes the writer's lock.
func (l *Log) Compact(now, deleteRetentionMs int64) (CompactStats, error) {
	start := time.Now()
	var st CompactStats
	// Read before the segment list: a truncation after this point makes
	// every swap below give up.
	gen := l.truncations.Load()
	segs := l.segments()
	if len(segs) < 2 {
		return st, nil
	}
	inactive := segs[:len(segs)-1]
	if fuo, ok := l.FirstUnstableOffset(); ok {
		// Segment i lies below the next one's base.
		n := 0
		for n < len(inactive) && segs[n+1].base <= fuo {
			n++
		}
		inactive = inactive[:n]
	}
	aborted := abortedRangesOf(segs)

	// Pass 1: the latest offset of every key.
	latest := map[string]int64{}
	for _, s := range inactive {
		size := s.pub.Load().size
		st.BytesRead += size
		err := eachStoredBatch(s, size, func(b []byte, info recordbatch.Info) error {
			if info.Control || aborted.has(info, recordbatch.BaseOffset(b)) {
				return nil
			}
			base := recordbatch.BaseOffset(b)
			return recordbatch.EachRecord(b, info, func(r recordbatch.Record) bool {
				if r.Key != nil {
					latest[string(r.Key)] = base + int64(r.OffsetDelta)
				}
				return true
			})
		})
		if err != nil {
			return st, err
		}
	}

	// Pass 2: rewrite each segment that loses something, streaming into its
	// .cleaned file so memory stays at one batch.
	for _, s := range inactive {
		size := s.pub.Load().size
		expired := s.maxTS >= 0 && now-s.maxTS > deleteRetentionMs
		cleaned := segmentPath(l.dir, s.base, ".log"+cleanedExt)
		f, err := l.fs.OpenFile(cleaned, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, FileMode)
		if err != nil {
			return st, fmt.Errorf("segment %d: %w", s.base, err)
		}
		w := bufio.NewWriterSize(f, 256<<10)
		var written, purged int64
		var scratch []byte
		err = eachStoredBatch(s, size, func(b []byte, info recordbatch.Info) error {
			base := recordbatch.BaseOffset(b)
			if info.Control {
				written += int64(len(b))
				_, err := w.Write(b)
				return err
			}
			if aborted.has(info, base) {
				purged += int64(info.Records)
				return nil
			}
			var keep []recordbatch.Record
			err := recordbatch.EachRecord(b, info, func(r recordbatch.Record) bool {
				switch {
				case r.Key == nil:
					keep = append(keep, r)
				case latest[string(r.Key)] != base+int64(r.OffsetDelta):
					purged++
				case r.Value == nil && expired:
					purged++
				default:
					keep = append(keep, r)
				}
				return true
			})
			if err != nil {
				return err
			}
			st.RecordsKept += int64(len(keep))
			out := b // untouched: copied as is
			if len(keep) == 0 {
				return nil
			}
			if len(keep) < int(info.Records) {
				if scratch, err = recordbatch.AppendRewritten(scratch[:0], b, info, keep); err != nil {
					return err
				}
				out = scratch
			}
			written += int64(len(out))
			_, err = w.Write(out)
			return err
		})
		if err == nil {
			err = w.Flush()
		}
		if err == nil && purged > 0 {
			err = f.Sync()
		}
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil || purged == 0 {
			l.fs.Remove(cleaned)
			if err != nil {
				return st, fmt.Errorf("segment %d: clean: %w", s.base, err)
			}
			continue
		}
		st.RecordsPurged += purged
		if err := l.swapSegment(s, cleaned, gen); err != nil {
			if errors.Is(err, errCompactionAborted) {
				st.RecordsPurged -= purged
				break
			}
			return st, err
		}
		st.Segments++
		st.BytesWritten += written
	}
	st.Duration = time.Since(start)
	return st, nil
}

// abortedRanges is, per producer, the offset ranges [first, last] of its
// aborted transactions, in marker order.
type abortedRanges map[int64][][2]int64

// abortedRanges collects the aborted transactions of every segment's index
// (an entry sits with its marker, maybe after the segments being cleaned).
func abortedRangesOf(segs []*segment) abortedRanges {
	var out abortedRanges
	for _, s := range segs {
		p := s.aborted.Load()
		if p == nil {
			continue
		}
		if out == nil {
			out = abortedRanges{}
		}
		for _, a := range *p {
			out[a.ProducerID] = append(out[a.ProducerID], [2]int64{a.FirstOffset, a.LastOffset})
		}
	}
	return out
}

// has says whether the data batch at base belongs to an aborted
// transaction: it is transactional, and its producer aborted a transaction
// that began at or before it and ended after it (a producer has one open
// at a time, so that one holds it).
func (r abortedRanges) has(info recordbatch.Info, base int64) bool {
	if !info.Transactional || info.Control || len(r) == 0 {
		return false
	}
	rs := r[info.ProducerID]
	i := sort.Search(len(rs), func(i int) bool { return rs[i][1] >= base })
	return i < len(rs) && rs[i][0] <= base
}

// eachStoredBatch reads a segment's batches sequentially up to size.
func eachStoredBatch(s *segment, size int64, fn func([]byte, recordbatch.Info) error) error {
	f, err := s.h.acquire()
	if err != nil {
		return fmt.Errorf("segment %d: %w", s.base, err)
	}
	defer s.h.release()
	r := bufio.NewReaderSize(io.NewSectionReader(f, 0, size), 256<<10)
	var buf []byte
	for pos := int64(0); pos < size; {
		var hdr [recordbatch.HeaderLen]byte
		if _, err := io.ReadFull(r, hdr[:]); err != nil {
			return fmt.Errorf("segment %d at %d: %w", s.base, pos, err)
		}
		info, err := recordbatch.ParseHeader(hdr[:])
		if err != nil {
			return fmt.Errorf("segment %d at %d: %w", s.base, pos, err)
		}
		if cap(buf) < info.Bytes {
			buf = make([]byte, info.Bytes)
		}
		buf = buf[:info.Bytes]
		copy(buf, hdr[:])
		if _, err := io.ReadFull(r, buf[recordbatch.HeaderLen:]); err != nil {
			return fmt.Errorf("segment %d at %d: %w", s.base, pos, err)
		}
		if err := fn(buf, info); err != nil {
			return err
		}
		pos += int64(info.Bytes)
	}
	return nil
}

// errCompactionAborted: the log was truncated while Compact worked; what it
// decided from the records that are gone must not be installed.
var errCompactionAborted = errors.New("storage: compaction aborted by a truncation")

// swapSegment replaces segment old with the fsynced file cleaned,
// crash-safely, unless the log was truncated since Compact read generation
// gen of it (errCompactionAborted).
func (l *Log) swapSegment(old *segment, cleaned string, gen uint64) error {
	dir := l.dir
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.truncations.Load() != gen {
		l.fs.Remove(cleaned)
		return errCompactionAborted
	}
	segs := l.segments()
	idx := -1
	for i, s := range segs[:len(segs)-1] {
		if s == old {
			idx = i
		}
	}
	if idx < 0 || l.mu.closed {
		l.fs.Remove(cleaned) // deleted by retention, or closing, meanwhile
		return nil
	}
	// Indexes go first: a crash after the rename then finds none and
	// rebuilds them from the new file, never trusts stale ones. Readers of
	// the old segment load them no more from here on.
	l.indexes.retire(old)
	for _, ext := range []string{".index", ".timeindex"} {
		if err := l.fs.Remove(segmentPath(dir, old.base, ext)); err != nil && !os.IsNotExist(err) {
			return fmt.Errorf("segment %d: %w", old.base, err)
		}
	}
	// The old file stays open for readers that still hold the old
	// segment (until the grace below ends), and is never reopened by its
	// name, which names the cleaned file from the rename on.
	old.keepOpen()
	if err := l.fs.Rename(cleaned, old.path); err != nil {
		return fmt.Errorf("segment %d: install cleaned: %w", old.base, err)
	}
	if err := l.fs.SyncDir(dir); err != nil {
		return fmt.Errorf("segment %d: %w", old.base, err)
	}
	ns, err := openSegment(l.fs, l.files, dir, old.base, true, false, false, l.cfg.IndexIntervalBytes, nil, 0, nil)
	if err != nil {
		l.mu.failed = fmt.Errorf("segment %d: reopen after cleaning: %w", old.base, err)
		return l.mu.failed
	}
	ns.next = old.next // trailing records may be gone; the range is not
	if ns.maxTS < old.maxTS {
		ns.maxTS, ns.maxTSOffset = old.maxTS, old.maxTSOffset
	}
	// The aborted transaction index, untouched on disk, goes with it.
	ns.txn, old.txn = old.txn, nil
	ns.publishAborted()
	if err := ns.writeIndexFiles(true); err != nil {
		// Derived: the next open rebuilds what is missing. Until then its
		// indexes stay in memory: the files may be the old segment's.
		l.log.Warn().Err(err).Int64("segment", ns.base).Msg("writing a cleaned segment's indexes")
	} else {
		ns.indexOnDisk()
	}
	ns.unpinWriter()
	next := append([]*segment(nil), segs...)
	next[idx] = ns
	l.publishSegs(next)
	delete(l.mu.dirty, old)
	old.removed.Store(true)
	time.AfterFunc(l.cfg.FileDeleteDelay, old.close)
	return nil
}
