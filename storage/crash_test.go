package storage

import (
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/fjordlog/fjord/storage/recordbatch"
	"github.com/rs/zerolog"
)

// TestCrashRecovery runs random workloads on a Log over MemFS (appends as
// leader and as follower, flushes, rolls by size and time, truncations,
// restarts at an offset, retention, compaction, new leader epochs, clean
// restarts) and crashes it at random moments: between operations, and in
// the middle of one, before any of its file-system calls (a sync, a write,
// a rename, ...), including in the middle of the recovery after a crash.
// Each crash image is recovered and checked against a model of the log:
//
//   - every acknowledged record is there with its offset, key, value and
//     timestamp: those below DurableOffset when the last operation
//     finished before the crash, unless the operation under way
//     legitimately removes it (a truncation, retention, compaction);
//   - nothing is invented: every record read back is one the model holds
//     at that offset, before or after the operation under way, or one that
//     retention removed without making that durable (retention deletes
//     files without syncing the directory: they may come back, unchanged);
//     a truncation that returned is final;
//   - no record is lost while a later one survives, except where retention
//     or compaction may remove it;
//   - every batch read back passes its CRC; the end offset is where the
//     last batch ends; the leader-epoch cache agrees with the batches'
//     epochs; OffsetForTimestamp finds what the records say; the
//     idempotent producer's state matches the log (its next sequence is
//     accepted, a retry of its last batch is found a duplicate).
//
// Then the model becomes what was recovered, and the workload goes on.
//
// 40 seeds (10 with -short) take a few seconds under -race;
// FJORD_CRASH_SEEDS=n runs n seeds, FJORD_CRASH_SEED=s runs seed s alone,
// logging each operation and each crash image's files.
func TestCrashRecovery(t *testing.T) {
	seeds, first := uint64(40), uint64(0)
	if testing.Short() {
		seeds = 10
	}
	if v := os.Getenv("FJORD_CRASH_SEEDS"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("FJORD_CRASH_SEEDS=%q: %v", v, err)
		}
		seeds = n
	}
	verbose := false
	if v := os.Getenv("FJORD_CRASH_SEED"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("FJORD_CRASH_SEED=%q: %v", v, err)
		}
		seeds, first, verbose = 1, n, true
	}
	var crashes, midOp, doubles, txnChecks, txnExact, aborts int
	for seed := first; seed < first+seeds; seed++ {
		r := newCrashRun(t, seed, verbose)
		r.run(150)
		if t.Failed() {
			return
		}
		crashes += r.crashes
		midOp += r.midOpCrashes
		doubles += r.doubleCrashes
		txnChecks += r.txn.checks
		txnExact += r.txn.exact
		aborts += r.txn.aborts
	}
	t.Logf("%d seeds: %d crashes recovered, %d of them in the middle of an operation, %d in the middle of a recovery", seeds, crashes, midOp, doubles)
	t.Logf("transactions: %d checks of the state, %d of them exact against a replay; %d aborted transactions in the logs checked", txnChecks, txnExact, aborts)
}

// crashFS is a MemFS that takes a crash image just before its armed-th
// next call that changes anything (writes, truncations, syncs, creations,
// renames, removals). Calls that change nothing do not count: a crash
// between them is the same as a crash before the next change.
type crashFS struct {
	*MemFS
	rng *rand.Rand // the run's: taken images are reproducible

	mu        sync.Mutex
	countdown int    // changing calls left before the image; -1: disarmed
	image     *MemFS // the image taken, until collected
}

func newCrashFS(m *MemFS, rng *rand.Rand) *crashFS {
	return &crashFS{MemFS: m, rng: rng, countdown: -1}
}

// arm takes an image before the n-th next changing call (0: the next).
func (c *crashFS) arm(n int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.countdown, c.image = n, nil
}

// collect disarms and returns the image taken since arm, if any.
func (c *crashFS) collect() *MemFS {
	c.mu.Lock()
	defer c.mu.Unlock()
	img := c.image
	c.countdown, c.image = -1, nil
	return img
}

func (c *crashFS) tick() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.countdown < 0 {
		return
	}
	if c.countdown == 0 {
		c.image = c.MemFS.CrashClone(c.rng)
	}
	c.countdown--
}

func (c *crashFS) OpenFile(name string, flag int, perm os.FileMode) (File, error) {
	if flag&(os.O_WRONLY|os.O_RDWR|os.O_CREATE|os.O_TRUNC) != 0 {
		c.tick()
	}
	f, err := c.MemFS.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return crashFile{f, c}, nil
}

func (c *crashFS) Remove(name string) error    { c.tick(); return c.MemFS.Remove(name) }
func (c *crashFS) RemoveAll(name string) error { c.tick(); return c.MemFS.RemoveAll(name) }
func (c *crashFS) Rename(oldname, newname string) error {
	c.tick()
	return c.MemFS.Rename(oldname, newname)
}
func (c *crashFS) MkdirAll(dir string, perm os.FileMode) error {
	c.tick()
	return c.MemFS.MkdirAll(dir, perm)
}
func (c *crashFS) SyncDir(dir string) error { c.tick(); return c.MemFS.SyncDir(dir) }

type crashFile struct {
	File
	c *crashFS
}

func (f crashFile) WriteAt(p []byte, off int64) (int, error) {
	f.c.tick()
	return f.File.WriteAt(p, off)
}
func (f crashFile) Write(p []byte) (int, error)    { f.c.tick(); return f.File.Write(p) }
func (f crashFile) Truncate(size int64) error      { f.c.tick(); return f.File.Truncate(size) }
func (f crashFile) Sync() error                    { f.c.tick(); return f.File.Sync() }
func (f crashFile) SyncData() error                { f.c.tick(); return f.File.SyncData() }
func (f crashFile) Preallocate(off, n int64) error { f.c.tick(); return f.File.Preallocate(off, n) }

// mrec is one record as the model knows it.
type mrec struct {
	key, value string
	ts         int64
}

// mbatch is one batch as the model knows it.
//
// Invariant: every key of recs is in [base, last].
type mbatch struct {
	base, last int64
	recs       map[int64]mrec // by offset; compaction may remove some
	epoch      int32
	pid        int64 // -1: not idempotent
	firstSeq   int32
	lastSeq    int32
	tb         tbatch // what the transaction model sees of it
}

// crashModel is what the log holds, as far as the test knows.
//
// Invariants: batches are sorted by base and do not overlap; ghosts are
// all below the first batch's base.
type crashModel struct {
	batches []*mbatch
	// durable: the records below it are acknowledged (DurableOffset when
	// the last operation that finished returned).
	durable int64
	// ghosts: records retention removed without syncing the directory:
	// a crash may bring them back, unchanged.
	ghosts map[int64]mrec
}

func (m *crashModel) clone() *crashModel {
	c := &crashModel{durable: m.durable, ghosts: make(map[int64]mrec, len(m.ghosts))}
	for k, v := range m.ghosts {
		c.ghosts[k] = v
	}
	for _, b := range m.batches {
		nb := *b
		nb.recs = make(map[int64]mrec, len(b.recs))
		for k, v := range b.recs {
			nb.recs[k] = v
		}
		c.batches = append(c.batches, &nb)
	}
	return c
}

func (m *crashModel) records() map[int64]mrec {
	out := map[int64]mrec{}
	for _, b := range m.batches {
		for o, r := range b.recs {
			out[o] = r
		}
	}
	return out
}

// crashRun is one seed's workload.
type crashRun struct {
	t       *testing.T
	seed    uint64
	rng     *rand.Rand
	verbose bool

	dir string
	cfg Config
	fs  *crashFS
	l   *Log
	m   *crashModel

	now    int64 // ms, the workload's clock
	epoch  int32 // leader epoch for appends; never below the log's latest
	pid    int64 // the idempotent producer; a new one when its state is unknown
	seq    int32 // its next sequence number
	values int   // values made so far: each is unique

	// Transactions (crash_txn_test.go): producers run them through the
	// leader (Append, AppendMarker) and through a follower's fetches.
	txn crashTxns

	history                              []string // the operations so far, for failure messages
	crashes, midOpCrashes, doubleCrashes int
}

func newCrashRun(t *testing.T, seed uint64, verbose bool) *crashRun {
	rng := rand.New(rand.NewPCG(seed, 0x6372617368))
	cfg := testConfig()
	cfg.SegmentBytes = int64(600 + rng.IntN(1500))
	cfg.SegmentMs = int64(2000 + rng.IntN(20000))
	cfg.IndexIntervalBytes = int32(64 + rng.IntN(512))
	cfg.FileDeleteDelay = time.Millisecond
	cfg.Compacted = rng.IntN(3) == 0
	// The workload's clock starts near zero, so runs replay exactly, but
	// AppendReplica and Open read the wall clock: producers must not
	// expire across the two.
	cfg.ProducerExpirationMs = 1 << 50
	if rng.IntN(2) == 0 {
		cfg.RetentionBytes = int64(2000 + rng.IntN(6000))
	}
	if rng.IntN(2) == 0 {
		cfg.RetentionMs = int64(5000 + rng.IntN(30000))
	}
	r := &crashRun{
		t: t, seed: seed, rng: rng, verbose: verbose,
		dir: "/kafka/logs/topic-0", cfg: cfg,
		m:   &crashModel{ghosts: map[int64]mrec{}},
		now: 1_000_000, pid: 1000, epoch: 0,
	}
	r.fs = newCrashFS(NewMemFS(), rng)
	r.cfg.FS = r.fs
	return r
}

func (r *crashRun) logf(format string, args ...any) {
	s := fmt.Sprintf(format, args...)
	r.history = append(r.history, s)
	if r.verbose {
		r.t.Log(s)
	}
}

func (r *crashRun) fatalf(format string, args ...any) {
	r.t.Helper()
	h := r.history
	if len(h) > 40 {
		h = h[len(h)-40:]
	}
	r.t.Fatalf("seed %d (FJORD_CRASH_SEED=%d to replay; config %+v): %s\nlast operations:\n  %s",
		r.seed, r.seed, r.cfg, fmt.Sprintf(format, args...), strings.Join(h, "\n  "))
}

func (r *crashRun) open() *Log {
	r.t.Helper()
	l, err := Open(r.dir, r.cfg, zerolog.Nop())
	if err != nil {
		r.fatalf("Open: %v", err)
	}
	return l
}

func (r *crashRun) run(steps int) {
	r.l = r.open()
	r.logf("open: start %d end %d", r.l.StartOffset(), r.l.EndOffset())
	for range steps {
		if r.t.Failed() {
			return
		}
		r.step()
	}
	r.l.Close()
}

// crashOp says what an operation may do to records, for the checks after
// a crash in its middle.
type crashOp int

const (
	opKeeps     crashOp = iota // removes nothing
	opCuts                     // removes a tail (Truncate), so cut short it leaves a prefix
	opRemoves                  // removes whole segments or records anywhere (retention, compaction)
	opRestarted                // removes everything (TruncateFullyAndStartAt), maybe only in part
)

func (r *crashRun) step() {
	r.now += int64(r.rng.IntN(200))
	before := r.m.clone()
	if r.rng.IntN(6) == 0 {
		r.fs.arm(r.rng.IntN(10)) // a crash before one of its first ten changes, if it makes that many
	}
	kind := opKeeps
	switch p := r.rng.IntN(100); {
	case p < 30:
		r.appendLeader()
	case p < 40:
		r.appendTxn()
	case p < 48:
		r.appendReplica()
	case p < 53:
		r.appendMarker()
	case p < 66:
		r.logf("flush")
		if err := r.l.Flush(); err != nil {
			r.fatalf("Flush: %v", err)
		}
	case p < 71:
		kind = opCuts
		r.truncate()
	case p < 72:
		kind = opRestarted
		r.restartAt()
	case p < 77:
		kind = opRemoves
		r.retention()
	case p < 81:
		if r.cfg.Compacted {
			kind = opRemoves
			r.compact()
		}
	case p < 83:
		r.logf("assign epoch %d at %d", r.epoch+1, r.l.EndOffset())
		if err := r.l.AssignEpoch(r.epoch+1, r.l.EndOffset()); err != nil {
			r.fatalf("AssignEpoch: %v", err)
		}
		r.epoch++
	case p < 85:
		r.now += int64(r.rng.IntN(40000))
		r.logf("clock jumps to %d", r.now)
	case p < 90:
		r.cleanRestart()
		if r.t.Failed() {
			return
		}
	default:
		// A crash between operations.
		r.fs.collect()
		r.logf("crash between operations")
		r.recover(r.fs.MemFS.CrashClone(r.rng), before, before, opKeeps)
		return
	}
	if r.t.Failed() {
		return
	}
	img := r.fs.collect()
	r.txn.settle(img != nil)
	if img == nil {
		r.m.durable = r.l.DurableOffset()
		return
	}
	r.midOpCrashes++
	r.logf("  (crashed in the middle of that)")
	r.recover(img, before, r.m, kind)
}

// newRecords makes 1-4 records with fresh values, at r.now.
func (r *crashRun) newRecords() []testRecord {
	n := 1 + r.rng.IntN(4)
	recs := make([]testRecord, n)
	for i := range recs {
		r.values++
		v := fmt.Appendf(nil, "s%d-v%d-", r.seed, r.values)
		for range r.rng.IntN(200) {
			v = append(v, byte('a'+r.rng.IntN(26)))
		}
		recs[i] = testRecord{OffsetDelta: int32(i), Key: fmt.Appendf(nil, "k%d", r.rng.IntN(8)), Value: v}
	}
	return recs
}

func (r *crashRun) codec() int8 {
	if r.rng.IntN(8) == 0 {
		return recordbatch.CodecSnappy
	}
	return recordbatch.CodecNone
}

func modelBatch(base int64, recs []testRecord, ts int64, epoch int32, pid int64, seq int32) *mbatch {
	b := &mbatch{base: base, last: base + int64(len(recs)-1), recs: map[int64]mrec{}, epoch: epoch, pid: pid, firstSeq: -1, lastSeq: -1}
	for i, rec := range recs {
		b.recs[base+int64(i)] = mrec{string(rec.Key), string(rec.Value), ts}
	}
	if pid >= 0 {
		b.firstSeq, b.lastSeq = seq, seq+int32(len(recs)-1)
	}
	b.tb = tbatch{base: b.base, last: b.last, pid: pid}
	return b
}

func (r *crashRun) appendLeader() {
	recs := r.newRecords()
	o := batchOpts{Records: recs, BaseTS: r.now, Codec: r.codec()}
	idem := r.rng.IntN(2) == 0
	if idem {
		o.Idempotent, o.PID, o.Seq = true, r.pid, r.seq
	}
	b := buildBatch(r.t, o)
	info, err := recordbatch.Validate(b, 0)
	if err != nil {
		r.fatalf("recordbatch.Validate: %v", err)
	}
	r.logf("append %d records at %d (epoch %d, idempotent %v, pid %d seq %d)", len(recs), r.l.EndOffset(), r.epoch, idem, r.pid, r.seq)
	res, err := r.l.Append(b, info, r.epoch, r.now)
	if err != nil {
		r.fatalf("Append: %v", err)
	}
	if res.Duplicate {
		r.fatalf("Append of a new batch (pid %d seq %d) was taken for a duplicate at %d: producer state does not match the log", r.pid, r.seq, res.BaseOffset)
	}
	pid := int64(-1)
	if idem {
		pid = r.pid
		r.seq += int32(len(recs))
	}
	r.m.batches = append(r.m.batches, modelBatch(res.BaseOffset, recs, r.now, r.epoch, pid, o.Seq))
}

func (r *crashRun) appendReplica() {
	var in []byte
	var mbs []*mbatch
	at := r.l.EndOffset()
	for range 1 + r.rng.IntN(3) {
		if r.cfg.Compacted && r.rng.IntN(3) == 0 {
			at += int64(1 + r.rng.IntN(20)) // a gap, as a compacted leader's log has
		}
		if b, mb := r.replicaTxnBatch(at); b != nil {
			in = append(in, b...)
			mbs = append(mbs, mb)
			at = mb.last + 1
			continue
		}
		recs := r.newRecords()
		b := buildBatch(r.t, batchOpts{Records: recs, BaseTS: r.now, Codec: r.codec()})
		recordbatch.Stamp(b, at, r.epoch, -1)
		in = append(in, b...)
		mbs = append(mbs, modelBatch(at, recs, r.now, r.epoch, -1, -1))
		at += int64(len(recs))
	}
	r.logf("append %d fetched batches at %d..%d (epoch %d)", len(mbs), mbs[0].base, at, r.epoch)
	res, err := r.l.AppendReplica(in)
	if err != nil {
		r.fatalf("AppendReplica: %v", err)
	}
	if res.Batches != len(mbs) || res.EndOffset != at {
		r.fatalf("AppendReplica appended %d batches, end %d; want %d, %d", res.Batches, res.EndOffset, len(mbs), at)
	}
	r.m.batches = append(r.m.batches, mbs...)
}

// truncate cuts the log to a random offset in [start, end].
func (r *crashRun) truncate() {
	start, end := r.l.StartOffset(), r.l.EndOffset()
	to := start + r.rng.Int64N(end-start+1)
	if r.rng.IntN(2) == 0 {
		// Mostly near the end, as a follower's divergence point is: the
		// segment cut is then the active one, maybe after a restart.
		to = max(start, end-r.rng.Int64N(12))
	}
	r.logf("truncate to %d (log [%d, %d))", to, start, end)
	if err := r.l.Truncate(to); err != nil {
		r.fatalf("Truncate(%d): %v", to, err)
	}
	keep := 0
	for keep < len(r.m.batches) && r.m.batches[keep].last < to {
		keep++
	}
	r.m.batches = r.m.batches[:keep]
	want := to
	if end < to {
		want = end
	}
	if got := r.l.EndOffset(); got > want || (keep > 0 && got <= r.m.batches[keep-1].last) {
		r.fatalf("after Truncate(%d) the end is %d; want after the last kept batch (%d) and at most %d", to, got, r.lastOffset(), want)
	}
	r.afterCut()
	r.txn.sync(r.m.batches)
	r.verifyTxns(r.l, r.m.batches, "after the truncation")
}

func (r *crashRun) lastOffset() int64 {
	if n := len(r.m.batches); n > 0 {
		return r.m.batches[n-1].last
	}
	return -1
}

// afterCut finds the producer's next sequence from the batches left: with
// none of its batches left, its state on the log is unknown here (a
// snapshot may remember it), so a new producer takes over.
func (r *crashRun) afterCut() {
	for i := len(r.m.batches) - 1; i >= 0; i-- {
		if b := r.m.batches[i]; b.pid == r.pid {
			r.seq = b.lastSeq + 1
			return
		}
	}
	r.pid, r.seq = r.pid+1, 0
}

func (r *crashRun) restartAt() {
	start, end := r.l.StartOffset(), r.l.EndOffset()
	to := max(0, start-5) + r.rng.Int64N(end-start+30)
	r.logf("truncate fully and start at %d (log [%d, %d))", to, start, end)
	if err := r.l.TruncateFullyAndStartAt(to); err != nil {
		r.fatalf("TruncateFullyAndStartAt(%d): %v", to, err)
	}
	if r.l.StartOffset() != to || r.l.EndOffset() != to {
		r.fatalf("after TruncateFullyAndStartAt(%d): [%d, %d)", to, r.l.StartOffset(), r.l.EndOffset())
	}
	r.m.batches, r.m.ghosts = nil, map[int64]mrec{}
	r.pid, r.seq = r.pid+1, 0
	r.txn.restarted()
}

func (r *crashRun) retention() {
	oldStart := r.l.StartOffset()
	var bounds []int64 // where the log may start after it, even cut short
	for _, s := range r.l.segments() {
		if s.base > oldStart {
			bounds = append(bounds, s.base)
		}
	}
	n, err := r.l.DeleteOldSegments(r.now)
	r.logf("retention at %d: %d segments deleted, start now %d", r.now, n, r.l.StartOffset())
	if err != nil {
		r.fatalf("DeleteOldSegments: %v", err)
	}
	start := r.l.StartOffset()
	for len(bounds) > 0 && bounds[len(bounds)-1] > start {
		bounds = bounds[:len(bounds)-1]
	}
	r.txn.retentionCut(r.m.batches, bounds)
	k := 0
	for k < len(r.m.batches) && r.m.batches[k].base < start {
		for o, rec := range r.m.batches[k].recs {
			r.m.ghosts[o] = rec
		}
		k++
	}
	r.m.batches = r.m.batches[k:]
}

// compact runs compaction and takes what is left as the model, once it is
// checked: only records with a later one of the same key went (among
// records not in aborted transactions, below the first unstable offset),
// or records of aborted transactions; no marker went; nothing at or above
// the first unstable offset went.
func (r *crashRun) compact() {
	r.l.UpdateHighWatermark(r.l.EndOffset()) // the broker tells the log its high watermark
	fuo, unstable := r.l.FirstUnstableOffset()
	if !unstable {
		fuo = 1 << 62
	}
	st, err := r.l.Compact(r.now, 1<<40)
	r.logf("compact: %+v (first unstable offset %d, %v)", st, fuo, unstable)
	if err != nil {
		r.fatalf("Compact: %v", err)
	}
	got := map[int64]mrec{}
	for _, b := range r.readBatches(r.l) {
		for o, rec := range b.recs {
			got[o] = rec
		}
	}
	tbs := make([]tbatch, len(r.m.batches))
	for i, b := range r.m.batches {
		tbs[i] = b.tb
	}
	outcome := txnOutcomes(tbs)
	latest := map[string]int64{}
	for i, b := range r.m.batches {
		if b.tb.control || outcome[i] == "abort" {
			continue
		}
		for o, rec := range b.recs {
			if o < fuo {
				latest[rec.key] = max(latest[rec.key], o)
			}
		}
	}
	var kept []*mbatch
	removedTxn := false
	for i, b := range r.m.batches {
		for o, rec := range b.recs {
			g, ok := got[o]
			switch {
			case ok && g != rec:
				r.fatalf("after compaction offset %d holds %+v, want %+v", o, g, rec)
			case ok:
			case b.tb.control:
				r.fatalf("compaction removed the marker at %d", o)
			case o >= fuo:
				r.fatalf("compaction removed offset %d, at or above the first unstable offset %d", o, fuo)
			case outcome[i] == "abort":
				delete(b.recs, o)
			case latest[rec.key] <= o:
				r.fatalf("compaction removed offset %d, the latest record of key %s (not in an aborted transaction)", o, rec.key)
			default:
				delete(b.recs, o)
			}
			if !ok && b.tb.txn {
				removedTxn = true
			}
		}
		if len(b.recs) > 0 {
			kept = append(kept, b)
		}
	}
	r.m.batches = kept
	// Compaction may have removed the producer's last batches whole, which
	// its state (snapshots) still remembers while the log no longer shows
	// them (Kafka's cleaner keeps each producer's last batch for this):
	// a new producer takes over, whose state the log does show.
	r.pid, r.seq = r.pid+1, 0
	r.txn.compacted(removedTxn)
	r.verifyTxns(r.l, r.m.batches, "after compaction")
}

// cleanRestart closes the log and opens it again; nothing may be lost.
func (r *crashRun) cleanRestart() {
	r.logf("close")
	if err := r.l.Close(); err != nil {
		r.fatalf("Close: %v", err)
	}
	before := r.m.clone()
	if img := r.fs.collect(); img != nil {
		// The crash came during Close: recover from it instead.
		r.midOpCrashes++
		r.logf("  (crashed in the middle of that)")
		r.recover(img, before, before, opKeeps)
		return
	}
	before.durable = 1 << 62 // a clean close acknowledges everything
	r.fs.arm(r.rng.IntN(30))
	r.logf("open after a clean close")
	r.l = r.open()
	if img := r.fs.collect(); img != nil {
		r.midOpCrashes++
		r.logf("  (crashed in the middle of that)")
		r.recover(img, before, before, opKeeps)
		return
	}
	r.verify(r.l, before, before, opKeeps)
	r.adopt()
}

// recover opens the log on a crash image, maybe crashing again in the
// middle of that recovery, and checks it.
func (r *crashRun) recover(img *MemFS, before, after *crashModel, kind crashOp) {
	r.crashes++
	fs := newCrashFS(img, r.rng)
	r.fs = fs
	r.cfg.FS = fs
	if r.rng.IntN(4) == 0 {
		fs.arm(r.rng.IntN(20))
	}
	r.logf("recover")
	if r.verbose {
		ents, _ := img.ReadDir(r.dir)
		for _, e := range ents {
			info, _ := e.Info()
			r.logf("    %s %d", e.Name(), info.Size())
		}
	}
	l := r.open()
	if img2 := fs.collect(); img2 != nil {
		// A second crash, during recovery: recovery must be safe to
		// redo from any point of its own.
		r.doubleCrashes++
		r.logf("  (crashed in the middle of recovery; recover again)")
		l.Close()
		fs = newCrashFS(img2, r.rng)
		r.fs = fs
		r.cfg.FS = fs
		l = r.open()
	}
	r.l = l
	r.verify(l, before, after, kind)
	r.adopt()
}

// readBatches reads the whole log, checking each batch's CRC and framing.
func (r *crashRun) readBatches(l *Log) []*mbatch {
	var out []*mbatch
	end := l.EndOffset()
	for off := l.StartOffset(); off < end; {
		data, err := l.Read(off, 1<<20, end, nil)
		if err != nil {
			r.fatalf("Read(%d) in [%d, %d): %v", off, l.StartOffset(), end, err)
		}
		if len(data) == 0 {
			// Compaction removed every batch from here to the end (Read
			// skips gaps within the log, so none comes later).
			break
		}
		for pos := 0; pos < len(data); {
			info, err := recordbatch.ParseHeader(data[pos:])
			if err != nil || pos+info.Bytes > len(data) {
				r.fatalf("Read(%d): bad batch at %d: %v", off, pos, err)
			}
			b := data[pos : pos+info.Bytes]
			if err := recordbatch.CheckCRC(b); err != nil {
				r.fatalf("Read(%d) returned a batch failing its CRC: %v", off, err)
			}
			mb := &mbatch{base: recordbatch.BaseOffset(b), last: recordbatch.LastOffset(b), recs: map[int64]mrec{}, epoch: recordbatch.PartitionLeaderEpoch(b),
				pid: info.ProducerID, firstSeq: info.BaseSequence, lastSeq: info.LastSequence()}
			if mb.tb, err = decodeTBatch(b); err != nil {
				r.fatalf("Read(%d): batch at %d: %v", off, mb.base, err)
			}
			if n := len(out); n > 0 && mb.base <= out[n-1].last {
				r.fatalf("batch at %d does not follow the one ending at %d", mb.base, out[n-1].last)
			}
			err = recordbatch.EachRecord(b, info, func(rec recordbatch.Record) bool {
				mb.recs[mb.base+int64(rec.OffsetDelta)] = mrec{string(rec.Key), string(rec.Value), info.BaseTimestamp + rec.TimestampDelta}
				return true
			})
			if err != nil {
				r.fatalf("records of the batch at %d: %v", mb.base, err)
			}
			out = append(out, mb)
			off = mb.last + 1
			pos += info.Bytes
		}
	}
	return out
}

// verify checks the log l recovered from a crash that came after before
// and, if an operation of kind was under way, before it finished in after
// (the same model when no operation was under way).
func (r *crashRun) verify(l *Log, before, after *crashModel, kind crashOp) {
	got := r.readBatches(l)
	if r.t.Failed() {
		return
	}
	rec := map[int64]mrec{}
	for _, b := range got {
		for o, x := range b.recs {
			rec[o] = x
		}
	}
	bRecs, aRecs := before.records(), after.records()

	// Nothing invented.
	for o, x := range rec {
		if y, ok := bRecs[o]; ok && x == y {
			continue
		}
		if y, ok := aRecs[o]; ok && x == y {
			continue
		}
		if y, ok := before.ghosts[o]; ok && x == y {
			continue
		}
		if y, ok := after.ghosts[o]; ok && x == y {
			continue
		}
		r.fatalf("recovered offset %d holds %+v, which the log never held there (model: %+v, or removed for good)", o, x, bRecs[o])
	}

	// Which records may be missing, and how.
	free := func(o int64) bool { // may be missing anywhere
		if _, ok := before.ghosts[o]; ok {
			return true
		}
		if _, ok := after.ghosts[o]; ok {
			return true
		}
		_, inAfter := aRecs[o]
		return !inAfter && (kind == opRemoves || kind == opRestarted)
	}
	var offs []int64
	for o := range bRecs {
		offs = append(offs, o)
	}
	for o := range aRecs {
		if _, ok := bRecs[o]; !ok {
			offs = append(offs, o)
		}
	}
	slices.Sort(offs)
	lost := int64(-1)
	for _, o := range offs {
		_, have := rec[o]
		_, inAfter := aRecs[o]
		_, inBefore := bRecs[o]
		switch {
		case have && lost >= 0 && !free(o):
			r.fatalf("recovered offset %d, but lost %d before it", o, lost)
		case have:
		case inBefore && inAfter && o < before.durable && !free(o):
			r.fatalf("acknowledged offset %d (durable end %d) is lost; recovered log [%d, %d)", o, before.durable, l.StartOffset(), l.EndOffset())
		case !free(o) && lost < 0:
			lost = o
		}
	}
	if kind != opCuts && kind != opRestarted && before.durable < 1<<62 && l.EndOffset() < before.durable {
		r.fatalf("recovered end %d is below the durable end %d", l.EndOffset(), before.durable)
	}

	// The end is where the last batch ends, except after a gap: compaction
	// may have removed the last batches of a segment that a truncation made
	// the active one, and a restart at an offset cut short leaves its new,
	// empty segment after old ones it had still to remove (truncate.go).
	// Everything read is durable.
	segs := l.segments()
	active := segs[len(segs)-1]
	gapAtEnd := r.cfg.Compacted || (active.pub.Load().size == 0 && active.base == l.EndOffset())
	if n := len(got); n > 0 && (l.EndOffset() < got[n-1].last+1 || (!gapAtEnd && l.EndOffset() != got[n-1].last+1)) {
		r.fatalf("end offset %d, but the last batch ends at %d", l.EndOffset(), got[n-1].last)
	}
	if len(got) > 0 && l.StartOffset() > got[0].base {
		r.fatalf("start offset %d is past the first batch at %d", l.StartOffset(), got[0].base)
	}
	if l.DurableOffset() != l.EndOffset() {
		r.fatalf("after recovery DurableOffset %d != EndOffset %d", l.DurableOffset(), l.EndOffset())
	}
	r.verifyEpochs(l, got)
	r.verifyTimes(l, got)
	r.verifyPointReads(l, got)
	r.verifyTxns(l, got, "after recovery")
}

// verifyPointReads: a read at any offset returns the batch holding it, or
// the next one after a gap, found through the (maybe trusted) index.
func (r *crashRun) verifyPointReads(l *Log, got []*mbatch) {
	start, end := l.StartOffset(), l.EndOffset()
	if end == start {
		return
	}
	for range 5 {
		o := start + r.rng.Int64N(end-start)
		data, err := l.Read(o, 1, end, nil)
		if err != nil {
			r.fatalf("Read(%d): %v", o, err)
		}
		i := slices.IndexFunc(got, func(b *mbatch) bool { return b.last >= o })
		switch {
		case i < 0 && len(data) == 0:
		case i < 0:
			r.fatalf("Read(%d) returned a batch at %d past the last one", o, recordbatch.BaseOffset(data))
		case len(data) < recordbatch.HeaderLen || recordbatch.BaseOffset(data) != got[i].base:
			r.fatalf("Read(%d) returned %d bytes, want the batch at %d", o, len(data), got[i].base)
		}
	}
}

// verifyEpochs: the epoch cache says where each epoch of the batches ends:
// after its last batch, at or before the first batch of a later epoch.
func (r *crashRun) verifyEpochs(l *Log, got []*mbatch) {
	lastOf := map[int32]int64{}
	var order []int32
	for _, b := range got {
		if b.epoch < 0 {
			continue
		}
		if len(order) > 0 && b.epoch < order[len(order)-1] {
			r.fatalf("batch at %d has epoch %d after epoch %d", b.base, b.epoch, order[len(order)-1])
		}
		if _, ok := lastOf[b.epoch]; !ok {
			order = append(order, b.epoch)
		}
		lastOf[b.epoch] = b.last
	}
	if n := len(order); n > 0 && l.LatestEpoch() < order[n-1] {
		r.fatalf("latest epoch %d, but the log has batches of epoch %d", l.LatestEpoch(), order[n-1])
	}
	for i, e := range order {
		found, end := l.EndOffsetForEpoch(e)
		limit := l.EndOffset()
		if i+1 < len(order) {
			for _, b := range got {
				if b.epoch == order[i+1] {
					limit = b.base
					break
				}
			}
		}
		if found != e || end <= lastOf[e] || end > limit {
			r.fatalf("EndOffsetForEpoch(%d) = (%d, %d); want (%d, in (%d, %d])", e, found, end, e, lastOf[e], limit)
		}
	}
}

// verifyTimes: OffsetForTimestamp finds the first record at or after a
// timestamp (the workload's timestamps never go down along the log).
func (r *crashRun) verifyTimes(l *Log, got []*mbatch) {
	type ot struct {
		off int64
		ts  int64
	}
	var all []ot
	for _, b := range got {
		for o, x := range b.recs {
			all = append(all, ot{o, x.ts})
		}
	}
	slices.SortFunc(all, func(a, b ot) int { return int(a.off - b.off) })
	if !r.cfg.Compacted {
		// The first record of the largest timestamp. (Compaction keeps a
		// segment's largest timestamp when it removes the record.)
		off, ts, ok, err := l.MaxTimestamp()
		want := ot{-1, -1}
		for _, x := range all {
			if x.ts > want.ts {
				want = x
			}
		}
		if err != nil || ok != (want.off >= 0) || (ok && (off != want.off || ts != want.ts)) {
			r.fatalf("MaxTimestamp() = (%d, %d, %v, %v); want %+v", off, ts, ok, err, want)
		}
	}
	for range 3 {
		ts := r.now - int64(r.rng.IntN(20000))
		want := -1
		for i, x := range all {
			if x.ts >= ts {
				want = i
				break
			}
		}
		off, rts, ok, err := l.OffsetForTimestamp(ts, l.EndOffset())
		if err != nil {
			r.fatalf("OffsetForTimestamp(%d): %v", ts, err)
		}
		if (want < 0) != !ok || (ok && (off != all[want].off || rts != all[want].ts)) {
			w := ot{-1, -1}
			if want >= 0 {
				w = all[want]
			}
			r.fatalf("OffsetForTimestamp(%d) = (%d, %d, %v); want %+v", ts, off, rts, ok, w)
		}
	}
}

// adopt makes the model what the recovered log holds (all of it durable),
// and checks the producer's state against it: a retry of its last batch
// is a duplicate at the same offsets, and its next sequence is accepted.
func (r *crashRun) adopt() {
	if r.t.Failed() {
		return
	}
	got := r.readBatches(r.l)
	r.m = &crashModel{batches: got, durable: r.l.DurableOffset(), ghosts: map[int64]mrec{}}
	r.epoch = max(r.epoch, r.l.LatestEpoch())
	r.afterCut()
	r.txn.sync(r.m.batches)
	for i := len(got) - 1; i >= 0; i-- {
		b := got[i]
		if b.pid != r.pid {
			continue
		}
		n := int(b.lastSeq - b.firstSeq + 1)
		recs := make([]testRecord, n)
		for k := range recs {
			recs[k] = testRecord{OffsetDelta: int32(k), Key: []byte("retry"), Value: []byte("retry")}
		}
		dup := buildBatch(r.t, batchOpts{Records: recs, BaseTS: r.now, Idempotent: true, PID: b.pid, Seq: b.firstSeq})
		info, err := recordbatch.Validate(dup, 0)
		if err != nil {
			r.fatalf("recordbatch.Validate: %v", err)
		}
		res, err := r.l.Append(dup, info, r.epoch, r.now)
		if err != nil || !res.Duplicate || res.BaseOffset != b.base || res.LastOffset != b.last {
			r.fatalf("a retry of producer %d's last batch (seq %d-%d at %d-%d) after recovery: %+v, %v; want a duplicate at its offsets",
				b.pid, b.firstSeq, b.lastSeq, b.base, b.last, res, err)
		}
		break
	}
	r.logf("  recovered [%d, %d), %d batches; producer %d next seq %d", r.l.StartOffset(), r.l.EndOffset(), len(got), r.pid, r.seq)
}

// TestDeleteCrash: a crash at any point of Log.Delete leaves either the
// whole log under its name, or a directory that RemoveDeletedDirs removes
// at start-up; never a log missing part of itself that would pass for a
// whole one.
func TestDeleteCrash(t *testing.T) {
	for change := 0; ; change++ {
		last := false // the crash comes after Delete returned
		for seed := range uint64(8) {
			fs := newCrashFS(NewMemFS(), rand.New(rand.NewPCG(seed, uint64(change))))
			cfg := testConfig()
			cfg.FS = fs
			cfg.SegmentBytes = 400
			l, err := Open("/logs/topic-0", cfg, zerolog.Nop())
			if err != nil {
				t.Fatal(err)
			}
			for i := range 12 {
				appendOpts(t, l, batchOpts{N: 3, ValueSize: 40}, int64(i))
			}
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			if l, err = Open("/logs/topic-0", cfg, zerolog.Nop()); err != nil {
				t.Fatal(err)
			}
			if l.SegmentCount() < 3 {
				t.Fatalf("%d segments; the test wants several", l.SegmentCount())
			}
			fs.arm(change)
			if err := l.Delete(); err != nil {
				t.Fatal(err)
			}
			img := fs.collect()
			if img == nil {
				img, last = fs.MemFS.CrashClone(fs.rng), true
			}
			RemoveDeletedDirsFS(img, "/logs")
			if _, err := img.Stat("/logs/topic-0"); err != nil {
				continue // deleted, or going: fine
			}
			cfg.FS = img
			l2, err := Open("/logs/topic-0", cfg, zerolog.Nop())
			if err != nil {
				t.Fatalf("crash at change %d of Delete: Open: %v", change, err)
			}
			n := len(readAll(t, l2, l2.StartOffset()))
			start, end := l2.StartOffset(), l2.EndOffset()
			l2.Close()
			if start != 0 || end != 36 || n != 12 {
				t.Fatalf("regression: a crash at change %d of Delete (image %d) left the log under its own name as [%d, %d) with %d batches, want [0, 36) with 12 or no log: the rename to %s was not durable before the files went",
					change, seed, start, end, n, DeletedSuffix)
			}
		}
		if last {
			return
		}
	}
}

// TestRestartInsideSegmentCrash: TruncateFullyAndStartAt at an offset
// inside a segment, crashed at each of its steps, never leaves that
// segment beside the new one: its batches at or past the new start would
// come back under the new segment's (TestCrashRecovery found reads and
// MaxTimestamp answering past the log end, and old batches served again
// once the log grew back past them).
func TestRestartInsideSegmentCrash(t *testing.T) {
	for change := 0; ; change++ {
		fs := newCrashFS(NewMemFS(), rand.New(rand.NewPCG(uint64(change), 2)))
		cfg := testConfig()
		cfg.FS = fs
		cfg.SegmentBytes = 1000
		l, err := Open("/logs/topic-0", cfg, zerolog.Nop())
		if err != nil {
			t.Fatal(err)
		}
		for i := range 12 {
			appendOpts(t, l, batchOpts{N: 3, ValueSize: 40, BaseTS: 1000 + int64(i)}, int64(i))
		}
		if err := l.Flush(); err != nil {
			t.Fatal(err)
		}
		const at = 20 // inside a segment, with a batch (18-20) straddling it
		if segs := l.segments(); !slices.ContainsFunc(segs, func(s *segment) bool { return s.base < at && s.next > at }) {
			t.Fatal("no segment holds offsets on both sides of the restart point")
		}
		fs.arm(change)
		if err := l.TruncateFullyAndStartAt(at); err != nil {
			t.Fatal(err)
		}
		img := fs.collect()
		last := img == nil
		if last {
			img = fs.MemFS.CrashClone(nil)
		}
		cfg.FS = img
		l2, err := Open("/logs/topic-0", cfg, zerolog.Nop())
		if err != nil {
			t.Fatalf("crash at change %d: Open: %v", change, err)
		}
		end := l2.EndOffset()
		if off, _, ok, _ := l2.MaxTimestamp(); ok && off >= end {
			t.Fatalf("regression: crash at change %d of TruncateFullyAndStartAt(%d): MaxTimestamp names offset %d, past the log end %d: a segment below the restart point kept batches past it", change, at, off, end)
		}
		segs := l2.segments()
		restarted := slices.ContainsFunc(segs, func(s *segment) bool { return s.base == at })
		for _, s := range segs {
			if restarted && s.base < at && s.next > at {
				t.Fatalf("regression: crash at change %d of TruncateFullyAndStartAt(%d): segment %d runs to %d, past the restart point, beside the new segment", change, at, s.base, s.next)
			}
		}
		l2.Close()
		if last {
			break
		}
	}

	// Restarting again where the log already starts, empty: the segment
	// there goes before its namesake is created, not after.
	fs := NewMemFS()
	cfg := testConfig()
	cfg.FS = fs
	l := openLog(t, "/logs/topic-0", cfg)
	for range 2 {
		if err := l.TruncateFullyAndStartAt(20); err != nil {
			t.Fatal(err)
		}
	}
	cfg.FS = fs.CrashClone(nil)
	if l2 := openLog(t, "/logs/topic-0", cfg); l2.StartOffset() != 20 || l2.EndOffset() != 20 {
		t.Fatalf("after restarting at 20 twice and a crash, the log is [%d, %d)", l2.StartOffset(), l2.EndOffset())
	}
}

// TestProcessCrashThenPowerCut: a process crash (kill -9) keeps the page
// cache, so a restarted log reads back writes the dead process never
// fsynced. Open counts its end as durable, and a replica counts its
// durable end toward the high watermark, so that end must really be on
// the disk: a power cut right after the restart may not take it away.
func TestProcessCrashThenPowerCut(t *testing.T) {
	// With preallocation the restart finds a zeroed tail and cuts it
	// (without a sync: the cut need not be durable); a file system without
	// fallocate leaves no tail to cut. Either way Open's own sync of the
	// recovered segment is what makes its end durable.
	for _, prealloc := range []bool{true, false} {
		mem := NewMemFS()
		var fs FS = mem
		if !prealloc {
			fs = NewErrorFS(mem, Fault{Op: OpAlloc, Err: syscall.EOPNOTSUPP})
		}
		cfg := testConfig()
		cfg.FS = fs
		cfg.SegmentBytes = 1000
		l := openLog(t, "/logs/topic-0", cfg)
		for i := range 12 {
			appendOpts(t, l, batchOpts{N: 3, ValueSize: 40, BaseTS: 1000 + int64(i)}, int64(i))
		}
		// No Flush and no Close: the process dies with the tail in the
		// page cache. The same file system (the page cache survives) is
		// opened again.
		l2 := openLog(t, "/logs/topic-0", cfg)
		durable := l2.DurableOffset()
		if durable != l2.EndOffset() || durable == 0 {
			t.Fatalf("prealloc %v: after the process crash: durable %d, end %d", prealloc, durable, l2.EndOffset())
		}
		cfg.FS = mem.CrashClone(nil) // and now the power goes
		l3 := openLog(t, "/logs/topic-0", cfg)
		if end := l3.EndOffset(); end < durable {
			t.Fatalf("prealloc %v: a power cut after the restart lost offsets [%d, %d) the restarted log counted as durable", prealloc, end, durable)
		}
	}
}
