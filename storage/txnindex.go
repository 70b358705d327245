package storage

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
)

// The aborted transaction index: <base>.txnindex beside a segment's .log,
// Kafka's TransactionIndex format, so Kafka's tools read it. Each entry is
// one abort marker in the segment that ended a transaction (AbortedTxn),
// 34 bytes, big-endian:
//
//	int16 version (0) | int64 producerId | int64 firstOffset | int64 lastOffset | int64 lastStableOffset
//
// in marker order. The file exists only for a segment that holds such an
// abort: created at its first, so a topic without aborted transactions has
// none, and nothing looks for one.
//
// Durability. The index is derived data, but unlike the offset indexes it
// cannot be checked against its segment alone: an entry's first offset and
// last stable offset depend on the log before the segment. So it is trusted
// exactly as the producer snapshot recovery starts from is: every entry
// below a snapshot's offset was fsynced before that snapshot was written
// (a roll syncs the old segment's index before its snapshot, Close syncs
// every index before its own, and their names are durable by the
// directory syncs of the new segment and of the snapshot's rename), and
// recovery rebuilds the entries from the snapshot's offset on by replay,
// rewriting and fsyncing the file (see loadTxnIndex). A trusted entry that
// fails its checks (damage) makes Open replay the whole log instead.
// Appends are not synced themselves: what is not covered by a snapshot is
// rebuilt. A failed write fails the log, since a sealed segment must never
// lack an entry.

const (
	txnIndexExt     = ".txnindex"
	txnEntryLen     = 34
	txnEntryVersion = 0
)

// errBadTxnIndex: a trusted .txnindex entry fails its checks.
var errBadTxnIndex = errors.New("storage: bad aborted transaction index")

// txnIndex is a segment's aborted transaction index in memory, mirrored to
// its file.
//
// Invariants: entries' LastOffsets increase strictly and lie in the
// segment's [base, next); the file holds exactly entries, encoded, once
// written (at most a torn tail of unsynced writes after a crash).
// Owner: the log's writer (under Log.mu) appends; readers get entries
// through segment.aborted, whose slice prefix never changes.
type txnIndex struct {
	entries []AbortedTxn
	f       File // opened with O_APPEND when first written this run; nil before
}

func txnIndexPath(s *segment) string {
	return segmentPath(filepath.Dir(s.path), s.base, txnIndexExt)
}

func appendTxnEntry(b []byte, a AbortedTxn) []byte {
	b = binary.BigEndian.AppendUint16(b, txnEntryVersion)
	b = binary.BigEndian.AppendUint64(b, uint64(a.ProducerID))
	b = binary.BigEndian.AppendUint64(b, uint64(a.FirstOffset))
	b = binary.BigEndian.AppendUint64(b, uint64(a.LastOffset))
	return binary.BigEndian.AppendUint64(b, uint64(a.LastStableOffset))
}

// decodeTxnEntry reads one entry; b holds at least txnEntryLen bytes.
func decodeTxnEntry(b []byte) (AbortedTxn, int16) {
	return AbortedTxn{
		ProducerID:       int64(binary.BigEndian.Uint64(b[2:])),
		FirstOffset:      int64(binary.BigEndian.Uint64(b[10:])),
		LastOffset:       int64(binary.BigEndian.Uint64(b[18:])),
		LastStableOffset: int64(binary.BigEndian.Uint64(b[26:])),
	}, int16(binary.BigEndian.Uint16(b))
}

// DecodeTxnIndex parses the bytes of a whole .txnindex file (as a tiered
// copy of a segment holds it) into its entries, in marker order. It checks
// what it can without the segment: whole entries, version 0, plausible
// offsets in increasing marker order; anything else is an error (not
// ErrCorruptLog: the copy is not this node's log). The caller owns the
// result.
func DecodeTxnIndex(b []byte) ([]AbortedTxn, error) {
	if len(b)%txnEntryLen != 0 {
		return nil, fmt.Errorf("%w: %d bytes are not whole entries", errBadTxnIndex, len(b))
	}
	out := make([]AbortedTxn, 0, len(b)/txnEntryLen)
	for ; len(b) > 0; b = b[txnEntryLen:] {
		a, v := decodeTxnEntry(b)
		switch {
		case v != txnEntryVersion:
			return nil, fmt.Errorf("%w: entry %d: version %d", errBadTxnIndex, len(out), v)
		case a.ProducerID < 0 || a.FirstOffset < 0 || a.FirstOffset > a.LastOffset ||
			a.LastStableOffset < 0 || a.LastStableOffset > a.LastOffset+1 ||
			(len(out) > 0 && a.LastOffset <= out[len(out)-1].LastOffset):
			return nil, fmt.Errorf("%w: entry %d: %+v", errBadTxnIndex, len(out), a)
		}
		out = append(out, a)
	}
	return out, nil
}

// checkTxnEntry says whether a is a plausible entry of s after prev (nil for
// the first).
func checkTxnEntry(s *segment, a AbortedTxn, version int16, prev *AbortedTxn) error {
	switch {
	case version != txnEntryVersion:
		return fmt.Errorf("version %d", version)
	case a.ProducerID < 0:
		return fmt.Errorf("producer id %d", a.ProducerID)
	case a.LastOffset < s.base || a.LastOffset >= s.next:
		return fmt.Errorf("marker offset %d outside the segment's [%d, %d)", a.LastOffset, s.base, s.next)
	case a.FirstOffset < 0 || a.FirstOffset > a.LastOffset:
		return fmt.Errorf("first offset %d for a marker at %d", a.FirstOffset, a.LastOffset)
	case a.LastStableOffset < 0 || a.LastStableOffset > a.LastOffset+1:
		return fmt.Errorf("last stable offset %d for a marker at %d", a.LastStableOffset, a.LastOffset)
	case prev != nil && a.LastOffset <= prev.LastOffset:
		return fmt.Errorf("marker offset %d after %d", a.LastOffset, prev.LastOffset)
	}
	return nil
}

// publishAborted makes s's entries visible to readers.
// REQUIRES: Log.mu held (or the segment not yet shared).
func (s *segment) publishAborted() {
	if s.txn == nil || len(s.txn.entries) == 0 {
		s.aborted.Store(nil)
		return
	}
	es := s.txn.entries
	s.aborted.Store(&es)
}

// addAborted appends an entry for an abort marker just written to s. The
// entry is served from memory even if writing it to the file fails; the
// caller then fails the log, so that the file is never trusted without it.
// REQUIRES: Log.mu held.
func (s *segment) addAborted(a AbortedTxn) error {
	flags := os.O_RDWR | os.O_CREATE | os.O_APPEND
	if s.txn == nil {
		// The segment's first entry: a file left by an older segment of
		// this base whose removal failed must not precede it.
		s.txn = &txnIndex{}
		flags |= os.O_TRUNC
	}
	s.txn.entries = append(s.txn.entries, a)
	s.publishAborted()
	if s.txn.f == nil {
		f, err := s.fs.OpenFile(txnIndexPath(s), flags, FileMode)
		if err != nil {
			return fmt.Errorf("segment %d: aborted transaction index: %w", s.base, err)
		}
		s.txn.f = f
	}
	var buf [txnEntryLen]byte
	if _, err := s.txn.f.Write(appendTxnEntry(buf[:0], a)); err != nil {
		return fmt.Errorf("segment %d: aborted transaction index: %w", s.base, err)
	}
	return nil
}

// syncTxnIndex fsyncs what this run wrote to s's index, if anything.
func (s *segment) syncTxnIndex() error {
	if s.txn == nil || s.txn.f == nil {
		return nil
	}
	if err := s.txn.f.SyncData(); err != nil {
		return fmt.Errorf("segment %d: sync aborted transaction index: %w", s.base, err)
	}
	return nil
}

func (s *segment) closeTxnIndex() {
	if s.txn != nil && s.txn.f != nil {
		s.txn.f.Close()
		s.txn.f = nil
	}
}

// cutTxnIndex drops the entries of markers at or after end (truncation),
// in memory and in the file (not synced: the segment is then the active
// one, whose index recovery rebuilds from the snapshot at or below end that
// truncation leaves). The kept entries are copied: readers may hold the old
// slice, and later entries must not land in an array they read.
// REQUIRES: Log.mu held.
func (s *segment) cutTxnIndex(end int64) error {
	if s.txn == nil {
		return nil
	}
	es := s.txn.entries
	k := len(es)
	for k > 0 && es[k-1].LastOffset >= end {
		k--
	}
	if k == len(es) {
		return nil
	}
	if k == 0 {
		s.closeTxnIndex()
		s.txn = nil
		s.publishAborted()
		if err := s.fs.Remove(txnIndexPath(s)); err != nil && !os.IsNotExist(err) {
			return fmt.Errorf("segment %d: remove aborted transaction index: %w", s.base, err)
		}
		return nil
	}
	s.txn.entries = slices.Clone(es[:k])
	s.publishAborted()
	if s.txn.f == nil {
		f, err := s.fs.OpenFile(txnIndexPath(s), os.O_RDWR|os.O_CREATE|os.O_APPEND, FileMode)
		if err != nil {
			return fmt.Errorf("segment %d: aborted transaction index: %w", s.base, err)
		}
		s.txn.f = f
	}
	if err := s.txn.f.Truncate(int64(k) * txnEntryLen); err != nil {
		return fmt.Errorf("segment %d: truncate aborted transaction index: %w", s.base, err)
	}
	return nil
}

// loadTxnIndex sets up s's index at Open, after s itself was opened, and
// reports whether it changed the file (or removed it), which the caller
// then makes durable with a directory sync; a rewritten file is fsynced
// here.
//
// exists says the file is there. Entries whose marker is below keep are
// trusted from the file (see the durability rules above; keep is past the
// segment's end for a segment recovery did not replay) and must pass their
// checks, else errBadTxnIndex; from keep on, the file's entries (maybe a
// torn tail) give way to gen, the entries replay made for the markers at or
// after keep.
func (s *segment) loadTxnIndex(exists bool, keep int64, gen []AbortedTxn) (changed bool, err error) {
	path := txnIndexPath(s)
	var kept []AbortedTxn
	var fileLen int
	if exists {
		b, err := readFile(s.fs, path)
		if err != nil {
			return false, fmt.Errorf("segment %d: aborted transaction index: %w", s.base, err)
		}
		fileLen = len(b)
		whole := true // every byte of the file is trusted
		for ; len(b) > 0; b = b[txnEntryLen:] {
			if len(b) < txnEntryLen {
				if whole && keep >= s.next {
					return false, fmt.Errorf("%w: segment %d: %d bytes of a torn entry", errBadTxnIndex, s.base, len(b))
				}
				break
			}
			a, v := decodeTxnEntry(b)
			if a.LastOffset >= keep {
				whole = false // from here on untrusted: replay's instead
				break
			}
			var prev *AbortedTxn
			if n := len(kept); n > 0 {
				prev = &kept[n-1]
			}
			if err := checkTxnEntry(s, a, v, prev); err != nil {
				return false, fmt.Errorf("%w: segment %d entry %d: %v", errBadTxnIndex, s.base, len(kept), err)
			}
			kept = append(kept, a)
		}
	}
	entries := append(kept, gen...)
	if len(entries) == 0 {
		if !exists {
			return false, nil
		}
		if err := s.fs.Remove(path); err != nil && !os.IsNotExist(err) {
			return false, fmt.Errorf("segment %d: remove aborted transaction index: %w", s.base, err)
		}
		return true, nil
	}
	s.txn = &txnIndex{entries: entries}
	s.publishAborted()
	if len(gen) == 0 && fileLen == len(kept)*txnEntryLen {
		return false, nil
	}
	f, err := s.fs.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_APPEND, FileMode)
	if err != nil {
		return false, fmt.Errorf("segment %d: aborted transaction index: %w", s.base, err)
	}
	defer f.Close()
	if err := f.Truncate(int64(len(kept)) * txnEntryLen); err != nil {
		return false, fmt.Errorf("segment %d: rewrite aborted transaction index: %w", s.base, err)
	}
	var buf []byte
	for _, a := range gen {
		buf = appendTxnEntry(buf, a)
	}
	if _, err := f.Write(buf); err != nil {
		return false, fmt.Errorf("segment %d: rewrite aborted transaction index: %w", s.base, err)
	}
	if err := f.SyncData(); err != nil {
		return false, fmt.Errorf("segment %d: sync aborted transaction index: %w", s.base, err)
	}
	return true, nil
}
