package storage

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/fjordlog/fjord/storage/recordbatch"
)

// maxProducerBatches is how many recent batches per producer are remembered
// for duplicate detection; it matches the idempotent producer's limit of five
// in-flight requests per partition.
const maxProducerBatches = 5

type producerBatch struct {
	firstSeq, lastSeq       int32
	firstOffset, lastOffset int64
}

// producerEntry is one producer's state on this partition. The epoch is kept
// per (producer id, partition), as Kafka does: an idempotent client that
// bumps its epoch after a timeout on one partition still has retries in
// flight on the others under the old epoch, and those must be recognised as
// duplicates, not written again.
//
// Invariant: batches are in append order, at most maxProducerBatches, all
// of epoch (a marker of a new epoch empties them, as a batch of one does).
type producerEntry struct {
	epoch   int16
	batches []producerBatch
	// txnFirst is the first offset of the producer's open transaction:
	// the base offset of its first transactional batch since its last
	// marker; -1 when none is open. A function of the log like the rest,
	// except for a transaction that began below the log start, which only
	// a snapshot remembers (see txnState).
	txnFirst int64
	// coordEpoch is the coordinator epoch of the producer's last marker,
	// -1 before any: a marker from an older coordinator is refused
	// (TRANSACTION_COORDINATOR_FENCED), as Kafka refuses it.
	coordEpoch int32
	// lastTS is when this broker last appended for the producer (ms, its
	// own clock; not the batch timestamps, which clients set and may date
	// from long ago). An entry idle for producer.id.expiration.ms is
	// dropped, as Kafka does, so the table does not grow with every client
	// ever seen. Entries rebuilt from the log at start-up count as written
	// at start-up: lastTS is the one field that is not a function of the log.
	// Markers count as appends.
	lastTS int64
}

func newProducerEntry(epoch int16) *producerEntry {
	return &producerEntry{epoch: epoch, txnFirst: -1, coordEpoch: -1}
}

// producers is a partition's idempotent and transactional producer table. It
// is a function of the log: replaying the log's batches in order rebuilds it
// exactly (but for lastTS, and for a transaction begun below the log start:
// see txnFirst).
type producers map[int64]*producerEntry

// check classifies a data batch before the leader appends it. A non-nil dup
// is a retried batch already in the log; err is ErrInvalidEpoch,
// ErrOutOfOrderSeq or ErrInvalidTxnState (a non-transactional batch from a
// producer whose transaction is open), in Kafka's order of checks.
func (p producers) check(info recordbatch.Info) (dup *producerBatch, err error) {
	if !info.Idempotent() {
		return nil, nil
	}
	e := p[info.ProducerID]
	if e == nil {
		// Unknown here: a new producer, or one whose batches were all
		// removed. Nothing to deduplicate against.
		return nil, nil
	}
	switch {
	case info.ProducerEpoch < e.epoch:
		return nil, fmt.Errorf("%w: producer %d epoch %d is older than %d", ErrInvalidEpoch, info.ProducerID, info.ProducerEpoch, e.epoch)
	case info.ProducerEpoch > e.epoch:
		if info.BaseSequence != 0 {
			return nil, fmt.Errorf("%w: producer %d new epoch %d must start at sequence 0, got %d", ErrOutOfOrderSeq, info.ProducerID, info.ProducerEpoch, info.BaseSequence)
		}
		return nil, txnStateErr(e, info)
	}
	last := info.LastSequence()
	for i := range e.batches {
		if b := &e.batches[i]; b.firstSeq == info.BaseSequence && b.lastSeq == last {
			return b, nil
		}
	}
	// With no batch of this epoch here (only a marker of it, which starts
	// no sequence), the epoch's first batch must be sequence 0, as in
	// Kafka, where the marker's entry has the epoch and no last sequence.
	want := int32(0)
	if n := len(e.batches); n > 0 {
		want = nextSeq(e.batches[n-1].lastSeq)
	}
	if info.BaseSequence != want {
		return nil, fmt.Errorf("%w: producer %d epoch %d sent sequence %d, expected %d", ErrOutOfOrderSeq, info.ProducerID, info.ProducerEpoch, info.BaseSequence, want)
	}
	return nil, txnStateErr(e, info)
}

// txnStateErr refuses a non-transactional batch from a producer whose
// transaction is open (Kafka's "Expected transactional write").
func txnStateErr(e *producerEntry, info recordbatch.Info) error {
	if e.txnFirst >= 0 && !info.Transactional {
		return fmt.Errorf("%w: producer %d has a transaction open since offset %d and sent a non-transactional batch", ErrInvalidTxnState, info.ProducerID, e.txnFirst)
	}
	return nil
}

func nextSeq(s int32) int32 {
	if s == 1<<31-1 {
		return 0
	}
	return s + 1
}

// record notes an appended (or replayed) data batch; now is the append time
// (ms). began reports that the batch opened a transaction, at firstOffset:
// it is transactional and its producer had none open. It refuses nothing
// (check does, on the leader): a follower or a replay records what the log
// holds, and a non-transactional batch amid an open transaction, which no
// leader of ours writes, leaves the transaction open.
func (p producers) record(info recordbatch.Info, firstOffset, lastOffset, now int64) (began bool) {
	if !info.Idempotent() {
		return false
	}
	e := p[info.ProducerID]
	if e == nil {
		e = newProducerEntry(info.ProducerEpoch)
		p[info.ProducerID] = e
	}
	if info.ProducerEpoch != e.epoch {
		e.epoch = info.ProducerEpoch
		e.batches = e.batches[:0]
	}
	if len(e.batches) == maxProducerBatches {
		copy(e.batches, e.batches[1:])
		e.batches = e.batches[:maxProducerBatches-1]
	}
	e.batches = append(e.batches, producerBatch{info.BaseSequence, info.LastSequence(), firstOffset, lastOffset})
	e.lastTS = max(e.lastTS, now)
	if info.Transactional && e.txnFirst < 0 {
		e.txnFirst = firstOffset
		return true
	}
	return false
}

// checkMarker says whether the leader may append a marker for pid (Kafka's
// checks for a marker from the coordinator): ErrInvalidEpoch if its epoch is
// older than the producer's here (with transaction version 2, not newer,
// unless it repeats the marker that ended the producer's last transaction:
// same epoch, none open), ErrCoordinatorFenced if its coordinator epoch is
// older than the last marker's.
func (p producers) checkMarker(m TxnMarker) error {
	e := p[m.ProducerID]
	if e == nil {
		return nil
	}
	bad := m.ProducerEpoch < e.epoch
	if m.TransactionVersion >= 2 && m.ProducerEpoch == e.epoch {
		bad = e.txnFirst >= 0
	}
	if bad {
		return fmt.Errorf("%w: marker for producer %d has epoch %d, the producer's is %d (transaction version %d)", ErrInvalidEpoch, m.ProducerID, m.ProducerEpoch, e.epoch, m.TransactionVersion)
	}
	if e.coordEpoch > m.CoordinatorEpoch {
		return fmt.Errorf("%w: marker for producer %d from coordinator epoch %d, the last was from %d", ErrCoordinatorFenced, m.ProducerID, m.CoordinatorEpoch, e.coordEpoch)
	}
	return nil
}

// recordMarker notes an appended (or replayed) marker for producer pid of
// epoch, from coordinator epoch coordEpoch, and returns the first offset of
// the transaction it ended, -1 if none was open (a repeated marker, or one
// for a producer unknown here: written, and harmless). As in Kafka, a new
// epoch forgets the old one's batches, the coordinator epoch is taken as it
// is, and it refuses nothing.
func (p producers) recordMarker(pid int64, epoch int16, coordEpoch int32, now int64) (txnFirst int64) {
	e := p[pid]
	if e == nil {
		e = newProducerEntry(epoch)
		p[pid] = e
	}
	if epoch != e.epoch {
		e.epoch = epoch
		e.batches = e.batches[:0]
	}
	txnFirst, e.txnFirst = e.txnFirst, -1
	e.coordEpoch = coordEpoch
	e.lastTS = max(e.lastTS, now)
	return txnFirst
}

// DefaultProducerExpirationMs is Kafka's producer.id.expiration.ms.
const DefaultProducerExpirationMs = 24 * 3600 * 1000

// expire drops producers whose last batch is older than ttl at now (ms),
// except those with a transaction open: the open transaction holds the last
// stable offset back and must end with its marker, as in Kafka.
func (p producers) expire(now, ttl int64) int {
	n := 0
	for id, e := range p {
		if now-e.lastTS > ttl && e.txnFirst < 0 {
			delete(p, id)
			n++
		}
	}
	return n
}

const (
	snapshotMagic = "FJPS"
	// 2 added each producer's last timestamp; 3 its coordinator epoch and
	// open transaction.
	snapshotVersion = 3
	snapshotExt     = ".snapshot"
)

// castagnoli is the CRC-32C table of Fjord's own files (producer
// snapshots, log-start-offset), the checksum Kafka's batches carry.
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// encodeSnapshot serialises the table (format in the package doc).
func (p producers) encode(endOffset int64) []byte {
	ids := make([]int64, 0, len(p))
	for id := range p {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	b := append([]byte(snapshotMagic), snapshotVersion)
	b = binary.BigEndian.AppendUint64(b, uint64(endOffset))
	b = binary.BigEndian.AppendUint32(b, uint32(len(ids)))
	for _, id := range ids {
		e := p[id]
		b = binary.BigEndian.AppendUint64(b, uint64(id))
		b = binary.BigEndian.AppendUint16(b, uint16(e.epoch))
		b = binary.BigEndian.AppendUint64(b, uint64(e.lastTS))
		b = binary.BigEndian.AppendUint32(b, uint32(e.coordEpoch))
		b = binary.BigEndian.AppendUint64(b, uint64(e.txnFirst))
		b = append(b, byte(len(e.batches)))
		for _, bt := range e.batches {
			b = binary.BigEndian.AppendUint32(b, uint32(bt.firstSeq))
			b = binary.BigEndian.AppendUint32(b, uint32(bt.lastSeq))
			b = binary.BigEndian.AppendUint64(b, uint64(bt.firstOffset))
			b = binary.BigEndian.AppendUint64(b, uint64(bt.lastOffset))
		}
	}
	return binary.BigEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
}

var errBadSnapshot = errors.New("storage: bad producer snapshot")

func decodeSnapshot(b []byte) (producers, int64, error) {
	return decodeSnapshotAt(b, 0)
}

// decodeSnapshotAt decodes versions 1 to 3; version 1 did not record when a
// producer last wrote, so its producers count as having written at loadTime;
// versions 1 and 2 come from before transactions (none open, no coordinator
// epoch).
func decodeSnapshotAt(b []byte, loadTime int64) (producers, int64, error) {
	if len(b) < 4+1+8+4+4 || string(b[:4]) != snapshotMagic || b[4] < 1 || b[4] > snapshotVersion {
		return nil, 0, fmt.Errorf("%w: header", errBadSnapshot)
	}
	version := b[4]
	body, sum := b[:len(b)-4], binary.BigEndian.Uint32(b[len(b)-4:])
	if crc32.Checksum(body, castagnoli) != sum {
		return nil, 0, fmt.Errorf("%w: crc", errBadSnapshot)
	}
	end := int64(binary.BigEndian.Uint64(body[5:]))
	n := binary.BigEndian.Uint32(body[13:])
	r := body[17:]
	fixed := 11
	if version >= 2 {
		fixed += 8
	}
	if version >= 3 {
		fixed += 12
	}
	if uint64(n)*uint64(fixed) > uint64(len(r)) {
		return nil, 0, fmt.Errorf("%w: %d producers cannot fit in %d bytes", errBadSnapshot, n, len(r))
	}
	p := make(producers, n)
	for range n {
		if len(r) < fixed {
			return nil, 0, fmt.Errorf("%w: short producer", errBadSnapshot)
		}
		id := int64(binary.BigEndian.Uint64(r))
		e := newProducerEntry(int16(binary.BigEndian.Uint16(r[8:])))
		e.lastTS = loadTime
		r = r[10:]
		if version >= 2 {
			e.lastTS = int64(binary.BigEndian.Uint64(r))
			r = r[8:]
		}
		if version >= 3 {
			e.coordEpoch = int32(binary.BigEndian.Uint32(r))
			e.txnFirst = int64(binary.BigEndian.Uint64(r[4:]))
			r = r[12:]
			if e.txnFirst < -1 {
				return nil, 0, fmt.Errorf("%w: producer %d open transaction at %d", errBadSnapshot, id, e.txnFirst)
			}
		}
		k := int(r[0])
		r = r[1:]
		if k > maxProducerBatches || len(r) < k*24 {
			return nil, 0, fmt.Errorf("%w: short batches", errBadSnapshot)
		}
		for range k {
			e.batches = append(e.batches, producerBatch{
				int32(binary.BigEndian.Uint32(r)), int32(binary.BigEndian.Uint32(r[4:])),
				int64(binary.BigEndian.Uint64(r[8:])), int64(binary.BigEndian.Uint64(r[16:])),
			})
			r = r[24:]
		}
		p[id] = e
	}
	return p, end, nil
}

// writeSnapshot writes the table as of endOffset durably (temp file, fsync,
// rename) and removes all but the newest two snapshots, and but those
// above keepAbove: a tiered log keeps the snapshot at each segment's end
// until the remote store holds the segment (keepAbove is its copied end
// plus one), for the copy to take; math.MaxInt64 keeps none extra.
func writeSnapshot(fs FS, dir string, p producers, endOffset, keepAbove int64) error {
	path := segmentPath(dir, endOffset, snapshotExt)
	if err := WriteFileSyncFS(fs, path, p.encode(endOffset)); err != nil {
		return fmt.Errorf("producer snapshot %d: %w", endOffset, err)
	}
	snaps, _ := listSnapshots(fs, dir)
	for len(snaps) > 2 && snaps[0] <= keepAbove {
		fs.Remove(segmentPath(dir, snaps[0], snapshotExt))
		snaps = snaps[1:]
	}
	return nil
}

// snapshotKeepAboveLocked is writeSnapshot's keepAbove for l.
// REQUIRES: l.mu held.
func (l *Log) snapshotKeepAboveLocked() int64 {
	if !l.cfg.Tier.Enabled || l.mu.copiedEnd == nil {
		return math.MaxInt64 // untiered (or no store): keep two
	}
	return l.mu.copiedEnd() + 1
}

// listSnapshots returns the snapshot offsets in dir, ascending.
func listSnapshots(fs FS, dir string) ([]int64, error) {
	ents, err := fs.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var out []int64
	for _, e := range ents {
		name, ok := strings.CutSuffix(e.Name(), snapshotExt)
		if !ok {
			continue
		}
		if off, err := strconv.ParseInt(name, 10, 64); err == nil {
			out = append(out, off)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out, nil
}

// loadLatestSnapshot returns the newest readable snapshot at or below
// maxOffset, or an empty table at offset -1.
func loadLatestSnapshot(fs FS, dir string, maxOffset int64) (producers, int64) {
	snaps, _ := listSnapshots(fs, dir)
	for i := len(snaps) - 1; i >= 0; i-- {
		if snaps[i] > maxOffset {
			continue
		}
		b, err := readFile(fs, segmentPath(dir, snaps[i], snapshotExt))
		if err != nil {
			continue
		}
		if p, end, err := decodeSnapshotAt(b, time.Now().UnixMilli()); err == nil && end == snaps[i] {
			return p, end
		}
	}
	return producers{}, -1
}
