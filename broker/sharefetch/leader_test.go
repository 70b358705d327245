package sharefetch

import (
	"context"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/fjordlog/fjord/broker/sharestate"
	"github.com/fjordlog/fjord/group/sharepart"
)

// This node stops leading: fetches and acknowledgements answer
// NOT_LEADER_OR_FOLLOWER with the new leader; leading again at a newer
// epoch, the share-partition reloads and redelivers what was not done,
// its delivery counts intact.
func TestLeadershipLoss(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := newFakePersister()
		r := newRig(t, p, Config{}, func(h *fakeHost) { h.leaders[a0] = Leader{ID: 2, Epoch: 2, Host: "n2", Port: 9092} })
		defer r.stop()
		log := r.h.replica(topicA, 0)
		log.produce(3, 1000)
		wantAcquired(t, answers(t, r.fetch(fetchReq("m1", 0, a0))), a0, "0-2:1")

		log.lead(false, 1)
		start := time.Now()
		resp := r.fetch(fetchReq("m1", 1))
		if time.Since(start) != 0 {
			t.Fatalf("a fetch with nothing it can serve waited %v", time.Since(start))
		}
		if a := answers(t, resp)[name(a0)]; a.code != kerr.NotLeaderForPartition.Code || a.leader != [2]int32{2, 2} {
			t.Fatalf("fetch after losing leadership: %+v", a)
		}
		if len(resp.NodeEndpoints) != 1 || resp.NodeEndpoints[0].Host != "n2" {
			t.Fatalf("endpoints %+v", resp.NodeEndpoints)
		}
		ack := r.ack(ackReq("m1", 2, a0, [3]int64{0, 2, 1}))
		rp := ack.Topics[0].Partitions[0]
		if rp.ErrorCode != kerr.NotLeaderForPartition.Code || rp.CurrentLeader.LeaderID != 2 || len(ack.NodeEndpoints) != 1 {
			t.Fatalf("ack after losing leadership: %+v %+v", rp, ack.NodeEndpoints)
		}
		if s := r.m.Stats(); s.SharePartitions != 0 {
			t.Fatalf("the share-partition stayed loaded: %+v", s)
		}

		log.lead(true, 3)
		wantAcquired(t, answers(t, r.fetch(fetchReq("m2", 0, a0))), a0, "0-2:2")
		// A new epoch while leading: reloaded, m2's locks gone.
		log.lead(true, 4)
		wantAcquired(t, answers(t, r.fetch(fetchReq("m3", 0, a0))), a0, "0-2:3")
	})
}

// The broker tells of a leadership change (Unload), and the expiry loop
// notices one by itself: a stale leader writes nothing more.
func TestUnloadAndStaleExpiry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := newFakePersister()
		r := newRig(t, p, Config{}, func(h *fakeHost) { h.gc.Partition.RecordLockDurationMs = 1000 })
		defer r.stop()
		r.h.replica(topicA, 0).produce(1, 1000)
		r.h.replica(topicA, 1).produce(1, 1000)
		req := fetchReq("m1", 0, a0, a1)
		req.MaxWaitMillis = 0
		r.fetch(req) // loads both
		synctest.Wait()
		got := answers(t, r.fetch(fetchReq("m1", 1)))
		if got[name(a0)].acquired == "" && got[name(a1)].acquired == "" {
			t.Fatalf("nothing acquired: %+v", got)
		}
		r.m.Unload(topicA, 0)
		if s := r.m.Stats(); s.SharePartitions != 1 {
			t.Fatalf("after Unload: %+v", s)
		}
		r.h.replica(topicA, 1).lead(false, 1)
		p.mu.Lock()
		writes := p.writes
		p.mu.Unlock()
		time.Sleep(2 * time.Second) // past the locks
		synctest.Wait()
		if s := r.m.Stats(); s.SharePartitions != 0 {
			t.Fatalf("expiry kept a partition not led any more: %+v", s)
		}
		p.mu.Lock()
		defer p.mu.Unlock()
		if p.writes != writes {
			t.Fatalf("%d writes after leadership went", p.writes-writes)
		}
	})
}

// A newer leader read the state: this one's next write is fenced, the
// share-partition dropped, and loading it again at the old epoch is
// fenced too.
func TestFencedWrite(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := newFakePersister()
		r := newRig(t, p, Config{}, nil)
		defer r.stop()
		r.h.replica(topicA, 0).produce(3, 1000)
		wantAcquired(t, answers(t, r.fetch(fetchReq("m1", 0, a0))), a0, "0-2:1")

		if _, err := p.Read(context.Background(), keyOf(a0), 2); err != nil {
			t.Fatal(err)
		}
		ack := r.ack(ackReq("m1", 1, a0, [3]int64{0, 2, 1}))
		if c := ackCodes(ack)[name(a0)]; c != kerr.NotLeaderForPartition.Code {
			t.Fatalf("fenced ack answered %d", c)
		}
		if s := r.m.Stats(); s.SharePartitions != 0 {
			t.Fatalf("fenced share-partition still loaded: %+v", s)
		}
		got := answers(t, r.fetch(fetchReq("m1", 2)))
		if a := got[name(a0)]; a.code != kerr.NotLeaderForPartition.Code {
			t.Fatalf("reload at a fenced epoch: %+v", a)
		}
	})
}

// A write that fails unloads the share-partition: what it changed is
// forgotten, and the next fetch restores what was written.
func TestWriteFailure(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := newFakePersister()
		r := newRig(t, p, Config{}, nil)
		defer r.stop()
		log := r.h.replica(topicA, 0)
		log.produce(3, 1000)
		wantAcquired(t, answers(t, r.fetch(fetchReq("m1", 0, a0))), a0, "0-2:1")

		p.mu.Lock()
		p.failWrite = sharestate.ErrNotAvailable
		p.mu.Unlock()
		ack := r.ack(ackReq("m1", 1, a0, [3]int64{0, 2, int64(sharepart.AckAccept)}))
		if c := ackCodes(ack)[name(a0)]; c != kerr.CoordinatorNotAvailable.Code {
			t.Fatalf("ack with a failed write answered %d", c)
		}
		// The accept was not durable: the records come again.
		wantAcquired(t, answers(t, r.fetch(fetchReq("m2", 0, a0))), a0, "0-2:2")

		// A failed acquisition answers the error, not the records.
		log.produce(2, 1000)
		p.mu.Lock()
		p.failWrite = sharestate.ErrNotAvailable
		p.mu.Unlock()
		got := answers(t, r.fetch(fetchReq("m3", 0, a0)))
		if a := got[name(a0)]; a.code != kerr.CoordinatorNotAvailable.Code || a.acquired != "" || len(a.offsets) != 0 {
			t.Fatalf("failed acquisition: %+v", a)
		}
		// A failed load is retried by the next fetch.
		p.mu.Lock()
		p.failRead = sharestate.ErrNotAvailable
		p.mu.Unlock()
		got = answers(t, r.fetch(fetchReq("m3", 0, a0)))
		if a := got[name(a0)]; a.code != kerr.CoordinatorNotAvailable.Code {
			t.Fatalf("failed load: %+v", a)
		}
		wantAcquired(t, answers(t, r.fetch(fetchReq("m3", 0, a0))), a0, "0-2:3 3-4:1")
	})
}

// A restart (a new Manager on the same share coordinator) redelivers only
// what was not acknowledged, counting the earlier delivery.
func TestRestartRedeliversUnacknowledged(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := newFakePersister()
		r := newRig(t, p, Config{}, nil)
		r.h.replica(topicA, 0).produce(10, 1000)
		wantAcquired(t, answers(t, r.fetch(fetchReq("m1", 0, a0))), a0, "0-9:1")
		ack := r.ack(ackReq("m1", 1, a0, [3]int64{0, 4, int64(sharepart.AckAccept)}, [3]int64{7, 7, int64(sharepart.AckReject)}))
		if ackCodes(ack)[name(a0)] != 0 {
			t.Fatalf("ack: %v", ackCodes(ack))
		}
		r.stop()

		r = startRig(t, r.h, Config{})
		defer r.stop()
		got := answers(t, r.fetch(fetchReq("m1", 0, a0)))
		wantAcquired(t, got, a0, "5-6:2 8-9:2")
	})
}

// Writes reach the Persister in step order, one at a time per
// share-partition, the steps queued meanwhile together; each answer waits
// for its own.
func TestWritesInStepOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := newFakePersister()
		r := newRig(t, p, Config{}, nil)
		defer r.stop()
		log := r.h.replica(topicA, 0)
		log.produce(1, 1000)
		wantAcquired(t, answers(t, r.fetch(fetchReq("m0", 0, a0))), a0, "0-0:1")
		log.produce(1, 1000)
		log.produce(1, 1000)
		log.produce(1, 1000)

		gate := make(chan struct{})
		p.mu.Lock()
		p.gate = gate
		before := len(p.recs[keyOf(a0)])
		p.mu.Unlock()
		answered := make(chan string, 3)
		for _, m := range []string{"m1", "m2", "m3"} {
			go func() {
				req := fetchReq(m, 0, a0)
				req.MaxRecords = 1
				got := answers(t, r.fetch(req))
				answered <- m + ":" + got[name(a0)].acquired
			}()
			synctest.Wait() // m's step is queued (or writing) before the next
		}
		if len(answered) != 0 {
			t.Fatalf("answered before its write: %s", <-answered)
		}
		gate <- struct{}{} // m1's write
		synctest.Wait()
		if a := <-answered; a != "m1:1-1:1" || len(answered) != 0 {
			t.Fatalf("first answer %q (%d more)", a, len(answered))
		}
		gate <- struct{}{} // m2's and m3's, together
		synctest.Wait()
		if len(answered) != 2 {
			t.Fatalf("%d answers after the group write", len(answered))
		}
		p.mu.Lock()
		p.gate = nil
		recs := p.recs[keyOf(a0)][before:]
		p.mu.Unlock()
		if len(recs) != 3 {
			t.Fatalf("%d records written, want 3", len(recs))
		}
		for i, rec := range recs {
			d, err := sharepart.DecodeRecord(rec)
			if err != nil || d.Update == nil || len(d.Update.StateBatches) != 1 || d.Update.StateBatches[0].FirstOffset != int64(i+1) {
				t.Fatalf("record %d: %+v %v, want the acquisition of offset %d", i, d.Update, err, i+1)
			}
		}
	})
}

// The cap on loaded share-partitions unloads the least recently used idle
// one, and refuses a load when none is idle.
func TestPartitionCap(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, newFakePersister(), Config{MaxPartitions: 1}, nil)
		defer r.stop()
		r.h.replica(topicA, 0).produce(1, 1000)
		wantAcquired(t, answers(t, r.fetch(fetchReq("m1", 0, a0))), a0, "0-0:1")
		// a0 holds a lock: b0 cannot load.
		got := answers(t, r.fetch(fetchReq("m2", 0, b0)))
		if a := got[name(b0)]; a.code != kerr.LeaderNotAvailable.Code {
			t.Fatalf("load over the cap: %+v", a)
		}
		r.ack(ackReq("m1", 1, a0, [3]int64{0, 0, 1}))
		// The ack is answered once durable; a0's writer marks it idle
		// just after (sp.mu.writing), on its own goroutine: a load in
		// between is refused, retriably. Let it finish first.
		synctest.Wait()
		req := fetchReq("m2", 0, b0)
		req.MaxWaitMillis = 10
		if a := answers(t, r.fetch(req))[name(b0)]; a.code != 0 {
			t.Fatalf("load once a0 is idle: %+v", a)
		}
		if s := r.m.Stats(); s.SharePartitions != 1 {
			t.Fatalf("stats %+v", s)
		}
	})
}

// The broker's hooks: ReleaseMember (the group coordinator fenced the
// member) and UnloadGroup (its offsets were reset).
func TestReleaseMemberAndUnloadGroup(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := newFakePersister()
		r := newRig(t, p, Config{}, nil)
		defer r.stop()
		r.h.replica(topicA, 0).produce(3, 1000)
		wantAcquired(t, answers(t, r.fetch(fetchReq("m1", 0, a0))), a0, "0-2:1")
		r.m.ReleaseMember(testGroup, "m1")
		if c := r.fetch(fetchReq("m1", 1)).ErrorCode; c != kerr.ShareSessionNotFound.Code {
			t.Fatalf("released member's session answered %d", c)
		}
		wantAcquired(t, answers(t, r.fetch(fetchReq("m2", 0, a0))), a0, "0-2:2")
		r.ack(ackReq("m2", 1, a0, [3]int64{0, 2, int64(sharepart.AckAccept)}))

		// The coordinator resets the start offset (what
		// AlterShareGroupOffsets does) and the leader unloads.
		p.mu.Lock()
		stored := slices.Clone(p.recs[keyOf(a0)])
		p.mu.Unlock()
		reset, _, err := sharepart.Restore(keyOf(a0), sharepart.DefaultConfig(), 1, 0, stored)
		if err != nil {
			t.Fatal(err)
		}
		recs, err := reset.ResetStartOffset(0, 1)
		if err != nil {
			t.Fatal(err)
		}
		if err := p.Write(context.Background(), keyOf(a0), 1, reset.StateEpoch(), recs); err != nil {
			t.Fatal(err)
		}
		r.m.UnloadGroup(testGroup)
		if s := r.m.Stats(); s.SharePartitions != 0 {
			t.Fatalf("after UnloadGroup: %+v", s)
		}
		wantAcquired(t, answers(t, r.fetch(fetchReq("m2", 2))), a0, "1-2:1")
	})
}

// AlterShareGroupOffsets without a start offset leaves the state
// initialized at a new state epoch with none (start offset -1): the leader
// starts it at share.auto.offset.reset, at that state epoch, the only one
// the share coordinator accepts a write at.
func TestLoadInitializedWithoutOffset(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := newFakePersister()
		k := keyOf(a0)
		p.recs[k] = []sharepart.Record{sharepart.EncodeSnapshot(k, &sharepart.SnapshotValue{
			SnapshotEpoch: 2, StateEpoch: 3, StartOffset: -1, DeliveryCompleteCount: -1})}
		r := newRig(t, p, Config{}, nil)
		defer r.stop()
		r.h.replica(topicA, 0).produce(3, 1000)
		wantAcquired(t, answers(t, r.fetch(fetchReq("m1", 0, a0))), a0, "0-2:1")
		if got := p.durable(t, k); got.StateEpoch() != 3 || got.StartOffset() != 0 {
			t.Fatalf("loaded at state epoch %d, start offset %d; want 3, 0", got.StateEpoch(), got.StartOffset())
		}
	})
}
