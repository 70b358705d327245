package sharefetch

import (
	"runtime"
	"testing"
	"testing/synctest"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// FuzzHandlers feeds arbitrary ShareFetch and ShareAcknowledge requests
// (decoded from the fuzzer's bytes, as the front end decodes them) to the
// handlers of a node with records, a session and a loaded
// share-partition: whatever they say, the handlers answer exactly once
// and never panic.
func FuzzHandlers(f *testing.F) {
	seed := func(fetch bool, version int16, req kmsg.Request) {
		req.SetVersion(version)
		f.Add(fetch, uint8(version), req.AppendTo(nil))
	}
	seed(true, 1, fetchReq("m1", 0, a0, a1, b0))
	seed(true, 2, withAcks(fetchReq("m1", 1, a0), a0, [3]int64{0, 3, 1}, [3]int64{5, 9, 2}))
	seed(true, 2, withAcks(fetchReq("m1", -1), a0, [3]int64{0, 3, 4}))
	seed(false, 2, ackReq("m1", 1, a0, [3]int64{0, 9, 1}))
	seed(false, 1, ackReq("m1", -1, a0, [3]int64{2, 1, 7}))
	f.Fuzz(func(t *testing.T, fetch bool, version uint8, data []byte) {
		var req kmsg.Request = kmsg.NewPtrShareAcknowledgeRequest()
		if fetch {
			req = kmsg.NewPtrShareFetchRequest()
		}
		req.SetVersion(int16(version%2) + 1)
		if err := req.ReadFrom(data); err != nil {
			return
		}
		// A hang that is not a durable block (a spin, a lock cycle) would
		// stall the fuzzer silently: crash with every stack instead.
		wd := time.AfterFunc(30*time.Second, func() {
			buf := make([]byte, 1<<20)
			n := runtime.Stack(buf, true)
			panic("watchdog\n" + string(buf[:n]))
		})
		defer wd.Stop()
		synctest.Test(t, func(t *testing.T) {
			r := newRig(t, newFakePersister(), Config{MaxSessions: 2}, func(h *fakeHost) {
				h.gc.Partition.RecordLockDurationMs = 1000
			})
			defer r.stop()
			r.h.replica(topicA, 0).produce(5, 1000)
			r.h.replica(topicA, 0).commitMarker()
			r.h.replica(topicA, 0).produce(5, 1000)
			wantAcquired(t, answers(t, r.fetch(fetchReq("m1", 0, a0))), a0, "0-4:1 6-10:1")
			e := r.ackE
			if fetch {
				e = r.fetchE
			}
			// Twice: the first may open or move a session the second uses.
			for range 2 {
				call[kmsg.Response](t, e, r.conn(), req)
			}
		})
	})
}
