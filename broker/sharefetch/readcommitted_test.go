package sharefetch

import (
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/fjordlog/fjord/group/sharepart"
)

// readCommitted sets the rig's group to share.isolation.level=read_committed.
func readCommitted(h *fakeHost) { h.gc.Isolation = ReadCommitted }

// interleaved writes, on one partition: plain records, two transactions
// interleaved with each other and with plain records, one aborted and one
// committed, then plain records again.
//
//	0-1 plain | 2-4 txn p1 | 5-6 txn p2 | 7 plain | 8-9 txn p1 |
//	10 abort p1 | 11 commit p2 | 12-13 plain
func interleaved(log *fakeReplica) {
	log.produce(2, 1000)
	log.txnBatch(1, 3)
	log.txnBatch(2, 2)
	log.produce(1, 1000)
	log.txnBatch(1, 2)
	log.endTxn(1, false)
	log.endTxn(2, true)
	log.produce(2, 1000)
}

// Under read_committed the aborted transaction's records are archived,
// never acquired, and the start offset moves past them once the rest is
// acknowledged; under read_uncommitted every data record is delivered.
func TestReadCommittedArchivesAborted(t *testing.T) {
	for _, tc := range []struct {
		iso  Isolation
		want string
	}{
		{ReadCommitted, "0-1:1 5-7:1 12-13:1"},
		{ReadUncommitted, "0-9:1 12-13:1"},
	} {
		t.Run(fmt.Sprint(tc.iso), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				p := newFakePersister()
				r := newRig(t, p, Config{}, func(h *fakeHost) { h.gc.Isolation = tc.iso })
				defer r.stop()
				interleaved(r.h.replica(topicA, 0))
				got := answers(t, r.fetch(fetchReq("m1", 0, a0)))
				wantAcquired(t, got, a0, tc.want)

				var acks [][3]int64
				for _, rg := range parseAcquired(t, tc.want) {
					acks = append(acks, [3]int64{rg[0], rg[1], int64(sharepart.AckAccept)})
				}
				ack := r.ack(ackReq("m1", 1, a0, acks...))
				if ack.ErrorCode != 0 || ackCodes(ack)[name(a0)] != 0 {
					t.Fatalf("ack: %d %v", ack.ErrorCode, ackCodes(ack))
				}
				// The markers (and, read_committed, 2-4 and 8-9) were
				// archived: nothing holds the start offset back.
				if d := p.durable(t, keyOf(a0)); d.StartOffset() != 14 {
					t.Fatalf("durable start offset %d, want 14", d.StartOffset())
				}
			})
		})
	}
}

// parseAcquired reads "first-last:count ..." back into ranges.
func parseAcquired(t *testing.T, s string) [][2]int64 {
	t.Helper()
	var out [][2]int64
	for len(s) > 0 {
		var a, b, c int64
		n, err := fmt.Sscanf(s, "%d-%d:%d", &a, &b, &c)
		if err != nil || n != 3 {
			t.Fatalf("parse %q: %v", s, err)
		}
		out = append(out, [2]int64{a, b})
		i := 0
		for i < len(s) && s[i] != ' ' {
			i++
		}
		s = s[min(i+1, len(s)):]
	}
	return out
}

// Nothing at or past an open transaction is acquired under read_committed
// (the last stable offset bounds the read), not even plain records written
// after it; a waiting fetch wakes when the transaction commits.
func TestReadCommittedStopsAtOpenTransaction(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, newFakePersister(), Config{}, readCommitted)
		defer r.stop()
		log := r.h.replica(topicA, 0)
		log.produce(2, 1000) // 0-1
		log.txnBatch(1, 2)   // 2-3, open
		log.produce(2, 1000) // 4-5
		wantAcquired(t, answers(t, r.fetch(fetchReq("m1", 0, a0))), a0, "0-1:1")

		req := fetchReq("m1", 1)
		req.MaxWaitMillis = 200
		if got := answers(t, r.fetch(req)); len(got) != 0 {
			t.Fatalf("fetched past the open transaction: %+v", got)
		}

		go func() {
			time.Sleep(300 * time.Millisecond)
			log.endTxn(1, true) // 6
		}()
		req = fetchReq("m1", 2)
		req.MaxWaitMillis = 5000
		start := time.Now()
		wantAcquired(t, answers(t, r.fetch(req)), a0, "2-5:1")
		if waited := time.Since(start); waited != 300*time.Millisecond {
			t.Fatalf("woke after %v, want 300ms (at the commit)", waited)
		}
	})
}

// The last stable offset also waits for the marker to be replicated: a
// marker above the high watermark keeps its transaction unstable.
func TestReadCommittedWaitsForReplicatedMarker(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, newFakePersister(), Config{}, readCommitted)
		defer r.stop()
		log := r.h.replica(topicA, 0)
		log.txnBatch(1, 2) // 0-1
		log.mu.Lock()
		log.holdHW = true
		log.mu.Unlock()
		log.endTxn(1, true)  // 2, not replicated
		log.produce(1, 1000) // 3
		req := fetchReq("m1", 0, a0)
		req.MaxWaitMillis = 200
		if got := answers(t, r.fetch(req)); got[name(a0)].acquired != "" {
			t.Fatalf("acquired before the marker was replicated: %+v", got)
		}
		log.setHW(-1)
		req = fetchReq("m1", 1)
		wantAcquired(t, answers(t, r.fetch(req)), a0, "0-1:1 3-3:1")
	})
}

// A stretch of aborted transactions longer than one read is crossed in
// one request, read after read, without waiting out MaxWaitMs.
func TestReadCommittedCrossesLongAbortedStretch(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, newFakePersister(), Config{}, readCommitted)
		defer r.stop()
		log := r.h.replica(topicA, 0)
		// maxRereads/2 transactions: a batch and a marker each.
		for i := range maxRereads / 2 {
			log.txnBatch(int64(i+1), 1)
			log.endTxn(int64(i+1), false)
		}
		end := log.produce(1, 1000)
		req := fetchReq("m1", 0, a0)
		req.MaxBytes = 1 // one batch a read
		start := time.Now()
		wantAcquired(t, answers(t, r.fetch(req)), a0, fmt.Sprintf("%d-%d:1", end, end))
		if waited := time.Since(start); waited != 0 {
			t.Fatalf("answered after %v, want at once", waited)
		}
	})
}

// share.isolation.level is read for every ShareFetch, not when the
// share-partition loads: a change applies to the next fetch.
func TestIsolationReadPerFetch(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := newFakePersister()
		r := newRig(t, p, Config{}, nil)
		defer r.stop()
		log := r.h.replica(topicA, 0)
		log.produce(2, 1000) // 0-1
		log.txnBatch(1, 2)   // 2-3
		log.endTxn(1, false) // 4
		log.produce(1, 1000) // 5
		req := fetchReq("m1", 0, a0)
		req.MaxRecords = 2
		wantAcquired(t, answers(t, r.fetch(req)), a0, "0-1:1")

		r.h.mu.Lock()
		r.h.gc.Isolation = ReadCommitted
		r.h.mu.Unlock()
		req = withAcks(fetchReq("m1", 1), a0, [3]int64{0, 1, int64(sharepart.AckAccept)})
		wantAcquired(t, answers(t, r.fetch(req)), a0, "5-5:1")
		r.ack(ackReq("m1", 2, a0, [3]int64{5, 5, int64(sharepart.AckAccept)}))
		if d := p.durable(t, keyOf(a0)); d.StartOffset() != 6 {
			t.Fatalf("durable start offset %d, want 6", d.StartOffset())
		}
	})
}

// markAborted applies the read_committed rule to batch headers.
func TestMarkAborted(t *testing.T) {
	spans := []batchSpan{
		{base: 0, last: 1},                                   // plain
		{base: 2, last: 3, txn: true, pid: 1},                // p1's aborted transaction
		{base: 4, last: 4, txn: true, pid: 2},                // p2, committed
		{base: 5, last: 6, txn: true, pid: 1},                // p1 still
		{base: 7, last: 7, pid: 1},                           // p1 idempotent, not transactional
		{base: 8, last: 8, txn: true, pid: 1, control: true}, // p1's abort marker
		{base: 9, last: 9, txn: true, pid: 1},                // p1's next transaction
		{base: 10, last: 10, txn: true, pid: 3},              // p3, aborted later
		{base: 11, last: 11, txn: true, pid: 3, control: true},
	}
	aborted := []AbortedTxn{{ProducerID: 1, FirstOffset: 2, LastOffset: 8}, {ProducerID: 3, FirstOffset: 10, LastOffset: 11}}
	markAborted(spans, aborted)
	var got []int64
	for _, s := range spans {
		if s.aborted {
			got = append(got, s.base)
		}
	}
	if want := []int64{2, 5, 10}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("aborted batches at %v, want %v", got, want)
	}
}
