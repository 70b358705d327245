package lag

import (
	"errors"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// A group subscribed to orders (3 partitions) with commits on partition 0
// only, an old commit on a deleted topic, and a second topic it is
// assigned but never committed: every partition of both topics is listed,
// the uncommitted ones lagging by all their records.
func TestCompute(t *testing.T) {
	members := []Member{
		{ID: "m1", Subscribed: []string{"orders"}, Assigned: map[string][]int32{"orders": {0, 1}}},
		{ID: "m2", Subscribed: []string{"orders", "events"}, Assigned: map[string][]int32{"orders": {2}, "events": {0}}},
	}
	commits := map[TP]Commit{
		{"orders", 0}: {Offset: 7},
		{"gone", 0}:   {Offset: 3},
		{"orders", 2}: {Offset: 50}, // past the end: no negative lag
	}
	offsets := map[TP]Offsets{
		{"orders", 0}: {Start: 0, End: 10},
		{"orders", 1}: {Start: 4, End: 9},
		{"orders", 2}: {Start: 0, End: 40},
		{"events", 0}: {Err: errors.New("NOT_LEADER_OR_FOLLOWER")},
		{"events", 1}: {Start: 2, End: 2},
		{"other", 0}:  {Start: 0, End: 100}, // not the group's
	}
	if got, want := Topics(members, commits), []string{"events", "gone", "orders"}; !slices.Equal(got, want) {
		t.Errorf("Topics: %v, want %v", got, want)
	}
	var got []string
	for _, r := range Compute(members, commits, offsets) {
		got = append(got, fmt.Sprintf("%s-%d committed %d lag %d member %q err %v", r.Topic, r.Partition, r.Committed, r.Lag, r.Member, r.Err))
	}
	want := []string{
		`events-0 committed -1 lag -1 member "m2" err NOT_LEADER_OR_FOLLOWER`,
		`events-1 committed -1 lag 0 member "" err <nil>`,
		`gone-0 committed 3 lag -1 member "" err ` + ErrUnlisted.Error(),
		`orders-0 committed 7 lag 3 member "m1" err <nil>`,
		`orders-1 committed -1 lag 5 member "m1" err <nil>`,
		`orders-2 committed 50 lag 0 member "m2" err <nil>`,
	}
	if !slices.Equal(got, want) {
		t.Errorf("Compute:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// An OffsetFetch error on a partition is its row's error.
func TestComputeCommitError(t *testing.T) {
	rows := Compute(nil, map[TP]Commit{{"t", 0}: {Offset: -1, Err: errors.New("UNSTABLE_OFFSET_COMMIT")}}, map[TP]Offsets{{"t", 0}: {End: 5}})
	if len(rows) != 1 || rows[0].Lag != -1 || rows[0].Err == nil || rows[0].Err.Error() != "UNSTABLE_OFFSET_COMMIT" {
		t.Fatalf("rows %+v", rows)
	}
}

// The consumer protocol's bytes, as a Stable group's DescribeGroups
// carries them; bytes that do not decode name nothing.
func TestConsumerMember(t *testing.T) {
	md := kmsg.NewConsumerMemberMetadata()
	md.Topics = []string{"a", "b"}
	asg := kmsg.NewConsumerMemberAssignment()
	at := kmsg.NewConsumerMemberAssignmentTopic()
	at.Topic, at.Partitions = "a", []int32{1, 3}
	asg.Topics = append(asg.Topics, at)
	m := ConsumerMember("m", md.AppendTo(nil), asg.AppendTo(nil))
	if m.ID != "m" || !slices.Equal(m.Subscribed, []string{"a", "b"}) || !slices.Equal(m.Assigned["a"], []int32{1, 3}) {
		t.Errorf("decoded %+v", m)
	}
	if m := ConsumerMember("x", []byte{0xff}, []byte{0, 1, 0xff}); m.Subscribed != nil || m.Assigned != nil {
		t.Errorf("garbage decoded to %+v", m)
	}
}

func TestOf(t *testing.T) {
	for _, c := range [][4]int64{{-1, 3, 10, 7}, {5, 3, 10, 5}, {12, 0, 10, 0}, {-1, 10, 8, 0}} {
		if got := Of(c[0], c[1], c[2]); got != c[3] {
			t.Errorf("Of(committed %d, start %d, end %d) = %d, want %d", c[0], c[1], c[2], got, c[3])
		}
	}
}

// A leaf: the CLI and the console share it, so it reaches neither.
func TestLeafImportsNothingOfFjord(t *testing.T) {
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command:", err)
	}
	out, err := exec.Command(gobin, "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	for _, p := range strings.Fields(string(out)) {
		if strings.HasPrefix(p, "github.com/fjordlog/fjord/") && p != "github.com/fjordlog/fjord/group/lag" {
			t.Errorf("depends on %s", p)
		}
	}
}
