package replica

import (
	"context"
	"errors"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/fjordlog/fjord/protocol/lifecycle"
	"github.com/fjordlog/fjord/storage"
	"github.com/fjordlog/fjord/storage/recordbatch"
)

// The driver over a real log in a temporary directory, with a host that
// opens and deletes logs at once and records proposals: acks=all's
// purgatory (WaitCommitted) and min.insync.replicas after append, and
// requests that meet a replica that is not open, being deleted or gone.

type testHost struct {
	t     *testing.T
	dir   string
	mu    sync.Mutex
	props []Proposal
	ended bool
	fail  error // returned by the next open
}

func (h *testHost) Open(p *Partition) {
	go func() {
		h.mu.Lock()
		fail := h.fail
		h.mu.Unlock()
		if fail != nil {
			p.Opened(nil, fail)
			return
		}
		lg, err := storage.Open(h.dir, storage.DefaultConfig(), zerolog.Nop())
		if err != nil {
			h.t.Error(err)
		}
		p.Opened(lg, err)
	}()
}

func (h *testHost) Delete(p *Partition) {
	go func() {
		if lg := p.Log(); lg != nil {
			lg.Delete()
		}
		p.Step(LogDeleted{})
	}()
}

// Repair closes the failed log and opens the directory again, emptied
// first when the copy is set aside (the test keeps no set-aside copy).
func (h *testHost) Repair(p *Partition, r Repair) {
	if lg := p.Log(); lg != nil {
		if r.SetAside {
			lg.Delete()
		} else {
			lg.Close()
		}
	}
	h.Open(p)
}

func (h *testHost) Propose(_ *Partition, prop Proposal) {
	h.mu.Lock()
	h.props = append(h.props, prop)
	h.mu.Unlock()
}

func (h *testHost) Ended(*Partition) {
	h.mu.Lock()
	h.ended = true
	h.mu.Unlock()
}

func (h *testHost) Changed(*Partition) {}

func newTestPartition(t *testing.T, a Assignment, minISR int32, fail error) (*Partition, *testHost) {
	t.Helper()
	h := &testHost{t: t, dir: filepath.Join(t.TempDir(), "t-0"), fail: fail}
	p := NewPartition(PartitionConfig{Topic: "t", Logger: zerolog.Nop(),
		Settings: Settings{Storage: storage.DefaultConfig(), FlushMessages: 1, MinISR: minISR},
		Core: Config{ID: 1, SyncOnAck: true, LagMs: 10_000, OpenTimeoutMs: 10_000, AlterTimeoutMs: 10_000,
			Open: lifecycle.Backoff{Initial: time.Second, Max: time.Second}, OpenAttempts: 2, Alter: lifecycle.Backoff{Initial: 100 * time.Millisecond, Max: 100 * time.Millisecond}}}, h)
	p.Step(Assign{a})
	p.Start()
	<-p.OpenAnswered()
	t.Cleanup(func() {
		if lg := p.Log(); lg != nil {
			lg.Close()
		}
	})
	return p, h
}

// appendOne appends a one-record batch as the leader and fsyncs it; it
// returns the HW that commits it and the epoch it was written at.
func appendOne(t *testing.T, p *Partition) (int64, int32) {
	t.Helper()
	batch := recordbatch.Build([]recordbatch.KV{{Value: []byte("v")}}, time.Now().UnixMilli())
	info, err := recordbatch.Validate(batch, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	res, v, err := p.AppendAsLeader(batch, info, time.Now().UnixMilli())
	if err != nil {
		t.Fatalf("append: %v", err)
	}
	if err := p.Flush(); err != nil {
		t.Fatal(err)
	}
	return res.LastOffset + 1, v.LeaderEpoch
}

func rf3(isr ...int32) Assignment {
	return Assignment{Leader: 1, LeaderEpoch: 1, PartitionEpoch: 1, Replicas: []int32{1, 2, 3}, ISR: isr, Live: []int32{1, 2, 3}}
}

// waitResult runs WaitCommitted in the background.
func waitResult(p *Partition, target int64, epoch int32, expire <-chan time.Time) <-chan error {
	ch := make(chan error, 1)
	go func() { ch <- p.WaitCommitted(context.Background(), target, epoch, expire) }()
	return ch
}

// TestWaitCommittedWaitsForDurableEnds: a follower's fetch that reports
// a durable end below its fetch offset (pipelined replication) commits
// nothing past that end, however far it has fetched; its next report does.
func TestWaitCommittedWaitsForDurableEnds(t *testing.T) {
	p, _ := newTestPartition(t, rf3(1, 2, 3), 2, nil)
	before, _ := appendOne(t, p)
	p.FollowerFetched(2, p.View().LeaderEpoch, before, before, -1)
	p.FollowerFetched(3, p.View().LeaderEpoch, before, before, -1)
	target, epoch := appendOne(t, p)
	done := waitResult(p, target, epoch, nil)
	p.FollowerFetched(2, p.View().LeaderEpoch, target, target, -1)
	p.FollowerFetched(3, p.View().LeaderEpoch, target, before, -1) // appended, its fsync running
	select {
	case err := <-done:
		t.Fatalf("committed before follower 3's fsync ended: %v", err)
	case <-time.After(20 * time.Millisecond):
	}
	if p.HW() != before {
		t.Fatalf("hw %d, want %d", p.HW(), before)
	}
	p.FollowerFetched(3, p.View().LeaderEpoch, target, target, -1)
	if err := <-done; err != nil {
		t.Fatalf("acks=all once every ISR member reported it durable: %v", err)
	}
}

func TestWaitCommittedByTheISR(t *testing.T) {
	p, _ := newTestPartition(t, rf3(1, 2, 3), 2, nil)
	target, epoch := appendOne(t, p)
	done := waitResult(p, target, epoch, nil)
	p.FollowerFetched(2, p.View().LeaderEpoch, target, target, -1)
	select {
	case err := <-done:
		t.Fatalf("committed with one of two followers: %v", err)
	case <-time.After(20 * time.Millisecond):
	}
	p.FollowerFetched(3, p.View().LeaderEpoch, target, target, -1)
	if err := <-done; err != nil {
		t.Fatalf("acks=all with the whole ISR caught up: %v", err)
	}
	if p.HW() != target {
		t.Fatalf("hw %d, want %d", p.HW(), target)
	}
}

// The ISR shrinks below min.insync.replicas while a batch waits: it is
// committed by what is left, but the producer hears
// NOT_ENOUGH_REPLICAS_AFTER_APPEND.
func TestWaitCommittedBelowMinISRAfterAppend(t *testing.T) {
	p, _ := newTestPartition(t, rf3(1, 2), 2, nil)
	target, epoch := appendOne(t, p)
	done := waitResult(p, target, epoch, nil)
	a := rf3(1)
	a.PartitionEpoch = 2
	p.Step(Assign{a})
	if err := <-done; !errors.Is(err, ErrNotEnoughReplicasAfterAppend) {
		t.Fatalf("got %v, want ErrNotEnoughReplicasAfterAppend", err)
	}
}

// The purgatory's timeout, and a leadership that moves while waiting
// (the batch may be truncated away): both retriable, neither an ack.
func TestWaitCommittedTimeoutAndLeadershipMoved(t *testing.T) {
	p, _ := newTestPartition(t, rf3(1, 2, 3), 2, nil)
	target, epoch := appendOne(t, p)
	expire := make(chan time.Time)
	done := waitResult(p, target, epoch, expire)
	close(expire)
	if err := <-done; !errors.Is(err, ErrTimedOut) {
		t.Fatalf("got %v, want ErrTimedOut", err)
	}
	done = waitResult(p, target, epoch, nil)
	a := rf3(2, 3)
	a.Leader, a.LeaderEpoch, a.PartitionEpoch = 2, 2, 2
	p.Step(Assign{a})
	if err := <-done; !errors.Is(err, ErrNotLeader) {
		t.Fatalf("got %v, want ErrNotLeader", err)
	}
	if _, _, err := p.AppendAsLeader(nil, recordbatch.Info{}, 0); !errors.Is(err, CodeError(kerr.NotLeaderForPartition.Code)) {
		t.Fatalf("append as a follower: %v", err)
	}
}

// Deleted while a produce waits and a fetch is parked: both wake and get
// retriable answers; afterwards every request gets
// UNKNOWN_TOPIC_OR_PARTITION and never a nil log.
func TestDeletedWhileWaiting(t *testing.T) {
	p, h := newTestPartition(t, rf3(1, 2, 3), 2, nil)
	target, epoch := appendOne(t, p)
	done := waitResult(p, target, epoch, nil)
	parked := make(chan struct{}, 1)
	p.Watch(parked)
	p.Step(Unassign{TopicDeleted: true})
	if err := <-done; !errors.Is(err, ErrNotLeader) {
		t.Fatalf("got %v, want ErrNotLeader", err)
	}
	<-parked
	for deadline := time.Now().Add(5 * time.Second); p.View().Phase != Deleted; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("phase %v, want deleted", p.View().Phase)
		}
	}
	for _, op := range []Op{Produce, ConsumerRead, ReplicaRead, LocalRead} {
		if lg, _, code := p.Serve(op); code != kerr.UnknownTopicOrPartition.Code || lg != nil {
			t.Fatalf("op %d after deletion: code %d log %v", op, code, lg)
		}
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.ended {
		t.Fatal("host not told the replica ended")
	}
}

// A log that cannot open: KAFKA_STORAGE_ERROR, and no leadership resigned
// without another live ISR member to take it.
func TestOpenFailedServesStorageError(t *testing.T) {
	a := Assignment{Leader: 1, LeaderEpoch: 0, Replicas: []int32{1}, ISR: []int32{1}, Live: []int32{1}}
	p, h := newTestPartition(t, a, 1, errors.New("too many open files"))
	if lg, _, code := p.Serve(Produce); code != kerr.KafkaStorageError.Code || lg != nil {
		t.Fatalf("produce to an unopened log: code %d log %v", code, lg)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.props) != 0 {
		t.Fatalf("resigned to nobody: %+v", h.props)
	}
}

// forEachBounded runs every index exactly once, never more than
// parallelism at a time.
func TestForEachBounded(t *testing.T) {
	for _, n := range []int{0, 1, 2, parallelism, 5 * parallelism} {
		seen := make([]atomic.Int32, n)
		var running, peak atomic.Int32
		forEachBounded(n, func(i int) {
			r := running.Add(1)
			for p := peak.Load(); r > p && !peak.CompareAndSwap(p, r); p = peak.Load() {
			}
			time.Sleep(time.Millisecond)
			seen[i].Add(1)
			running.Add(-1)
		})
		for i := range seen {
			if c := seen[i].Load(); c != 1 {
				t.Fatalf("n=%d: index %d ran %d times", n, i, c)
			}
		}
		if p := peak.Load(); p > parallelism {
			t.Fatalf("n=%d: %d at once", n, p)
		}
	}
}

// WaitHW waits for the ISR, not for min.insync.replicas: a load of a
// coordinator's log starts once everything in it is committed, whatever
// the ISR's size, and gives up when leadership moves.
func TestWaitHW(t *testing.T) {
	p, _ := newTestPartition(t, rf3(1, 2, 3), 3, nil)
	target, epoch := appendOne(t, p)
	done := make(chan error, 1)
	go func() { done <- p.WaitHW(context.Background(), target, epoch) }()
	p.FollowerFetched(2, p.View().LeaderEpoch, target, target, -1)
	select {
	case err := <-done:
		t.Fatalf("high watermark reached with one of two followers: %v", err)
	case <-time.After(20 * time.Millisecond):
	}
	a := rf3(1, 2) // below min.insync.replicas 3: the HW is still the ISR's
	a.PartitionEpoch = 2
	p.Step(Assign{a})
	if err := <-done; err != nil {
		t.Fatalf("the ISR caught up: %v", err)
	}
	next, epoch := appendOne(t, p)
	go func() { done <- p.WaitHW(context.Background(), next, epoch) }()
	a = rf3(2, 3)
	a.Leader, a.LeaderEpoch, a.PartitionEpoch = 2, 2, 3
	p.Step(Assign{a})
	if err := <-done; !errors.Is(err, ErrNotLeader) {
		t.Fatalf("leadership moved: %v, want ErrNotLeader", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := p.WaitHW(ctx, next+1, 2); err == nil {
		t.Fatal("a follower waited for the high watermark as a leader")
	}
}

// TestStaleFlushedAfterTruncation: a Flushed read before a truncation and
// stepped after it (a pipelining follower's flush round runs beside its
// fetcher, which may truncate and append meanwhile) must not count the
// new, unfsynced records at the same offsets as durable: the high
// watermark would then pass this replica's real durable end.
func TestStaleFlushedAfterTruncation(t *testing.T) {
	p, _ := newTestPartition(t, rf3(1), 1, nil)
	appendOne(t, p)
	stale, _ := appendOne(t, p) // durable 2, as a flush round read it
	lg := p.Log()
	if err := lg.Truncate(1); err != nil {
		t.Fatal(err)
	}
	p.Step(Truncated{Start: lg.StartOffset(), End: lg.EndOffset()})
	batch := recordbatch.Build([]recordbatch.KV{{Value: []byte("w")}}, time.Now().UnixMilli())
	info, err := recordbatch.Validate(batch, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := p.AppendAsLeader(batch, info, time.Now().UnixMilli()); err != nil {
		t.Fatal(err)
	}
	if d := lg.DurableOffset(); d != 1 || lg.EndOffset() != stale {
		t.Fatalf("durable %d end %d: want 1 and %d", d, lg.EndOffset(), stale)
	}
	p.Step(Flushed{Durable: stale})
	if hw := p.HW(); hw != 1 {
		t.Fatalf("hw %d after a stale Flushed{%d}: want 1 (the fsynced end)", hw, stale)
	}
}

// TestCommittedSnapshotsViewAndHW: an ISR shrinking below
// min.insync.replicas moves the high watermark to the leader's own
// durable end; a waiter that read the view from before the shrink and the
// high watermark from after it acknowledged a record only the leader
// held. committed spins beside the shrink, many times, and must always
// refuse.
func TestCommittedSnapshotsViewAndHW(t *testing.T) {
	for i := 0; i < 100; i++ {
		p, _ := newTestPartition(t, rf3(1, 2), 2, nil)
		target, epoch := appendOne(t, p)
		start, res := make(chan struct{}), make(chan error, 1)
		go func() {
			close(start)
			for {
				if done, err := p.committed(target, epoch); done {
					res <- err
					return
				}
			}
		}()
		<-start
		a := rf3(1)
		a.PartitionEpoch = 2
		p.Step(Assign{a})
		if err := <-res; !errors.Is(err, ErrNotEnoughReplicasAfterAppend) {
			t.Fatalf("round %d: got %v, want ErrNotEnoughReplicasAfterAppend", i, err)
		}
		p.Log().Close()
	}
}

// TestViewEpochStart: a leader's view carries the log end its epoch began
// at, which its high watermark has not reached while the in-sync
// followers have not fetched in the new epoch (ListOffsets answers
// OFFSET_NOT_AVAILABLE meanwhile, as Kafka).
func TestViewEpochStart(t *testing.T) {
	p, _ := newTestPartition(t, rf3(1, 2, 3), 2, nil)
	if v := p.View(); v.EpochStart != 0 {
		t.Fatalf("epoch 1 began at %d, want 0", v.EpochStart)
	}
	appendOne(t, p)
	a := rf3(1, 2, 3)
	a.LeaderEpoch, a.PartitionEpoch = 2, 2
	p.Step(Assign{a})
	v, hw := p.viewAndHW()
	if v.Phase != Leading || v.EpochStart != 1 || hw >= v.EpochStart {
		t.Fatalf("epoch 2: phase %v, began at %d, hw %d; want leading from 1 with the hw below", v.Phase, v.EpochStart, hw)
	}
	p.FollowerFetched(2, 2, 1, 1, -1)
	p.FollowerFetched(3, 2, 1, 1, -1)
	if v, hw := p.viewAndHW(); hw < v.EpochStart {
		t.Fatalf("after the followers fetched at epoch 2: hw %d below the epoch's start %d", hw, v.EpochStart)
	}
}
