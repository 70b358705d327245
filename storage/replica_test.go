package storage

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/fjordlog/fjord/storage/recordbatch"
	"github.com/fjordlog/fjord/storage/recordbatch/batchtest"
)

// leaderBatch is one batch a test leader appended.
type leaderBatch struct {
	appended
	epoch int32
	opts  batchOpts
}

// buildLeader appends n batches of varied shape (every codec, two
// idempotent producers, one of which bumps its producer epoch, plain
// batches, timestamps going up and down) under leader epochs 0, then 3,
// then 6 (with epoch 4 assigned and never written in between).
func buildLeader(t *testing.T, l *Log, n int) []leaderBatch {
	t.Helper()
	return buildLeaderWith(t, l, n, allCodecs)
}

// cheapCodecs leave out lz4 and zstd, whose buffers (megabytes each batch)
// make tests that only need some compressed batches slow under -race.
var cheapCodecs = []codecCase{allCodecs[0], allCodecs[1], allCodecs[2], allCodecs[0]}

func buildLeaderWith(t *testing.T, l *Log, n int, codecs []codecCase) []leaderBatch {
	t.Helper()
	var out []leaderBatch
	seq := map[int64]int32{}
	var pepoch int16
	for i := range n {
		epoch := leaderEpochFor(t, l, i, n)
		c := codecs[i%len(codecs)]
		o := batchOpts{N: 1 + i%4, ValueSize: 30 + (i*53)%200, Codec: c.Codec, Xerial: c.Xerial,
			BaseTS: 10_000 + int64(i*7%23)*10, TSDeltas: []int64{0, 3, -2, 5}}
		switch i % 3 {
		case 0:
			o.Idempotent, o.PID, o.Seq = true, 77, seq[77]
			seq[77] += int32(o.N)
		case 1:
			if i == n/2 {
				pepoch++
				seq[88] = 0
			}
			o.Idempotent, o.PID, o.Epoch, o.Seq = true, 88, pepoch, seq[88]
			seq[88] += int32(o.N)
		}
		a := appendAt(t, l, o, epoch)
		out = append(out, leaderBatch{a, epoch, o})
	}
	return out
}

// leaderEpochFor is the leader epoch of batch i of n in a test leader's
// log: 0 for the first third, 3 for the second, 6 for the last, with epoch
// 4 assigned before 6 and never written. It assigns each epoch as its
// first batch comes up.
func leaderEpochFor(t *testing.T, l *Log, i, n int) int32 {
	t.Helper()
	switch {
	case i == n/3:
		if err := l.AssignEpoch(3, l.EndOffset()); err != nil {
			t.Fatal(err)
		}
	case i == 2*n/3:
		for _, e := range []int32{4, 6} {
			if err := l.AssignEpoch(e, l.EndOffset()); err != nil {
				t.Fatal(err)
			}
		}
	}
	switch {
	case i >= 2*n/3:
		return 6
	case i >= n/3:
		return 3
	}
	return 0
}

// fetchChunk is what a Fetch from offset might return: whole batches up to
// about maxBytes, then, when torn is set and more follows, a random prefix
// of the next batch.
func fetchChunk(t *testing.T, leader *Log, from int64, maxBytes int, torn bool, rng *rand.Rand) (data []byte, partial int) {
	t.Helper()
	data, err := leader.Read(from, maxBytes, leader.EndOffset(), nil)
	if err != nil {
		t.Fatalf("leader Read(%d): %v", from, err)
	}
	data = bytes.Clone(data)
	bs := splitBatches(t, data)
	next := recordbatch.LastOffset(bs[len(bs)-1]) + 1
	if !torn || next >= leader.EndOffset() {
		return data, 0
	}
	more, err := leader.Read(next, 1, leader.EndOffset(), nil)
	if err != nil {
		t.Fatal(err)
	}
	cut := 1 + rng.Intn(len(more)-1)
	return append(data, more[:cut]...), cut
}

// replicate brings follower up to leader by fetches of about chunk bytes.
func replicate(t *testing.T, leader, follower *Log, chunk int, torn bool, rng *rand.Rand) {
	t.Helper()
	for follower.EndOffset() < leader.EndOffset() {
		from := follower.EndOffset()
		data, partial := fetchChunk(t, leader, from, chunk, torn, rng)
		whole := splitBatches(t, data[:len(data)-partial])
		res, err := follower.AppendReplica(data)
		if err != nil {
			t.Fatalf("AppendReplica at %d: %v", from, err)
		}
		wantEnd := recordbatch.LastOffset(whole[len(whole)-1]) + 1
		if res.EndOffset != wantEnd || follower.EndOffset() != wantEnd || res.Batches != len(whole) ||
			res.PartialBytes != partial || res.Skipped != 0 || res.FirstOffset != from || res.LastOffset != wantEnd-1 ||
			res.Bytes != int64(len(data)-partial) {
			t.Fatalf("AppendReplica at %d of %d batches (+%d torn bytes): %+v, end %d", from, len(whole), partial, res, follower.EndOffset())
		}
	}
}

// sameFiles checks that two logs' directories hold the same segments,
// byte for byte, and the same index files.
func sameFiles(t *testing.T, leaderDir, followerDir string) {
	t.Helper()
	activeIndexToDisk(t, leaderDir)
	activeIndexToDisk(t, followerDir)
	ll, fl := filesWithExt(t, leaderDir, ".log"), filesWithExt(t, followerDir, ".log")
	if !reflect.DeepEqual(ll, fl) {
		t.Fatalf("segments differ: leader %v, follower %v", ll, fl)
	}
	for _, name := range ll {
		if !bytes.Equal(segmentBytes(t, filepath.Join(leaderDir, name)), segmentBytes(t, filepath.Join(followerDir, name))) {
			t.Fatalf("segment %s differs", name)
		}
		base := baseOf(t, name)
		for _, ext := range []string{".index", ".timeindex"} {
			if !bytes.Equal(mustRead(t, segmentPath(leaderDir, base, ext)), mustRead(t, segmentPath(followerDir, base, ext))) {
				t.Fatalf("%d%s differs", base, ext)
			}
		}
	}
}

func producersOf(l *Log) map[int64]string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return normalise(l.mu.producers)
}

func TestAppendReplicaMirrorsLeader(t *testing.T) {
	for _, tc := range []struct {
		logAppendTime bool
		chunk         int
		torn          bool
	}{{false, 1 << 20, false}, {false, 1 << 20, true}, {false, 700, true}, {false, 1, false}, {true, 700, true}} {
		logAppendTime := tc.logAppendTime
		t.Run(fmt.Sprintf("lat=%v/chunk=%d/torn=%v", logAppendTime, tc.chunk, tc.torn), func(t *testing.T) {
			cfg := testConfig()
			cfg.SegmentBytes = 2500
			cfg.IndexIntervalBytes = 300
			cfg.LogAppendTime = logAppendTime
			leader := openLog(t, t.TempDir(), cfg)
			batches := buildLeader(t, leader, 45)
			fcfg := cfg
			fcfg.LogAppendTime = false // a follower never restamps
			follower := openLog(t, t.TempDir(), fcfg)
			replicate(t, leader, follower, tc.chunk, tc.torn, rand.New(rand.NewSource(int64(tc.chunk))))

			if n := len(filesWithExt(t, leader.dir, ".log")); n < 4 {
				t.Fatalf("setup: %d segments", n)
			}
			if err := leader.Flush(); err != nil {
				t.Fatal(err)
			}
			sameFiles(t, leader.dir, follower.dir)
			// The follower knows the epochs that wrote batches; epoch 4
			// wrote none and was replaced on the leader too.
			checkEpochs(t, follower, ec(0, 0, 3, batches[15].base, 6, batches[30].base))
			checkEpochs(t, leader, follower.epochCache())
			if lp, fp := producersOf(leader), producersOf(follower); !reflect.DeepEqual(lp, fp) {
				t.Fatalf("producer state differs:\nleader   %v\nfollower %v", lp, fp)
			}
			for _, e := range []int32{-1, 0, 2, 3, 5, 6, 9} {
				le, lo := leader.EndOffsetForEpoch(e)
				fe, fo := follower.EndOffsetForEpoch(e)
				if le != fe || lo != fo {
					t.Fatalf("EndOffsetForEpoch(%d): leader (%d, %d), follower (%d, %d)", e, le, lo, fe, fo)
				}
			}
			lo, lts, _, _ := leader.MaxTimestamp()
			fo, fts, _, _ := follower.MaxTimestamp()
			if lo != fo || lts != fts {
				t.Fatalf("MaxTimestamp: leader (%d, %d), follower (%d, %d)", lo, lts, fo, fts)
			}

			// Data is written, not yet durable; Flush makes it so.
			if follower.DurableOffset() >= follower.EndOffset() {
				t.Fatalf("durable %d before Flush, end %d", follower.DurableOffset(), follower.EndOffset())
			}
			if err := follower.Flush(); err != nil {
				t.Fatal(err)
			}
			if follower.DurableOffset() != follower.EndOffset() {
				t.Fatal("Flush did not cover the fetched batches")
			}

			// Crash, and the follower comes back as it was.
			crashed := openLog(t, crashCopy(t, follower), fcfg)
			if crashed.EndOffset() != leader.EndOffset() {
				t.Fatalf("after a crash: end %d, want %d", crashed.EndOffset(), leader.EndOffset())
			}
			checkEpochs(t, crashed, follower.epochCache())
			if lp, cp := producersOf(leader), producersOf(crashed); !reflect.DeepEqual(lp, cp) {
				t.Fatalf("producer state after a crash differs:\nleader %v\nreplica %v", lp, cp)
			}

			// Promoted, it deduplicates the leader's producers' retries.
			end := follower.EndOffset()
			if err := follower.AssignEpoch(8, end); err != nil {
				t.Fatal(err)
			}
			n77 := 0
			for i := len(batches) - 1; i >= 0 && n77 < 5; i-- {
				b := batches[i]
				if !b.opts.Idempotent || b.opts.PID != 77 {
					continue
				}
				n77++
				res, err := appendRaw(follower, bytes.Clone(b.orig), 1)
				if err != nil || !res.Duplicate || res.BaseOffset != b.base || res.LastOffset != b.last {
					t.Fatalf("retry of [%d, %d] on the promoted follower: %+v, %v", b.base, b.last, res, err)
				}
			}
			_, err := appendRaw(follower, buildBatch(t, batchOpts{Idempotent: true, PID: 88, Epoch: 0, Seq: 1000}), 1)
			wantErrIs(t, err, ErrInvalidEpoch)
			if follower.EndOffset() != end {
				t.Fatal("a duplicate was appended")
			}
		})
	}
}

// TestAppendReplicaRollsInOneCall: one call whose batches span several
// segments rolls where the leader did.
func TestAppendReplicaRollsInOneCall(t *testing.T) {
	cfg := testConfig()
	cfg.SegmentBytes = 1200
	cfg.IndexIntervalBytes = 1
	leader := openLog(t, t.TempDir(), cfg)
	buildLeader(t, leader, 30)
	var all []byte
	for _, b := range readAll(t, leader, 0) {
		all = append(all, b...)
	}
	follower := openLog(t, t.TempDir(), cfg)
	res, err := follower.AppendReplica(all)
	if err != nil || res.EndOffset != leader.EndOffset() || res.Batches != 30 {
		t.Fatalf("AppendReplica of the whole log: %+v, %v", res, err)
	}
	if n := follower.SegmentCount(); n < 5 || n != leader.SegmentCount() {
		t.Fatalf("follower has %d segments, leader %d", n, leader.SegmentCount())
	}
	sameFiles(t, leader.dir, follower.dir)
	for _, name := range filesWithExt(t, follower.dir, ".log") {
		checkIndexFiles(t, follower.dir, baseOf(t, name), segmentBytes(t, filepath.Join(follower.dir, name)), cfg.IndexIntervalBytes)
	}
	// Refetching all of it appends nothing.
	res, err = follower.AppendReplica(all)
	if err != nil || res.Batches != 0 || res.Skipped != 30 || res.EndOffset != leader.EndOffset() || res.FirstOffset != -1 {
		t.Fatalf("refetch: %+v, %v", res, err)
	}
}

// storedBatch builds a batch as a leader would have stored it: base offset
// and leader epoch set, CRC valid.
func storedBatch(t *testing.T, o batchOpts, base int64, epoch int32) []byte {
	t.Helper()
	o.BaseOffset, o.LeaderEpoch = base, epoch
	return buildBatch(t, o)
}

func cat(parts ...[]byte) []byte {
	var out []byte
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

// edit returns a copy of b changed by f, with the CRC recomputed when fix.
func edit(b []byte, fix bool, f func([]byte)) []byte {
	b = bytes.Clone(b)
	f(b)
	if fix {
		fixCRC(b)
	}
	return b
}

func TestAppendReplicaAdversarial(t *testing.T) {
	// The follower holds A (offsets 0-2, epoch 1); the leader has B (3-5,
	// epoch 1), C (6-8, epoch 2), D (9-11, epoch 2).
	A := storedBatch(t, batchOpts{N: 3, Idempotent: true, PID: 5, Seq: 0}, 0, 1)
	B := storedBatch(t, batchOpts{N: 3, Idempotent: true, PID: 5, Seq: 3}, 3, 1)
	C := storedBatch(t, batchOpts{N: 3, Idempotent: true, PID: 5, Seq: 6, Codec: recordbatch.CodecZstd}, 6, 2)
	D := storedBatch(t, batchOpts{N: 3, Idempotent: true, PID: 5, Seq: 9}, 9, 2)
	flip := func(b []byte, at int) []byte { return edit(b, false, func(b []byte) { b[at] ^= 0x10 }) }
	for _, tc := range []struct {
		name    string
		in      []byte
		err     error // nil: success
		kept    [][]byte
		skipped int
		partial int
	}{
		{"empty", nil, nil, nil, 0, 0},
		{"contiguous", cat(B, C, D), nil, [][]byte{B, C, D}, 0, 0},
		{"refetch of what is here", A, nil, nil, 1, 0},
		{"refetch overlapping", cat(A, B, C), nil, [][]byte{B, C}, 1, 0},
		{"crc: first batch", cat(flip(B, 70), C), recordbatch.ErrCorrupt, nil, 0, 0},
		{"crc: middle batch", cat(B, flip(C, len(C)-1), D), recordbatch.ErrCorrupt, [][]byte{B}, 0, 0},
		{"crc: header field under it", cat(B, flip(C, batchtest.OffMaxTimestamp+7)), recordbatch.ErrCorrupt, [][]byte{B}, 0, 0},
		{"crc field itself", cat(B, flip(C, batchtest.OffCRC)), recordbatch.ErrCorrupt, [][]byte{B}, 0, 0},
		{"repeated batch", cat(B, B, C), ErrUnexpectedOffset, [][]byte{B}, 0, 0},
		{"going backwards", cat(B, C, A), ErrUnexpectedOffset, [][]byte{B, C}, 0, 0},
		{"straddling the log end", storedBatch(t, batchOpts{N: 3}, 2, 1), ErrUnexpectedOffset, nil, 0, 0},
		// The base offset is not under the CRC. A flip that takes it back
		// is refused; one that takes it forward is a gap, which compaction
		// makes legal (see TestAppendReplicaGaps).
		{"base offset flipped back", cat(B, edit(C, false, func(b []byte) { b[7] ^= 0x04 })), ErrUnexpectedOffset, [][]byte{B}, 0, 0},
		{"torn tail", cat(B, C[:40]), nil, [][]byte{B}, 0, 40},
		{"torn tail in the length", cat(B, C, D[:10]), nil, [][]byte{B, C}, 0, 10},
		{"torn tail just short", cat(B, C[:len(C)-1]), nil, [][]byte{B}, 0, len(C) - 1},
		{"only a torn batch", B[:len(B)-1], nil, nil, 0, len(B) - 1},
		{"only a torn batch, wrong offset", D[:70], nil, nil, 0, 70},
		{"impossible length", cat(B, edit(C, false, func(b []byte) { binary.BigEndian.PutUint32(b[batchtest.OffLength:], 10) })), recordbatch.ErrCorrupt, [][]byte{B}, 0, 0},
		{"negative length", cat(B, edit(C, false, func(b []byte) { binary.BigEndian.PutUint32(b[batchtest.OffLength:], 0xffffff00) })), recordbatch.ErrCorrupt, [][]byte{B}, 0, 0},
		{"length too long for the batch", cat(B, edit(C, false, func(b []byte) { binary.BigEndian.PutUint32(b[batchtest.OffLength:], uint32(len(C)+len(D)-12)) }), D), recordbatch.ErrCorrupt, [][]byte{B}, 0, 0},
		{"length too short for the batch", cat(B, edit(C, false, func(b []byte) { binary.BigEndian.PutUint32(b[batchtest.OffLength:], uint32(len(C)-13)) }), D), recordbatch.ErrCorrupt, [][]byte{B}, 0, 0},
		{"magic 1", cat(B, edit(C, false, func(b []byte) { b[batchtest.OffMagic] = 1 })), recordbatch.ErrUnsupportedMagic, [][]byte{B}, 0, 0},
		{"unknown codec", cat(B, edit(C, true, func(b []byte) { b[batchtest.OffAttributes+1] |= 7 })), recordbatch.ErrCorrupt, [][]byte{B}, 0, 0},
		{"negative last delta", cat(B, edit(C, true, func(b []byte) { binary.BigEndian.PutUint32(b[batchtest.OffLastDelta:], 0xffffffff) })), recordbatch.ErrCorrupt, [][]byte{B}, 0, 0},
		{"more records than offsets", cat(B, edit(C, true, func(b []byte) { binary.BigEndian.PutUint32(b[batchtest.OffRecordCount:], 4) })), recordbatch.ErrCorrupt, [][]byte{B}, 0, 0},
		{"stale leader epoch", cat(B, storedBatch(t, batchOpts{N: 3}, 6, 0)), ErrStaleLeaderEpoch, [][]byte{B}, 0, 0},
		{"garbage", bytes.Repeat([]byte{0xa5}, 300), recordbatch.ErrCorrupt, nil, 0, 0},
		{"zeros", make([]byte, 300), recordbatch.ErrCorrupt, nil, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testConfig()
			l := openLog(t, t.TempDir(), cfg)
			if _, err := l.AppendReplica(A); err != nil {
				t.Fatal(err)
			}
			prodBefore := producersOf(l)
			in := bytes.Clone(tc.in)
			res, err := l.AppendReplica(in)
			if tc.err == nil && err != nil || tc.err != nil && !errors.Is(err, tc.err) {
				t.Fatalf("error %v, want %v", err, tc.err)
			}
			if !bytes.Equal(in, tc.in) {
				t.Fatal("AppendReplica modified its input")
			}
			want := append([][]byte{A}, tc.kept...)
			wantEnd := recordbatch.LastOffset(want[len(want)-1]) + 1
			if res.EndOffset != wantEnd || l.EndOffset() != wantEnd || res.Batches != len(tc.kept) || res.Skipped != tc.skipped || res.PartialBytes != tc.partial {
				t.Fatalf("result %+v, end %d; want end %d, %d batches, %d skipped, %d partial", res, l.EndOffset(), wantEnd, len(tc.kept), tc.skipped, tc.partial)
			}
			checkStored := func(l *Log) {
				t.Helper()
				got := readAll(t, l, 0)
				if len(got) != len(want) {
					t.Fatalf("log holds %d batches, want %d", len(got), len(want))
				}
				for i := range got {
					if !bytes.Equal(got[i], want[i]) {
						t.Fatalf("batch %d is not the leader's, verbatim", i)
					}
				}
			}
			checkStored(l)
			if len(tc.kept) == 0 && !reflect.DeepEqual(producersOf(l), prodBefore) {
				t.Fatal("producer state changed with nothing appended")
			}
			// The rest arrives, and the log carries on.
			if _, err := l.AppendReplica(cat(B, C, D)); err != nil {
				t.Fatalf("the good batches after: %v", err)
			}
			want = [][]byte{A, B, C, D}
			checkStored(l)
			checkEpochs(t, l, ec(1, 0, 2, 6))
			// Nothing bad reached the disk.
			r := openLog(t, crashCopy(t, l), cfg)
			if r.EndOffset() != 12 {
				t.Fatalf("after a crash: end %d", r.EndOffset())
			}
			checkStored(r)
		})
	}
}

// TestAppendReplicaProducerStateNeverRejects: what the leader accepted
// goes in, whatever the producer table says; the table follows the log.
func TestAppendReplicaProducerStateNeverRejects(t *testing.T) {
	l := openLog(t, t.TempDir(), testConfig())
	in := cat(
		storedBatch(t, batchOpts{N: 2, Idempotent: true, PID: 9, Epoch: 3, Seq: 0}, 0, 0),
		storedBatch(t, batchOpts{N: 2, Idempotent: true, PID: 9, Epoch: 3, Seq: 10}, 2, 0), // sequence gap
		storedBatch(t, batchOpts{N: 2, Idempotent: true, PID: 9, Epoch: 3, Seq: 10}, 4, 0), // duplicate sequence
		storedBatch(t, batchOpts{N: 1, Idempotent: true, PID: 9, Epoch: 1, Seq: 5}, 6, 0),  // older producer epoch
		storedBatch(t, batchOpts{N: 1, Idempotent: true, PID: 9, Epoch: 4, Seq: 7}, 7, 0),  // new epoch, not at 0
	)
	res, err := l.AppendReplica(in)
	if err != nil || res.Batches != 5 || res.Records != 8 || l.EndOffset() != 8 {
		t.Fatalf("%+v, %v", res, err)
	}
	live := producersOf(l)
	dir := crashCopy(t, l)
	for _, s := range filesWithExt(t, dir, ".snapshot") {
		removeFile(t, dir, s)
	}
	if replayed := producersOf(openLog(t, dir, testConfig())); !reflect.DeepEqual(live, replayed) {
		t.Fatalf("producer table is not the log's:\nlive     %v\nreplayed %v", live, replayed)
	}
	// Promoted: the last batch is a duplicate, the next sequence follows it.
	res2, err := appendRaw(l, buildBatch(t, batchOpts{N: 1, Idempotent: true, PID: 9, Epoch: 4, Seq: 7}), 1)
	if err != nil || !res2.Duplicate || res2.BaseOffset != 7 {
		t.Fatalf("retry: %+v, %v", res2, err)
	}
	if _, err := appendRaw(l, buildBatch(t, batchOpts{N: 1, Idempotent: true, PID: 9, Epoch: 4, Seq: 8}), 1); err != nil {
		t.Fatal(err)
	}
}

// TestAppendReplicaCompactedBatches: a leader's compacted batches (fewer
// records than offsets) replicate; recordbatch.Validate would refuse them.
func TestAppendReplicaCompactedBatches(t *testing.T) {
	recs := []testRecord{{OffsetDelta: 0, Key: []byte("a"), Value: []byte("1")}, {OffsetDelta: 3, Key: []byte("b"), Value: []byte("2")}}
	b := storedBatch(t, batchOpts{Records: recs, LastDelta: i32(4)}, 0, 1)
	if _, err := recordbatch.Validate(b, 0); err == nil {
		t.Fatal("setup: recordbatch.Validate accepts a compacted batch")
	}
	l := openLog(t, t.TempDir(), testConfig())
	res, err := l.AppendReplica(cat(b, storedBatch(t, batchOpts{N: 1}, 5, 1)))
	if err != nil || l.EndOffset() != 6 || res.Records != 3 {
		t.Fatalf("%+v, %v", res, err)
	}
}

// TestAppendReplicaStaleAssignedEpochGivesWay: a replica that recorded an
// epoch as leader but never wrote takes the new leader's batches of an
// older epoch at that offset.
func TestAppendReplicaStaleAssignedEpochGivesWay(t *testing.T) {
	dir := t.TempDir()
	l := openLog(t, dir, testConfig())
	if _, err := l.AppendReplica(storedBatch(t, batchOpts{N: 2}, 0, 3)); err != nil {
		t.Fatal(err)
	}
	if err := l.AssignEpoch(5, 2); err != nil {
		t.Fatal(err)
	}
	if _, err := l.AppendReplica(storedBatch(t, batchOpts{N: 2}, 2, 4)); err != nil {
		t.Fatal(err)
	}
	checkEpochs(t, l, ec(3, 0, 4, 2))
	if got := checkpointText(t, dir); got != "0\n2\n3 0\n4 2\n" {
		t.Fatalf("checkpoint %q", got)
	}
	// Once epoch 4 has data, an older epoch is refused.
	_, err := l.AppendReplica(storedBatch(t, batchOpts{N: 2}, 4, 3))
	wantErrIs(t, err, ErrStaleLeaderEpoch)
}

func TestAppendReplicaClosedOrFailed(t *testing.T) {
	l := openLog(t, t.TempDir(), testConfig())
	l.mu.Lock()
	l.mu.failed = errors.New("disk gone")
	l.mu.Unlock()
	if _, err := l.AppendReplica(storedBatch(t, batchOpts{}, 0, 0)); err == nil || l.EndOffset() != 0 {
		t.Fatalf("failed log: %v", err)
	}
	l.mu.Lock()
	l.mu.failed = nil
	l.mu.Unlock()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := l.AppendReplica(storedBatch(t, batchOpts{}, 0, 0)); !errors.Is(err, ErrClosed) {
		t.Fatalf("closed log: %v", err)
	}
	if _, err := os.Stat(filepath.Join(l.dir, "00000000000000000000.log")); err != nil {
		t.Fatal(err)
	}
}
