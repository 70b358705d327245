package storage

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"sort"
	"strconv"
	"strings"
	"time"
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
// of epoch.
type producerEntry struct {
	epoch   int16
	batches []producerBatch
	// lastTS is when this broker last appended for the producer (ms, its
	// own clock; not the batch timestamps, which clients set and may date
	// from long ago). An entry idle for producer.id.expiration.ms is
	// dropped, as Kafka does, so the table does not grow with every client
	// ever seen. Entries rebuilt from the log at start-up count as written
	// at start-up: lastTS is the one field that is not a function of the log.
	lastTS int64
}

// producers is a partition's idempotent-producer table. It is a function of
// the log: replaying the log's batches in order rebuilds it exactly.
type producers map[int64]*producerEntry

// check classifies a batch before it is appended. A non-nil dup is a retried
// batch already in the log; err is ErrInvalidEpoch or ErrOutOfOrderSeq.
func (p producers) check(info BatchInfo) (dup *producerBatch, err error) {
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
		return nil, nil
	}
	last := info.LastSequence()
	for i := range e.batches {
		if b := &e.batches[i]; b.firstSeq == info.BaseSequence && b.lastSeq == last {
			return b, nil
		}
	}
	if n := len(e.batches); n > 0 {
		want := nextSeq(e.batches[n-1].lastSeq)
		if info.BaseSequence != want {
			return nil, fmt.Errorf("%w: producer %d epoch %d sent sequence %d, expected %d", ErrOutOfOrderSeq, info.ProducerID, info.ProducerEpoch, info.BaseSequence, want)
		}
	}
	return nil, nil
}

func nextSeq(s int32) int32 {
	if s == 1<<31-1 {
		return 0
	}
	return s + 1
}

// record notes an appended (or replayed) batch; now is the append time (ms).
func (p producers) record(info BatchInfo, firstOffset, lastOffset, now int64) {
	if !info.Idempotent() {
		return
	}
	e := p[info.ProducerID]
	if e == nil {
		e = &producerEntry{epoch: info.ProducerEpoch}
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
}

// DefaultProducerExpirationMs is Kafka's producer.id.expiration.ms.
const DefaultProducerExpirationMs = 24 * 3600 * 1000

// expire drops producers whose last batch is older than ttl at now (ms).
func (p producers) expire(now, ttl int64) int {
	n := 0
	for id, e := range p {
		if now-e.lastTS > ttl {
			delete(p, id)
			n++
		}
	}
	return n
}

const (
	snapshotMagic   = "FJPS"
	snapshotVersion = 2 // 2 added each producer's last timestamp
	snapshotExt     = ".snapshot"
)

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

// decodeSnapshotAt decodes versions 1 and 2; version 1 did not record when a
// producer last wrote, so its producers count as having written at loadTime.
func decodeSnapshotAt(b []byte, loadTime int64) (producers, int64, error) {
	if len(b) < 4+1+8+4+4 || string(b[:4]) != snapshotMagic || (b[4] != 1 && b[4] != 2) {
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
	if uint64(n)*uint64(fixed) > uint64(len(r)) {
		return nil, 0, fmt.Errorf("%w: %d producers cannot fit in %d bytes", errBadSnapshot, n, len(r))
	}
	p := make(producers, n)
	for range n {
		if len(r) < fixed {
			return nil, 0, fmt.Errorf("%w: short producer", errBadSnapshot)
		}
		id := int64(binary.BigEndian.Uint64(r))
		e := &producerEntry{epoch: int16(binary.BigEndian.Uint16(r[8:])), lastTS: loadTime}
		r = r[10:]
		if version >= 2 {
			e.lastTS = int64(binary.BigEndian.Uint64(r))
			r = r[8:]
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
// rename) and removes all but the newest two snapshots.
func writeSnapshot(fs FS, dir string, p producers, endOffset int64) error {
	path := segmentPath(dir, endOffset, snapshotExt)
	if err := WriteFileSyncFS(fs, path, p.encode(endOffset)); err != nil {
		return fmt.Errorf("producer snapshot %d: %w", endOffset, err)
	}
	snaps, _ := listSnapshots(fs, dir)
	for len(snaps) > 2 {
		fs.Remove(segmentPath(dir, snaps[0], snapshotExt))
		snaps = snaps[1:]
	}
	return nil
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
