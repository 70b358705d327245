package brokertest

import (
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordlog/fjord/broker/config"
)

// Controlled shutdown: a leader stopped cleanly asks the controller to
// fence it first, so its leadership moves to another ISR member at once —
// with a 20 s session, only the controlled shutdown can move it within
// seconds — acks=all writes go on through the new leader, and the node's
// next start registers at once instead of meeting
// DUPLICATE_BROKER_REGISTRATION until its old session ends.
func TestScenarioControlledShutdown(t *testing.T) {
	const topic = "ctlshut"
	step := stepper(t)
	c, logs := scenarioClusterLogs(t, topic, 10000, 2, func(cfg *config.Config) { cfg.BrokerSessionTimeoutMs = 20000 })
	p := partitionVia(t, c, 1, topic)
	l := p.Leader
	a, b := vals("a", 5), vals("b", 5)
	mustSend(t, c, l, topic, -1, a...)
	step("node %d leads %s at epoch %d", l, topic, p.LeaderEpoch)

	stopNode(t, c, l)
	if n := logs.count("controlled shutdown: fenced"); n != 1 {
		t.Fatalf("%d controlled shutdowns logged, want 1", n)
	}
	via := otherNodes(l)[0]
	np := waitPartition(t, c, via, topic, 5*time.Second, "another replica leads, the stopped node out of the ISR, well inside its 20 s session",
		func(p kmsg.MetadataResponseTopicPartition) bool {
			return p.Leader > 0 && p.Leader != l && !slices.Contains(p.ISR, l)
		})
	waitLeads(t, c, np.Leader, topic, np.LeaderEpoch)
	step("node %d stopped; node %d leads at epoch %d, ISR %v", l, np.Leader, np.LeaderEpoch, np.ISR)
	mustSend(t, c, np.Leader, topic, -1, b...)

	restartNode(t, c, l)
	step("node %d restarted", l)
	if n := logs.count("broker registration failed"); n != 0 {
		t.Fatalf("the restarted node's registration was refused %d times: it should not wait out its old session", n)
	}
	waitLogs(t, c, topic, concat(a, b), 15*time.Second)
	step("every replica holds A B, committed; ISR of 3")
}
