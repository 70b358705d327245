package tier

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/fjordlog/fjord/controller"
	"github.com/fjordlog/fjord/storage/remote"
)

func withEpochs(s controller.RemoteSegmentMeta, es ...int64) controller.RemoteSegmentMeta {
	for i := 0; i+1 < len(es); i += 2 {
		s.LeaderEpochs = append(s.LeaderEpochs, controller.EpochStart{Epoch: int32(es[i]), StartOffset: es[i+1]})
	}
	return s
}

// PlanRestart: the copied segment holding the offset before the leader's
// local start, and the epochs of the copied offsets up to its end.
func TestPlanRestart(t *testing.T) {
	segs := []controller.RemoteSegmentMeta{
		withEpochs(seg(1, finished, 0, 99, 1, 1), 1, 0),
		withEpochs(seg(2, finished, 100, 199, 1, 1), 1, 100, 2, 150),
		// a new leader's copy overlapping the old one's last
		withEpochs(seg(3, finished, 150, 249, 2, 3), 2, 150, 3, 200),
		withEpochs(seg(4, finished, 250, 349, 2, 3), 3, 250, 5, 300),
		withEpochs(seg(5, started, 350, 449, 2, 5), 5, 350),
	}
	for _, tc := range []struct {
		localStart int64
		want       string
	}{
		{100, "restart at 100 after #1, epochs [{1 0}]"},
		{200, "restart at 200 after #2, epochs [{1 0} {2 150}]"},
		{201, "restart at 250 after #3, epochs [{1 0} {2 150} {3 200}]"},
		{350, "restart at 350 after #4, epochs [{1 0} {2 150} {3 200} {5 300}]"},
		{400, "not copied"}, // only COPY_STARTED there
		{0, "not copied"},
	} {
		got := "not copied"
		s, es, err := PlanRestart(segs, tc.localStart)
		if err == nil {
			got = fmt.Sprintf("restart at %d after #%d, epochs %v", s.EndOffset+1, s.SegmentID[0], es)
		} else if !errors.Is(err, ErrNotCopied) {
			t.Fatal(err)
		}
		if got != tc.want {
			t.Errorf("leader local start %d: %s, want %s", tc.localStart, got, tc.want)
		}
	}
}

// Reader.Restart reads the segment's snapshot object; one missing gives
// none, a failing store an error.
func TestReaderRestart(t *testing.T) {
	store := remote.NewMemStore()
	ref := Ref{Topic: "t", TopicID: [16]byte{7}, Partition: 0}
	segs := []controller.RemoteSegmentMeta{withEpochs(seg(1, finished, 0, 99, 1, 1), 1, 0), withEpochs(seg(2, finished, 100, 199, 1, 1), 1, 100)}
	key := ObjectKey("", ref.Topic, ref.TopicID, 0, 100, segs[1].SegmentID, "snapshot")
	if err := store.Put(context.Background(), key, strings.NewReader("snap"), 4); err != nil {
		t.Fatal(err)
	}
	r := &Reader{Store: store}
	rs, err := r.Restart(context.Background(), ref, segs, 150)
	if err != nil || rs.Offset != 200 || string(rs.Snapshot) != "snap" {
		t.Fatalf("restart: %+v %v", rs, err)
	}
	if rs, err = r.Restart(context.Background(), ref, segs, 100); err != nil || rs.Offset != 100 || rs.Snapshot != nil {
		t.Fatalf("restart without a snapshot object: %+v %v", rs, err)
	}
	store.SetFault(fmt.Errorf("%w: injected", remote.ErrUnavailable))
	if _, err := r.Restart(context.Background(), ref, segs, 150); !errors.Is(err, remote.ErrUnavailable) {
		t.Fatalf("restart with the store down: %v", err)
	}
}
