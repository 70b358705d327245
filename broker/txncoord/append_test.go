package txncoord

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordlog/fjord/broker/replica"
	"github.com/fjordlog/fjord/broker/txn"
)

// Appends: every state change is a record in the id's partition, and its
// answer goes out only once the record is committed (on every in-sync
// replica), never at the append; the markers of an end go out only once
// its Prepare* record is committed.
func TestAnsweredOnlyOnceCommitted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, rigConfig{rf: 3})
		r.host.setLeader("t", 0, 2)

		// commitBy has node 2, then node 3 fetch the record in flight:
		// rp is answered only after the second.
		commitBy := func(rp *replies) txn.Answer {
			t.Helper()
			p := r.parts[0]
			synctest.Wait()
			rp.none(t)
			if hw, end := p.HW(), p.Log().EndOffset(); hw != end-1 {
				t.Fatalf("hw %d, log end %d: want the record appended and not committed", hw, end)
			}
			p.FollowerFetched(2, p.View().LeaderEpoch, p.Log().EndOffset(), p.Log().EndOffset(), -1)
			synctest.Wait()
			rp.none(t)
			p.FollowerFetched(3, p.View().LeaderEpoch, p.Log().EndOffset(), p.Log().EndOffset(), -1)
			synctest.Wait()
			return rp.one(t)
		}

		init := r.init("a")
		a := commitBy(init)
		if a.Code != 0 || a.ProducerID != 1000 || a.ProducerEpoch != 0 {
			t.Fatalf("init: %s pid %d epoch %d", codeName(a.Code), a.ProducerID, a.ProducerEpoch)
		}
		add := r.add("a", 1000, 0, tp("t", 0))
		if a := commitBy(add); a.Code != 0 || len(a.Partitions) != 1 || a.Partitions[0].Code != 0 {
			t.Fatalf("add: %+v", a)
		}
		end := r.end("a", 1000, 0, true)
		synctest.Wait()
		if n := len(r.host.markerCalls()); n != 0 {
			t.Fatalf("%d marker requests before PrepareCommit is committed", n)
		}
		if a := commitBy(end); a.Code != 0 {
			t.Fatalf("end: %s", codeName(a.Code))
		}
		r.settle()
		if n := len(r.host.markerCalls()); n != 1 {
			t.Fatalf("%d marker requests, want 1", n)
		}
		var got []string
		for _, rc := range r.records(0) {
			got = append(got, fmt.Sprintf("%d %s %s %d/%d %v", rc.offset, rc.id, rc.state, rc.pid, rc.epoch, rc.parts))
		}
		want := []string{"0 a Empty 1000/0 []", "1 a Ongoing 1000/0 [t-0]", "2 a PrepareCommit 1000/0 [t-0]", "3 a CompleteCommit 1000/0 []"}
		if !slices.Equal(got, want) {
			t.Fatalf("records\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
		if s := r.state("a"); s != "CompleteCommit" {
			t.Fatalf("state %s", s)
		}
	})
}

// An append that fails is answered once, with the retriable code Kafka
// maps the append's error to, and leaves the id as it was: the request
// succeeds when the client tries again.
func TestAppendFails(t *testing.T) {
	for _, tt := range []struct {
		name string
		rc   rigConfig
		// fail makes the next append fail and returns a function that
		// heals the partition (nil: the test stops after the failure).
		fail func(r *rig) (heal func())
		// waits is how long the failure takes to show.
		waits time.Duration
		want  int16
	}{{
		// The ISR shrank below min.insync.replicas: the record is
		// appended, but not enough replicas hold it.
		name: "not enough replicas after append",
		rc:   rigConfig{rf: 3, minISR: 2},
		fail: func(r *rig) func() {
			a := r.assignment(1, 1)
			a.ISR, a.PartitionEpoch = []int32{1}, 2
			r.parts[0].Step(replica.Assign{Assignment: a})
			return func() {
				a := r.assignment(1, 1)
				a.PartitionEpoch = 3
				r.parts[0].Step(replica.Assign{Assignment: a})
			}
		},
		want: kerr.CoordinatorNotAvailable.Code,
	}, {
		// The followers never fetch: the record times out after
		// recordTimeout.
		name:  "replicas too slow",
		rc:    rigConfig{rf: 3},
		fail:  func(*rig) func() { return nil },
		waits: recordTimeout,
		want:  kerr.CoordinatorNotAvailable.Code,
	}, {
		// The fsync fails. The broker's errorCode gives a failed
		// fdatasync UNKNOWN_SERVER_ERROR, which the table passes on
		// (Kafka's log would raise KAFKA_STORAGE_ERROR, answered
		// NOT_COORDINATOR). The log takes no more writes after that.
		name: "fsync fails",
		rc:   rigConfig{rf: 1},
		fail: func(r *rig) func() {
			r.faults.setFailSync(true)
			return nil
		},
		want: kerr.UnknownServerError.Code,
	}} {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				r := newRig(t, tt.rc)
				heal := tt.fail(r)
				start := time.Now()
				rp := r.init("a")
				synctest.Wait()
				if tt.waits > 0 {
					rp.none(t)
					time.Sleep(tt.waits) // the bubble's clock: at once
					synctest.Wait()
				}
				a := rp.one(t)
				if a.Code != tt.want || a.ProducerID != -1 {
					t.Fatalf("answer %s pid %d, want %s", codeName(a.Code), a.ProducerID, codeName(tt.want))
				}
				if d := rp.when().Sub(start); d != tt.waits {
					t.Fatalf("answered after %v, want %v", d, tt.waits)
				}
				// Nothing committed: the new id holds no epoch yet.
				if d := r.c.Describe("a"); d.ErrorCode != 0 || d.State != "Empty" || d.ProducerEpoch != -1 {
					t.Fatalf("after the failure: %s %s epoch %d", codeName(d.ErrorCode), d.State, d.ProducerEpoch)
				}
				if heal == nil {
					return
				}
				heal()
				rp = r.init("a")
				r.settle()
				if a := rp.one(t); a.Code != 0 {
					t.Fatalf("after healing: %s", codeName(a.Code))
				}
			})
		})
	}
}

// The partition's leadership moves away while a record waits for its
// replicas, before the broker has told the coordinator: the wait ends with
// NOT_LEADER_OR_FOLLOWER, answered NOT_COORDINATOR (the client looks for
// the new coordinator); so is the next request, whose append the replica
// refuses at once.
func TestLeadershipLostMidAppend(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, rigConfig{rf: 3})
		rp := r.init("a")
		synctest.Wait()
		rp.none(t)
		r.moveLeader(0, 2, 2)
		synctest.Wait()
		if a := rp.one(t); a.Code != kerr.NotCoordinator.Code {
			t.Fatalf("in flight: %s", codeName(a.Code))
		}
		end := r.parts[0].Log().EndOffset()
		rp = r.init("b")
		synctest.Wait()
		if a := rp.one(t); a.Code != kerr.NotCoordinator.Code {
			t.Fatalf("after: %s", codeName(a.Code))
		}
		if e := r.parts[0].Log().EndOffset(); e != end {
			t.Fatalf("a follower's log grew from %d to %d", end, e)
		}
	})
}

// A request the table answers CONCURRENT_TRANSACTIONS (the id's last
// transaction is still completing) is asked again here within
// concurrentWait: it succeeds if the completion ends meanwhile, else the
// client gets CONCURRENT_TRANSACTIONS once that is spent.
func TestConcurrentTransactionsRetriedHere(t *testing.T) {
	for _, tt := range []struct {
		name    string
		release time.Duration // when the markers are acknowledged; 0: not before the answer
		want    int16
	}{
		{"completes meanwhile", 30 * time.Millisecond, 0},
		{"still completing", 0, kerr.ConcurrentTransactions.Code},
	} {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				r := newRig(t, rigConfig{})
				r.host.setLeader("t", 0, 2)
				release := make(chan struct{})
				r.host.setMarkers(func(ctx context.Context, node int32, req *kmsg.WriteTxnMarkersRequest) (*kmsg.WriteTxnMarkersResponse, error) {
					select {
					case <-release:
					case <-ctx.Done():
						return nil, ctx.Err()
					}
					return ackMarkers(ctx, node, req)
				})
				pid, epoch := r.ongoing("a", tp("t", 0))
				end := r.end("a", pid, epoch, true)
				r.settle()
				if a := end.one(t); a.Code != 0 {
					t.Fatalf("end: %s", codeName(a.Code))
				}
				if tt.release > 0 {
					time.AfterFunc(tt.release, func() { close(release) })
				}
				start := time.Now()
				rp := r.init("a")
				time.Sleep(concurrentWait) // the bubble's clock: at once
				r.settle()
				a := rp.one(t)
				if a.Code != tt.want {
					t.Fatalf("init: %s, want %s", codeName(a.Code), codeName(tt.want))
				}
				took := rp.when().Sub(start)
				if tt.want == 0 {
					if a.ProducerEpoch != epoch+1 || took > tt.release+16*time.Millisecond {
						t.Fatalf("epoch %d after %v", a.ProducerEpoch, took)
					}
					return
				}
				if took > concurrentWait || took < concurrentWait-16*time.Millisecond {
					t.Fatalf("answered after %v, want within the last backoff before %v", took, concurrentWait)
				}
				close(release)
			})
		})
	}
}
