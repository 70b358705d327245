package txncoord

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordlog/fjord/broker/txn"
	"github.com/fjordlog/fjord/protocol/lifecycle"
	"github.com/fjordlog/fjord/storage"
	"github.com/fjordlog/fjord/storage/recordbatch"
)

// Failover: the node that gains the partition loads every id from its log
// and finishes the transactions it finds decided, with markers at its own
// coordinator epoch; the others keep their states.
func TestFailoverLoadsAndResumesMarkers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fs := storage.NewMemFS()
		a := newRig(t, rigConfig{fs: fs})
		leaders := map[txn.TopicPartition]int32{tp("t", 0): 2, tp("u", 0): 3}
		for p, l := range leaders {
			a.host.setLeader(p.Topic, p.Partition, l)
		}
		// Node 2 is down for the first coordinator; node 3 answers.
		a.host.setMarkers(func(ctx context.Context, node int32, req *kmsg.WriteTxnMarkersRequest) (*kmsg.WriteTxnMarkersResponse, error) {
			if node == 2 {
				return nil, errors.New("connection refused")
			}
			return ackMarkers(ctx, node, req)
		})
		type ended struct {
			pid    int64
			epoch  int16
			commit bool
		}
		decided := map[string]ended{}
		for _, x := range []struct {
			id     string
			commit bool
		}{{"commits", true}, {"aborts", false}} {
			pid, epoch := a.ongoing(x.id, tp("t", 0))
			a.end(x.id, pid, epoch, x.commit)
			decided[x.id] = ended{pid, epoch, x.commit}
		}
		pid, epoch := a.ongoing("done", tp("u", 0))
		a.end("done", pid, epoch, true)
		a.ongoing("open", tp("u", 0))
		a.init("empty")
		a.settle()
		before := map[string]string{}
		for _, id := range []string{"commits", "aborts", "done", "open", "empty"} {
			before[id] = a.state(id)
		}
		if fmt.Sprint(before) != "map[aborts:PrepareAbort commits:PrepareCommit done:CompleteCommit empty:Empty open:Ongoing]" {
			t.Fatalf("first coordinator: %v", before)
		}
		a.close()

		b := newRig(t, rigConfig{fs: fs, epoch: 2, before: func(b *rig) {
			for p, l := range leaders {
				b.host.setLeader(p.Topic, p.Partition, l)
			}
		}})
		b.settle()
		calls := b.host.markerCalls()
		if len(calls) != 2 {
			t.Fatalf("%d marker requests after the load, want 2", len(calls))
		}
		for _, c := range calls {
			m := c.req.Markers[0]
			var id string
			for k, e := range decided {
				if e.pid == m.ProducerID {
					id = k
				}
			}
			e := decided[id]
			if c.node != 2 || m.ProducerEpoch != e.epoch || m.Committed != e.commit || m.CoordinatorEpoch != 2 {
				t.Fatalf("node %d: marker %+v, want %s's at coordinator epoch 2", c.node, m, id)
			}
		}
		after := map[string]string{}
		for _, id := range []string{"commits", "aborts", "done", "open", "empty"} {
			after[id] = b.state(id)
		}
		if fmt.Sprint(after) != "map[aborts:CompleteAbort commits:CompleteCommit done:CompleteCommit empty:Empty open:Ongoing]" {
			t.Fatalf("second coordinator: %v", after)
		}
	})
}

// The same node loses the partition and gains it again: its table is
// dropped and loaded afresh from the log at the new epoch; while it does
// not lead, it sends nothing.
func TestRegainedPartitionReloads(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, rigConfig{})
		r.host.setLeader("t", 0, 2)
		r.host.setMarkers(func(context.Context, int32, *kmsg.WriteTxnMarkersRequest) (*kmsg.WriteTxnMarkersResponse, error) {
			return nil, errors.New("connection refused")
		})
		pid, epoch := r.ongoing("a", tp("t", 0))
		r.end("a", pid, epoch, true)
		r.settle()

		r.moveLeader(0, 2, 2)
		r.follow()
		synctest.Wait()
		if err := r.c.Status("a"); !errors.Is(err, ErrNotCoordinator) {
			t.Fatalf("status after the loss: %v", err)
		}
		if d := r.c.Describe("a"); d.ErrorCode != kerr.NotCoordinator.Code {
			t.Fatalf("describe after the loss: %s", codeName(d.ErrorCode))
		}
		n := len(r.host.markerCalls())
		time.Sleep(time.Minute)
		synctest.Wait()
		if m := len(r.host.markerCalls()); m != n {
			t.Fatalf("%d marker requests while not leading", m-n)
		}

		r.host.setMarkers(ackMarkers)
		r.moveLeader(0, 1, 3)
		r.follow()
		r.settle()
		calls := r.host.markerCalls()[n:]
		if len(calls) != 1 || calls[0].req.Markers[0].CoordinatorEpoch != 3 {
			t.Fatalf("after regaining: %d requests", len(calls))
		}
		if s := r.state("a"); s != "CompleteCommit" {
			t.Fatalf("state %s", s)
		}
	})
}

// A load that starts after its table was unloaded (the partition lost,
// and gained again by another table, before the load's goroutine ran)
// does nothing: only the current table loads and sends markers.
func TestLateLoadOfLostTable(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, rigConfig{})
		r.host.setLeader("t", 0, 2)
		r.host.setMarkers(func(context.Context, int32, *kmsg.WriteTxnMarkersRequest) (*kmsg.WriteTxnMarkersResponse, error) {
			return nil, errors.New("connection refused")
		})
		pid, epoch := r.ongoing("a", tp("t", 0))
		r.end("a", pid, epoch, true)
		r.settle()

		release := r.host.hold()
		r.host.setMarkers(ackMarkers)
		n := len(r.host.markerCalls())
		for e, leader := range []int32{2, 1, 2, 1} { // lost, gained, lost, gained
			r.moveLeader(0, leader, int32(e)+2)
			r.follow()
		}
		release()
		r.settle()
		calls := r.host.markerCalls()[n:]
		if len(calls) != 1 || calls[0].req.Markers[0].CoordinatorEpoch != 5 {
			var epochs []int32
			for _, c := range calls {
				epochs = append(epochs, c.req.Markers[0].CoordinatorEpoch)
			}
			t.Fatalf("marker requests at coordinator epochs %v, want one at 5", epochs)
		}
		if s := states(r.records(0), "a"); !slices.Equal(s, []string{"Empty", "Ongoing", "PrepareCommit", "CompleteCommit"}) {
			t.Fatalf("records %v", s)
		}
	})
}

// A partition lost answers its waiting requests NOT_COORDINATOR, once,
// and takes no more; what was in flight for it (a record's wait, a
// marker's answer) changes nothing when it ends: no record, no marker.
func TestLostPartitionAnswersNotCoordinator(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, rigConfig{rf: 3})
		r.host.setLeader("t", 0, 2)
		release := make(chan struct{})
		r.host.setMarkers(func(ctx context.Context, node int32, req *kmsg.WriteTxnMarkersRequest) (*kmsg.WriteTxnMarkersResponse, error) {
			<-release
			return ackMarkers(ctx, node, req)
		})
		pid, epoch := r.ongoing("m", tp("t", 0))
		r.end("m", pid, epoch, true)
		r.settle()
		if n := len(r.host.markerCalls()); n != 1 {
			t.Fatalf("%d marker requests", n)
		}
		waiting := r.init("w")
		synctest.Wait()
		waiting.none(t)
		end := r.parts[0].Log().EndOffset()

		r.moveLeader(0, 2, 2)
		r.follow()
		synctest.Wait()
		if a := waiting.one(t); a.Code != kerr.NotCoordinator.Code {
			t.Fatalf("waiting: %s", codeName(a.Code))
		}
		if err := r.c.Status("w"); !errors.Is(err, ErrNotCoordinator) {
			t.Fatalf("status: %v", err)
		}
		after := r.end("m", pid, epoch, true)
		synctest.Wait()
		if a := after.one(t); a.Code != kerr.NotCoordinator.Code {
			t.Fatalf("a request after the loss: %s", codeName(a.Code))
		}
		close(release)
		time.Sleep(time.Minute)
		synctest.Wait()
		waiting.one(t) // still only the one answer
		if e := r.parts[0].Log().EndOffset(); e != end {
			t.Fatalf("the log grew from %d to %d after the loss", end, e)
		}
		if n := len(r.host.markerCalls()); n != 1 {
			t.Fatalf("%d marker requests, want the 1 before the loss", n)
		}
	})
}

// Losing one partition leaves the others served.
func TestLossIsPerPartition(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, rigConfig{partitions: 2})
		lost, kept := r.idOn(0, "x"), r.idOn(1, "x")
		r.moveLeader(0, 2, 2)
		r.follow()
		synctest.Wait()
		if err := r.c.Status(lost); !errors.Is(err, ErrNotCoordinator) {
			t.Fatalf("%s on the lost partition: %v", lost, err)
		}
		if err := r.c.Status(kept); err != nil {
			t.Fatalf("%s on the kept partition: %v", kept, err)
		}
		rp := r.init(kept)
		r.settle()
		if a := rp.one(t); a.Code != 0 {
			t.Fatalf("init %s: %s", kept, codeName(a.Code))
		}
		if s := states(r.records(1), kept); !slices.Equal(s, []string{"Empty"}) {
			t.Fatalf("partition 1 records of %s: %v", kept, s)
		}
	})
}

// A load applies each id's last record: a tombstone removes the id, a
// record that does not decode is skipped with one warning (the id keeps
// its state before it), and a decided transaction sends its markers.
func TestLoadFromLog(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, rigConfig{before: func(r *rig) {
			p := r.parts[0]
			appendRaw(t, p, txnKey("kept"), txnValue(txn.Empty, 7, 3))
			appendRaw(t, p, txnKey("kept"), []byte{0, 1, 0xff}) // a value that does not decode
			appendRaw(t, p, txnKey("gone"), txnValue(txn.Empty, 8, 0))
			appendRaw(t, p, txnKey("gone"), nil)
			appendRaw(t, p, txnKey("decided"), txnValue(txn.PrepareCommit, 9, 1, tp("t", 0), tp("t", 1)))
			r.host.setLeader("t", 0, 2)
			r.host.setLeader("t", 1, 2)
		}})
		r.settle()
		if d := r.c.Describe("kept"); d.State != "Empty" || d.ProducerID != 7 || d.ProducerEpoch != 3 {
			t.Fatalf("kept: %s %s pid %d epoch %d", codeName(d.ErrorCode), d.State, d.ProducerID, d.ProducerEpoch)
		}
		if s := r.state("gone"); s != kerr.TransactionalIDNotFound.Error() {
			t.Fatalf("gone: %s", s)
		}
		if s := r.state("decided"); s != "CompleteCommit" {
			t.Fatalf("decided: %s", s)
		}
		calls := r.host.markerCalls()
		if len(calls) != 1 || !slices.Equal(markerParts(calls[0].req), []string{"t-0", "t-1"}) || calls[0].req.Markers[0].ProducerID != 9 {
			t.Fatalf("markers: %d requests", len(calls))
		}
		var warns, loaded int
		for _, l := range r.log.since(0) {
			if strings.Contains(l, "skipping an unreadable transaction state record") {
				warns++
			}
			if strings.Contains(l, "loaded transaction state") && strings.Contains(l, `"records":5`) {
				loaded++
			}
		}
		if warns != 1 || loaded != 1 {
			t.Fatalf("%d warnings, %d load lines with 5 records: %q", warns, loaded, r.log.since(0))
		}
	})
}

// A log that cannot be read is reported to the broker (which marks the
// replica damaged), and the partition stays loading: no requests are
// served from a partial table.
func TestLoadReadFails(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, rigConfig{unavailable: true, before: func(r *rig) {
			p := r.parts[0]
			appendRaw(t, p, txnKey("a"), txnValue(txn.Empty, 7, 3))
			f, err := r.fs.OpenFile(fmt.Sprintf("/data/%s-0/%020d.log", Topic, 0), os.O_RDWR, 0)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := f.WriteAt([]byte{0xde, 0xad}, recordbatch.HeaderLen+2); err != nil {
				t.Fatal(err)
			}
			f.Close()
		}})
		r.host.mu.Lock()
		failed := append([]error(nil), r.host.mu.readFailed...)
		r.host.mu.Unlock()
		if len(failed) != 1 || !errors.Is(failed[0], storage.ErrCorruptLog) {
			t.Fatalf("read failures reported: %v", failed)
		}
		if err := r.c.Status("a"); !errors.Is(err, ErrLoading) {
			t.Fatalf("status: %v", err)
		}
		rp := r.init("a")
		synctest.Wait()
		if a := rp.one(t); a.Code != kerr.CoordinatorLoadInProgress.Code {
			t.Fatalf("init: %s", codeName(a.Code))
		}
	})
}

// Producer ids come from the controller in blocks; while none has come,
// requests that need one get COORDINATOR_LOAD_IN_PROGRESS, and the ask is
// repeated after WriteBackoff.
func TestProducerIDsRetried(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := txn.DefaultConfig()
		cfg.WriteBackoff = lifecycle.Backoff{Initial: 100 * time.Millisecond, Max: 400 * time.Millisecond}
		r := newRig(t, rigConfig{txn: cfg, before: func(r *rig) {
			r.host.mu.Lock()
			r.host.mu.pidErr = errors.New("controller unreachable")
			r.host.mu.Unlock()
		}})
		rp := r.init("a")
		synctest.Wait()
		if a := rp.one(t); a.Code != kerr.CoordinatorLoadInProgress.Code {
			t.Fatalf("init without ids: %s", codeName(a.Code))
		}
		time.Sleep(time.Second) // asks at 0, 100, 300, 700 ms
		synctest.Wait()
		r.host.mu.Lock()
		asks := r.host.mu.pidAsks
		r.host.mu.pidErr = nil
		r.host.mu.Unlock()
		if asks != 4 {
			t.Fatalf("%d asks in a second, want 4", asks)
		}
		time.Sleep(time.Second)
		rp = r.init("a")
		r.settle()
		if a := rp.one(t); a.Code != 0 || a.ProducerID != 1000 {
			t.Fatalf("init: %s pid %d", codeName(a.Code), a.ProducerID)
		}
	})
}
