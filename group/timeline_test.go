package group

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// The timeline keeps the newest TimelineLen rebalances.
func TestTimelineIsBounded(t *testing.T) {
	g := NewGroup("g", Config{InitialRebalanceDelayMs: 0})
	proto := kmsg.JoinGroupRequestProtocol{Name: "range", Metadata: []byte("x")}
	const n = TimelineLen + 8
	for i := range int64(n) {
		// A member joins an Empty group and leaves: one rebalance to
		// CompletingRebalance, one to Empty; both end in the timeline.
		join(g, i*10, 3, "", JoinMeta{ClientID: "c"}, "J", proto)
		leave := kmsg.NewPtrLeaveGroupRequest()
		leave.MemberID = g.Leader()
		g.Leave(i*10+5, leave)
		if err := g.checkInvariants(); err != nil {
			t.Fatal(err)
		}
	}
	tl := g.Timeline()
	if len(tl) != TimelineLen {
		t.Fatalf("%d entries kept, want %d", len(tl), TimelineLen)
	}
	if last := tl[len(tl)-1]; last.Cause != CauseMemberLeft || last.Generation != 2*n || last.Outcome != OutcomeEmpty {
		t.Fatalf("newest entry %+v, want the last leave, generation %d, Empty", last, 2*n)
	}
	if first := tl[0]; first.Generation != 2*n-TimelineLen+1 {
		t.Fatalf("oldest entry %+v, want generation %d", first, 2*n-TimelineLen+1)
	}
}
