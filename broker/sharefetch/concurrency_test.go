package sharefetch

import (
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/fjordlog/fjord/group/sharepart"
)

// Members fetch and acknowledge concurrently while records are produced,
// some releasing what they get and one vanishing: every record is
// accepted exactly once, nobody is handed a record another holds, and
// the durable state ends with every record done.
func TestConcurrentMembers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := newFakePersister()
		r := newRig(t, p, Config{}, func(h *fakeHost) {
			h.gc.Partition.RecordLockDurationMs = 1500
			h.gc.Partition.DeliveryCountLimit = 10
		})
		defer r.stop()
		parts := []tp{a0, a1, b0}
		const perPart = 120
		go func() {
			for i := range perPart / 4 {
				for _, pt := range parts {
					r.h.replica(pt.id, pt.p).produce(4, int64(i))
				}
				time.Sleep(10 * time.Millisecond)
			}
		}()

		var (
			mu       sync.Mutex
			accepted = map[string]string{} // "partition/offset" -> member
			holder   = map[string]string{} // what each member holds now
			wg       sync.WaitGroup
		)
		done := func() bool {
			mu.Lock()
			defer mu.Unlock()
			return len(accepted) == perPart*len(parts)
		}
		member := func(id string, release, vanish bool) {
			defer wg.Done()
			epoch := int32(0)
			var pending map[tp][][3]int64 // acknowledgements to piggyback
			for round := 0; !done(); round++ {
				if vanish && round == 3 {
					// It keeps its records until their locks expire.
					mu.Lock()
					for k, h := range holder {
						if h == id {
							delete(holder, k)
						}
					}
					mu.Unlock()
					return
				}
				req := fetchReq(id, epoch)
				if epoch == 0 {
					req = fetchReq(id, 0, parts...)
				}
				req.MaxRecords, req.MaxWaitMillis = 7, 300
				mu.Lock()
				for pt, bs := range pending {
					withAcks(req, pt, bs...)
					// Given up as the acknowledgement leaves.
					for _, b := range bs {
						for o := b[0]; o <= b[1]; o++ {
							delete(holder, fmt.Sprintf("%s@%d", name(pt), o))
						}
					}
				}
				mu.Unlock()
				resp := r.fetch(req)
				if resp.ErrorCode != 0 {
					t.Errorf("%s: fetch at epoch %d: code %d", id, epoch, resp.ErrorCode)
					return
				}
				epoch = nextEpoch(epoch)
				got := answers(t, resp)
				mu.Lock()
				for pt, bs := range pending {
					code := got[name(pt)].ackCode
					for _, b := range bs {
						for o := b[0]; o <= b[1]; o++ {
							k := fmt.Sprintf("%s@%d", name(pt), o)
							if code != 0 || b[2] != int64(sharepart.AckAccept) {
								continue
							}
							if prev, ok := accepted[k]; ok {
								t.Errorf("%s accepted by %s and %s", k, prev, id)
							}
							accepted[k] = id
						}
					}
				}
				pending = map[tp][][3]int64{}
				for _, pt := range parts {
					for _, ar := range resp.Topics {
						for _, rp := range ar.Partitions {
							if (tp{ar.TopicID, rp.Partition}) != pt {
								continue
							}
							for _, acq := range rp.AcquiredRecords {
								for o := acq.FirstOffset; o <= acq.LastOffset; o++ {
									k := fmt.Sprintf("%s@%d", name(pt), o)
									if h, ok := holder[k]; ok && h != id {
										t.Errorf("%s handed to %s while %s holds it", k, id, h)
									}
									holder[k] = id
								}
								typ := int64(sharepart.AckAccept)
								if release && acq.FirstOffset%3 == 0 && acq.DeliveryCount < 3 {
									typ = int64(sharepart.AckRelease)
								}
								pending[pt] = append(pending[pt], [3]int64{acq.FirstOffset, acq.LastOffset, typ})
							}
						}
					}
				}
				mu.Unlock()
			}
		}
		for i := range 4 {
			wg.Add(1)
			go member(fmt.Sprintf("m%d", i), i == 1, i == 3)
		}
		wg.Wait()
		if t.Failed() {
			return
		}
		for _, pt := range parts {
			if d := p.durable(t, keyOf(pt)); d.StartOffset() != perPart {
				t.Errorf("%s: durable start offset %d, want %d", name(pt), d.StartOffset(), perPart)
			}
		}
	})
}
