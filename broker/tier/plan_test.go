package tier

import (
	"fmt"
	"strings"
	"testing"

	"github.com/fjordlog/fjord/controller"
)

func seg(id byte, state controller.RemoteSegmentState, base, end int64, broker, epoch int32) controller.RemoteSegmentMeta {
	return controller.RemoteSegmentMeta{RemoteSegment: controller.RemoteSegment{SegmentID: [16]byte{id}, BaseOffset: base, EndOffset: end,
		MaxTimestamp: 1000 + end, SizeBytes: end - base + 1, Broker: broker, LeaderEpoch: epoch}, State: state}
}

const (
	started  = controller.RemoteCopyStarted
	finished = controller.RemoteCopyFinished
	deleting = controller.RemoteDeleteStarted
)

// plan prints Plan's actions: kind and the segment (local [base, last] or
// remote id).
func plan(p Partition) string {
	var out []string
	for _, a := range Plan(p) {
		if a.Kind == Upload {
			out = append(out, fmt.Sprintf("upload [%d, %d]", a.Local.Base, a.Local.Last))
		} else {
			out = append(out, fmt.Sprintf("%s #%d", a.Kind, a.Remote.SegmentID[0]))
		}
	}
	if len(out) == 0 {
		return "nothing"
	}
	return strings.Join(out, ", ")
}

func TestPlan(t *testing.T) {
	sealed := []LocalSegment{{0, 99, 100, 1099}, {100, 199, 100, 1199}, {200, 299, 100, 1299}}
	base := Partition{Broker: 1, Leader: true, LeaderEpoch: 3, Enabled: true, HighWatermark: 1000, LastStable: 1000,
		Sealed: sealed, RetentionMs: -1, RetentionBytes: -1, Now: 5000}
	for _, tc := range []struct {
		name string
		edit func(p *Partition)
		want string
	}{
		{"a follower does nothing", func(p *Partition) {
			p.Leader = false
			p.Remote = []controller.RemoteSegmentMeta{seg(1, started, 0, 99, 2, 1)}
		}, "nothing"},
		{"a topic without tiering does nothing", func(p *Partition) { p.Enabled = false }, "nothing"},
		{"the oldest sealed segment first", func(p *Partition) {}, "upload [0, 99]"},
		{"nothing sealed", func(p *Partition) { p.Sealed = nil }, "nothing"},
		{"the next above the copied end", func(p *Partition) { p.Remote = []controller.RemoteSegmentMeta{seg(1, finished, 0, 99, 1, 3)} }, "upload [100, 199]"},
		{"all copied", func(p *Partition) { p.Remote = []controller.RemoteSegmentMeta{seg(1, finished, 0, 299, 1, 3)} }, "nothing"},
		{"not at or above the high watermark", func(p *Partition) { p.HighWatermark = 99 }, "nothing"},
		{"below the high watermark", func(p *Partition) { p.HighWatermark = 100 }, "upload [0, 99]"},
		{"not at or above the last stable offset (an open transaction)", func(p *Partition) { p.LastStable = 99 }, "nothing"},
		{"the copied end is past the candidate's base (another leader rolled elsewhere)", func(p *Partition) {
			p.Remote = []controller.RemoteSegmentMeta{seg(1, finished, 0, 149, 2, 2)}
		}, "upload [100, 199]"},
		{"own attempt in flight: wait", func(p *Partition) {
			p.Remote, p.InFlight = []controller.RemoteSegmentMeta{seg(1, started, 0, 99, 1, 3)}, [16]byte{1}
		}, "nothing"},
		{"own attempt being proposed (not in the image yet): wait", func(p *Partition) { p.InFlight = [16]byte{9} }, "nothing"},
		{"another leader's attempt: abandon it, upload after", func(p *Partition) {
			p.Remote = []controller.RemoteSegmentMeta{seg(1, finished, 0, 99, 2, 2), seg(2, started, 100, 199, 2, 2)}
		}, "abandon #2"},
		{"own attempt from an earlier leadership (crashed): abandon it", func(p *Partition) {
			p.Remote = []controller.RemoteSegmentMeta{seg(2, started, 0, 99, 1, 1)}
		}, "abandon #2"},
		{"own attempt at this epoch but not in flight (the driver restarted): abandon it", func(p *Partition) {
			p.Remote = []controller.RemoteSegmentMeta{seg(2, started, 0, 99, 1, 3)}
		}, "abandon #2"},
		{"deletions to finish, and the upload goes on", func(p *Partition) {
			p.Remote = []controller.RemoteSegmentMeta{seg(1, deleting, 0, 99, 2, 2), seg(2, finished, 0, 99, 1, 3)}
		}, "finish-delete #1, upload [100, 199]"},
		{"retention.bytes: the oldest while the rest is still at least the bound", func(p *Partition) {
			p.Remote = []controller.RemoteSegmentMeta{seg(1, finished, 0, 99, 1, 3), seg(2, finished, 100, 199, 1, 3), seg(3, finished, 200, 299, 1, 3)}
			p.LocalBytesAbove, p.RetentionBytes = 50, 150 // 350 in all: 250 without #1, 150 without #2 too
		}, "expire #1, expire #2"},
		{"retention.bytes not reached", func(p *Partition) {
			p.Remote = []controller.RemoteSegmentMeta{seg(1, finished, 0, 99, 1, 3)}
			p.LocalBytesAbove, p.RetentionBytes = 50, 150
		}, "upload [100, 199]"},
		{"retention.ms: only a prefix goes", func(p *Partition) {
			p.Remote = []controller.RemoteSegmentMeta{seg(1, finished, 0, 99, 1, 3), seg(2, finished, 100, 199, 1, 3), seg(3, finished, 200, 299, 1, 3)}
			p.RetentionMs, p.Now = 1000, 1000+199+1001 // #1 (max ts 1099) and #2 (1199) older than 1 s
		}, "expire #1, expire #2"},
		{"retention skips attempts not finished", func(p *Partition) {
			p.Remote = []controller.RemoteSegmentMeta{seg(1, deleting, 0, 99, 1, 3), seg(2, finished, 0, 99, 1, 3)}
			p.RetentionBytes = 0
		}, "finish-delete #1, upload [100, 199]"},
		{"retention never expires the newest copy (the copied end must not move back)", func(p *Partition) {
			p.Remote = []controller.RemoteSegmentMeta{seg(1, finished, 0, 99, 1, 3), seg(2, finished, 100, 199, 1, 3)}
			p.RetentionMs, p.Now = 0, 1<<40
		}, "expire #1, upload [200, 299]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := base
			tc.edit(&p)
			if got := plan(p); got != tc.want {
				t.Fatalf("got %s, want %s", got, tc.want)
			}
		})
	}
}

func TestObjectKey(t *testing.T) {
	topicID := [16]byte{0x12, 0x34, 0x56, 0x78, 0x9a, 0xbc, 0xde, 0xf0, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88}
	seg := [16]byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}
	got := ObjectKey("tiered/", "orders", topicID, 7, 1234, seg, "log")
	want := "tiered/orders-EjRWeJq83vARIjNEVWZ3iA/7/00000000000000001234-AQIDBAUGBwgJCgsMDQ4PEA.log"
	if got != want {
		t.Fatalf("key\n%s, want\n%s", got, want)
	}
}
