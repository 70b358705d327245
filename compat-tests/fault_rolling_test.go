package compattests

import (
	"strings"
	"testing"
	"time"
)

// TestFaultRollingRestart: a rolling restart as an operator does one, under
// the fault workload: each node in turn gets SIGTERM, which begins with a
// controlled shutdown (the controller fences it and moves its leaderships
// before it stops), is started again on the same data, and the next node
// waits until every partition is led with a full ISR. Nothing acknowledged
// may be lost, duplicated or reordered; each stop must log its controlled
// shutdown, and no restart may meet DUPLICATE_BROKER_REGISTRATION (the old
// registration was fenced, not left to expire). Short: one round (three
// restarts); full: two.
func TestFaultRollingRestart(t *testing.T) {
	rounds := 1
	if faultMode(t) == "full" {
		rounds = 2
	}
	const controlled = "controlled shutdown: fenced"
	runFaultScenario(t, "rolling-restart", 3*time.Second, func(r *faultRun) {
		for round := range rounds {
			for _, id := range r.fc.IDs() {
				node := r.fc.Node(id)
				before := strings.Count(node.readLog(), controlled)
				st := time.Now()
				node.Stop()
				r.faults++
				r.logf("round %d: SIGTERM node %d: exited cleanly after %v; %d acknowledged so far",
					round+1, id, time.Since(st).Round(time.Millisecond), r.prod.Acked())
				if after := strings.Count(node.readLog(), controlled); after != before+1 {
					r.t.Errorf("node %d logged %d controlled shutdowns for one SIGTERM:\n%s", id, after-before, node.tailLog(30))
				}
				st = time.Now()
				r.restartAll(id)
				r.logf("node %d restarted and serving after %v", id, time.Since(st).Round(time.Millisecond))
				d, ok := r.fc.awaitFullISR(r.t, r.topic, 60*time.Second)
				if !ok {
					r.t.Fatalf("no full ISR after restarting node %d\n%s", id, r.fc.evidence(r.topic, allPartitions(), 60))
				}
				r.logf("every partition led with a full ISR %v later", d.Round(10*time.Millisecond))
			}
		}
		for _, id := range r.fc.IDs() {
			if log := r.fc.Node(id).readLog(); strings.Contains(log, "DUPLICATE_BROKER_REGISTRATION") {
				r.t.Errorf("node %d met DUPLICATE_BROKER_REGISTRATION on a restart after a clean stop", id)
			}
		}
	})
}
