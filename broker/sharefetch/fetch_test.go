package sharefetch

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordlog/fjord/group/sharepart"
)

var (
	a0 = tp{topicA, 0}
	a1 = tp{topicA, 1}
	b0 = tp{topicB, 0}
)

func keyOf(p tp) sharepart.Key { return sharepart.Key{Group: testGroup, TopicID: p.id, Partition: p.p} }

func wantAcquired(t *testing.T, got map[string]partAnswer, p tp, want string) {
	t.Helper()
	a, ok := got[name(p)]
	if !ok {
		t.Fatalf("%s not answered; answers %v", name(p), got)
	}
	if a.code != 0 || a.acquired != want {
		t.Fatalf("%s: code %d acquired %q, want 0 %q", name(p), a.code, a.acquired, want)
	}
}

// A member fetches, acknowledges and is done: the records are acquired
// once, the acknowledgement is durable, and nothing comes again.
func TestFetchAcknowledgeRoundTrip(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := newFakePersister()
		r := newRig(t, p, Config{}, nil)
		defer r.stop()
		log := r.h.replica(topicA, 0)
		log.produce(5, 1000)
		log.produce(5, 1000)

		resp := r.fetch(fetchReq("m1", 0, a0))
		if resp.ErrorCode != 0 || resp.AcquisitionLockTimeoutMillis != 30000 {
			t.Fatalf("fetch: code %d lock %d", resp.ErrorCode, resp.AcquisitionLockTimeoutMillis)
		}
		got := answers(t, resp)
		wantAcquired(t, got, a0, "0-9:1")
		if n := len(got[name(a0)].offsets); n != 10 {
			t.Fatalf("%d records sent, want 10", n)
		}
		// The acquisition was durable before the answer.
		if c := p.durable(t, keyOf(a0)).Batches(); len(c) != 1 || c[0].DeliveryCount != 1 {
			t.Fatalf("durable after fetch: %+v", c)
		}

		ack := r.ack(ackReq("m1", 1, a0, [3]int64{0, 9, int64(sharepart.AckAccept)}))
		if ack.ErrorCode != 0 || ackCodes(ack)[name(a0)] != 0 {
			t.Fatalf("ack: %d %v", ack.ErrorCode, ackCodes(ack))
		}
		if d := p.durable(t, keyOf(a0)); d.StartOffset() != 10 {
			t.Fatalf("durable start offset %d after accepting all, want 10", d.StartOffset())
		}

		// Nothing left: the long poll runs its MaxWaitMs, and an
		// incremental answer leaves out the partition without news.
		req := fetchReq("m1", 2)
		req.MaxWaitMillis = 500
		start := time.Now()
		resp = r.fetch(req)
		if waited := time.Since(start); waited != 500*time.Millisecond {
			t.Fatalf("waited %v, want 500ms", waited)
		}
		if got := answers(t, resp); resp.ErrorCode != 0 || len(got) != 0 {
			t.Fatalf("empty fetch: code %d answers %v", resp.ErrorCode, got)
		}
	})
}

// Piggybacked acknowledgements apply before the fetch acquires: a released
// record is delivered again in the same answer, with its count raised.
func TestPiggybackedAcksBeforeAcquire(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, newFakePersister(), Config{}, nil)
		defer r.stop()
		r.h.replica(topicA, 0).produce(4, 1000)
		wantAcquired(t, answers(t, r.fetch(fetchReq("m1", 0, a0))), a0, "0-3:1")

		req := withAcks(fetchReq("m1", 1), a0, [3]int64{0, 1, int64(sharepart.AckAccept)}, [3]int64{2, 3, int64(sharepart.AckRelease)})
		got := answers(t, r.fetch(req))
		wantAcquired(t, got, a0, "2-3:2")
		if got[name(a0)].ackCode != 0 {
			t.Fatalf("ack code %d", got[name(a0)].ackCode)
		}

		// Acknowledging records another member holds: INVALID_RECORD_STATE,
		// and nothing for m1 to acquire meanwhile.
		r.h.replica(topicA, 0).produce(2, 1000)
		wantAcquired(t, answers(t, r.fetch(fetchReq("m2", 0, a0))), a0, "4-5:1")
		req = withAcks(fetchReq("m1", 2), a0, [3]int64{4, 5, int64(sharepart.AckAccept)})
		req.MaxWaitMillis = 100
		got = answers(t, r.fetch(req))
		if a := got[name(a0)]; a.ackCode != kerr.InvalidRecordState.Code || a.acquired != "" {
			t.Fatalf("ack of another's records: %+v", a)
		}
	})
}

// A long poll wakes when the high watermark moves, and when records come
// back (lock expiry) to the share-partition it waits on.
func TestLongPollWakes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, newFakePersister(), Config{}, func(h *fakeHost) {
			h.gc.Partition.RecordLockDurationMs = 2000
		})
		defer r.stop()
		log := r.h.replica(topicA, 0)
		// Load it first: a share-partition loads on first use.
		req := fetchReq("m1", 0, a0)
		req.MaxWaitMillis = 100
		if got := answers(t, r.fetch(req)); got[name(a0)].acquired != "" {
			t.Fatalf("empty log delivered %+v", got)
		}

		go func() {
			time.Sleep(300 * time.Millisecond)
			log.produce(3, 1000)
		}()
		req = fetchReq("m1", 1)
		req.MaxWaitMillis = 5000
		start := time.Now()
		got := answers(t, r.fetch(req))
		wantAcquired(t, got, a0, "0-2:1")
		if waited := time.Since(start); waited != 300*time.Millisecond {
			t.Fatalf("woke after %v, want 300ms", waited)
		}

		// m2 waits; m1's locks expire after 2s, which wakes it.
		req = fetchReq("m2", 0, a0)
		req.MaxWaitMillis = 10000
		start = time.Now()
		got = answers(t, r.fetch(req))
		wantAcquired(t, got, a0, "0-2:2")
		if waited := time.Since(start); waited != 2000*time.Millisecond {
			t.Fatalf("redelivered after %v, want 2s", waited)
		}
	})
}

// MinBytes holds the answer until that many bytes can be read.
func TestMinBytes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, newFakePersister(), Config{}, nil)
		defer r.stop()
		log := r.h.replica(topicA, 0)
		log.produce(1, 1000)
		one := len(log.batches[0].bytes)
		go func() {
			time.Sleep(time.Second)
			log.produce(1, 1000)
		}()
		req := fetchReq("m1", 0, a0)
		req.MinBytes, req.MaxWaitMillis = int32(one+1), 5000
		start := time.Now()
		got := answers(t, r.fetch(req))
		wantAcquired(t, got, a0, "0-1:1")
		if waited := time.Since(start); waited != time.Second {
			t.Fatalf("answered after %v, want 1s", waited)
		}
	})
}

// MaxRecords bounds a whole request, partitions rotating by session epoch;
// BatchSize splits acquired ranges at log batches.
func TestMaxRecordsAndBatchSize(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, newFakePersister(), Config{}, nil)
		defer r.stop()
		for range 3 {
			r.h.replica(topicA, 0).produce(2, 1000)
			r.h.replica(topicA, 1).produce(2, 1000)
		}
		// Load both first: the answer comes as soon as one acquires.
		req := fetchReq("m1", 0, a0, a1)
		req.MaxRecords, req.MaxWaitMillis = 0, 100
		r.fetch(req)
		// Epoch 1 of 2 partitions: a1 comes first.
		req = fetchReq("m1", 1)
		req.MaxRecords, req.BatchSize = 8, 2
		got := answers(t, r.fetch(req))
		wantAcquired(t, got, a1, "0-1:1 2-3:1 4-5:1")
		wantAcquired(t, got, a0, "0-1:1")

		// Record-limit mode does not split.
		req = fetchReq("m2", 0, a0)
		req.MaxRecords, req.BatchSize, req.ShareAcquireMode = 10, 1, 1
		wantAcquired(t, answers(t, r.fetch(req)), a0, "2-5:1")
	})
}

// Control batches are gaps: archived, never acquired.
func TestControlBatchesAreGaps(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := newFakePersister()
		r := newRig(t, p, Config{}, nil)
		defer r.stop()
		log := r.h.replica(topicA, 0)
		log.produce(3, 1000)
		log.commitMarker()
		log.produce(2, 1000)
		got := answers(t, r.fetch(fetchReq("m1", 0, a0)))
		wantAcquired(t, got, a0, "0-2:1 4-5:1")
		r.ack(ackReq("m1", 1, a0, [3]int64{0, 2, 1}, [3]int64{4, 5, 1}))
		if d := p.durable(t, keyOf(a0)); d.StartOffset() != 6 {
			t.Fatalf("start offset %d, want 6 (the marker archived)", d.StartOffset())
		}
	})
}

// share.auto.offset.reset decides where a share-partition without state
// starts.
func TestAutoOffsetReset(t *testing.T) {
	for _, tc := range []struct {
		reset string
		want  string
	}{
		{"latest", "6-6:1"},
		{"earliest", "0-6:1"},
		{"by_duration:PT1S", "3-6:1"},
	} {
		t.Run(tc.reset, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ar, err := sharepart.ParseAutoOffsetReset(tc.reset)
				if err != nil {
					t.Fatal(err)
				}
				r := newRig(t, newFakePersister(), Config{}, func(h *fakeHost) { h.gc.AutoOffsetReset = ar })
				defer r.stop()
				now := time.Now().UnixMilli()
				log := r.h.replica(topicA, 0)
				log.produce(3, now-5000) // older than a second
				log.produce(3, now-500)
				req := fetchReq("m1", 0, a0)
				req.MaxWaitMillis, req.MaxRecords = 100, 0
				r.fetch(req) // loads it, acquiring nothing
				log.produce(1, now)
				req = fetchReq("m1", 1)
				req.MaxWaitMillis = 100
				wantAcquired(t, answers(t, r.fetch(req)), a0, tc.want)
			})
		})
	}
}

// A record that keeps failing is archived at the delivery limit, and the
// others of its batch are isolated from it.
func TestPoisonRecordArchived(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := newFakePersister()
		r := newRig(t, p, Config{}, func(h *fakeHost) { h.gc.Partition.DeliveryCountLimit = 3 })
		defer r.stop()
		r.h.replica(topicA, 0).produce(1, 1000)
		wantAcquired(t, answers(t, r.fetch(fetchReq("m1", 0, a0))), a0, "0-0:1")
		epoch := int32(1)
		for d := 2; d <= 3; d++ {
			req := withAcks(fetchReq("m1", epoch), a0, [3]int64{0, 0, int64(sharepart.AckRelease)})
			epoch++
			wantAcquired(t, answers(t, r.fetch(req)), a0, "0-0:"+string(rune('0'+d)))
		}
		// Released on its last delivery: archived, never delivered again.
		req := withAcks(fetchReq("m1", epoch), a0, [3]int64{0, 0, int64(sharepart.AckRelease)})
		req.MaxWaitMillis = 200
		got := answers(t, r.fetch(req))
		if a := got[name(a0)]; a.acquired != "" || a.ackCode != 0 {
			t.Fatalf("after the limit: %+v", a)
		}
		d := p.durable(t, keyOf(a0))
		if d.StartOffset() != 1 {
			t.Fatalf("start offset %d, want 1 (archived)", d.StartOffset())
		}
	})
}

// A fetch reads from the log start once retention passed the
// share-partition's start.
func TestLogStartMoves(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, newFakePersister(), Config{}, nil)
		defer r.stop()
		log := r.h.replica(topicA, 0)
		log.produce(3, 1000)
		log.produce(3, 1000)
		req := fetchReq("m1", 0, a0)
		req.MaxRecords = 1
		wantAcquired(t, answers(t, r.fetch(req)), a0, "0-0:1")
		log.deleteRecords(3)
		wantAcquired(t, answers(t, r.fetch(fetchReq("m1", 1))), a0, "3-5:1")
	})
}

// Errors known before waiting: unknown topic id, denied topic, unknown
// partition, not the leader (with the leader's hint).
func TestPartitionErrors(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, newFakePersister(), Config{}, func(h *fakeHost) {
			h.denied["b"] = true
			h.leaders[a1] = Leader{ID: 7, Epoch: 4, Host: "h7", Port: 9092}
		})
		defer r.stop()
		r.h.replica(topicA, 1).lead(false, 4)
		r.h.replica(topicA, 0).produce(1, 1000)
		unknown := tp{[16]byte{0xee}, 0}
		missing := tp{topicA, 9}
		resp := r.fetch(fetchReq("m1", 0, a0, a1, b0, unknown, missing))
		got := answers(t, resp)
		wantAcquired(t, got, a0, "0-0:1")
		for p, code := range map[tp]int16{
			a1: kerr.NotLeaderForPartition.Code, b0: kerr.TopicAuthorizationFailed.Code,
			unknown: kerr.UnknownTopicID.Code, missing: kerr.UnknownTopicOrPartition.Code,
		} {
			if got[name(p)].code != code {
				t.Errorf("%s: code %d, want %d", name(p), got[name(p)].code, code)
			}
		}
		if l := got[name(a1)].leader; l != [2]int32{7, 4} {
			t.Errorf("leader hint %v", l)
		}
		if got[name(b0)].leader != [2]int32{-1, -1} {
			t.Errorf("no hint is -1/-1, got %v", got[name(b0)].leader)
		}
		if len(resp.NodeEndpoints) != 1 || resp.NodeEndpoints[0].NodeID != 7 || resp.NodeEndpoints[0].Host != "h7" {
			t.Errorf("node endpoints %+v", resp.NodeEndpoints)
		}

		// Incremental: erroring partitions come back in every answer;
		// the quiet one does not.
		req := fetchReq("m1", 1)
		req.MaxWaitMillis = 10
		got = answers(t, r.fetch(req))
		if want := []string{"a/1", "b/0", "ee/0", "a/9"}; len(got) != 4 {
			t.Errorf("incremental answers %v, want %v", keys(got), want)
		}
	})
}

type fetchRequest = kmsg.ShareFetchRequest

// A request with bad identities or parameters is refused whole.
func TestRequestValidation(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, newFakePersister(), Config{}, nil)
		defer r.stop()
		for what, mut := range map[string]func(*fetchRequest){
			"no member":    func(q *fetchRequest) { q.MemberID = nil },
			"long member":  func(q *fetchRequest) { s := "0123456789012345678901234567890123456789"; q.MemberID = &s },
			"no group":     func(q *fetchRequest) { s := ""; q.GroupID = &s },
			"acquire mode": func(q *fetchRequest) { q.ShareAcquireMode = 2 },
			"renew with fetch params": func(q *fetchRequest) {
				q.IsRenewAck = true
			},
		} {
			req := fetchReq("m1", 0, a0)
			mut(req)
			if resp := r.fetch(req); resp.ErrorCode != kerr.InvalidRequest.Code || len(resp.Topics) != 0 {
				t.Errorf("%s: code %d topics %d", what, resp.ErrorCode, len(resp.Topics))
			}
		}
	})
}
