package compattests

// TestFaultDeleteTopicFrozenBroker: DeleteTopics' wait for every live
// broker to drop the topic (broker/replicamgr/peerbarrier.go) is bounded. With one
// of three nodes frozen (SIGSTOP; not the active controller, whose loss is
// the controller failover's matter, and the request goes through the
// third node) it can never confirm, so the answer
// comes once the controller has fenced it for silence
// (broker.session.timeout.ms=3000 here), within the request's timeout
// either way, and it is a success: the deletion is committed. The wait
// ends because the frozen node is fenced, not because the request ran out
// (the handling node logs that only then). The live nodes no longer list
// the topic at the answer; the frozen node drops it once thawed and caught
// up. About 6 s.

import (
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

func TestFaultDeleteTopicFrozenBroker(t *testing.T) {
	fc := startFaultCluster(t, 3)
	ctx := testCtx(t, 60*time.Second)
	const topic = "frozen-delete"
	if _, err := fc.Admin(1).CreateTopic(ctx, 3, 3, nil, topic); err != nil {
		t.Fatalf("create: %v", err)
	}
	fc.Await(t, 10*time.Second, topic+" listed by every node", func() (bool, string) {
		for _, n := range fc.IDs() {
			if tm := rawMetadata(t, fc.Client(n), topic); tm.ErrorCode != 0 {
				return false, fmt.Sprintf("node %d: code %d", n, tm.ErrorCode)
			}
		}
		return true, ""
	})

	ctl := fc.Controller()
	if ctl < 1 {
		t.Fatal("no active controller reported")
	}
	var frozen, via int
	for _, n := range fc.IDs() {
		switch {
		case n == ctl:
		case frozen == 0:
			frozen = n
		default:
			via = n
		}
	}
	fc.Freeze(t, frozen)
	start := time.Now()
	resp, err := fc.Admin(via).DeleteTopics(ctx, topic) // request timeout 10 s
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		t.Fatalf("DeleteTopics via node %d with node %d frozen: %v", via, frozen, err)
	}
	t.Logf("DeleteTopics via node %d with node %d frozen answered in %v (session timeout 3 s, request timeout 10 s)", via, frozen, time.Since(start))
	if fc.Node(via).logContains("answering a metadata change before these live brokers applied it") { // broker/api/forward.go
		t.Errorf("node %d waited out the request instead of seeing node %d fenced", via, frozen)
	}
	for _, n := range []int{ctl, via} {
		if tm := rawMetadata(t, fc.Client(n), topic); tm.ErrorCode != kerr.UnknownTopicOrPartition.Code {
			t.Errorf("node %d lists %s after DeleteTopics: code %d, %d partitions", n, topic, tm.ErrorCode, len(tm.Partitions))
		}
	}

	fc.Thaw(t, frozen)
	took := fc.Await(t, 20*time.Second, "thawed node drops "+topic, func() (bool, string) {
		tm := rawMetadata(t, fc.Client(frozen), topic)
		return tm.ErrorCode == kerr.UnknownTopicOrPartition.Code, fmt.Sprintf("code %d, %d partitions", tm.ErrorCode, len(tm.Partitions))
	})
	t.Logf("thawed node %d dropped the topic %v after SIGCONT", frozen, took)
}
