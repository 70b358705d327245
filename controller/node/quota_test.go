package node

import (
	"maps"
	"testing"

	"github.com/fjordlog/fjord/controller"
)

// TestQuotasSurviveSnapshotRestart: client quotas written before several
// snapshots (every 4 entries, the log compacted behind them) are in the
// image a restarted node rebuilds from its snapshot and log.
func TestQuotasSurviveSnapshotRestart(t *testing.T) {
	h := newHarness(t, 1, 0, 4)
	n := h.waitLeader()
	v := 262144.0
	client := "A"
	propose(t, n, controller.NewRecord(controller.ClientQuota{
		Entity: []controller.QuotaEntityPart{{Type: controller.QuotaClientID, Name: &client}}, Key: controller.QuotaProducerByteRate, Value: &v}))
	propose(t, n, controller.NewBatch([]controller.Record{
		controller.NewRecord(controller.ClientQuota{Entity: []controller.QuotaEntityPart{{Type: controller.QuotaUser}, {Type: controller.QuotaClientID}},
			Key: controller.QuotaRequestPercentage, Value: &v}),
		controller.NewRecord(controller.ClientQuota{Entity: []controller.QuotaEntityPart{{Type: controller.QuotaIP}},
			Key: controller.QuotaConnectionCreationRate, Value: &v}),
	}))
	for i := int32(1); i <= 12; i++ {
		propose(t, n, register(i))
	}
	want := map[controller.QuotaEntity]map[string]float64{}
	for _, e := range n.Image().QuotaEntities() {
		want[e] = n.Image().ClientQuotas(e)
	}
	if len(want) != 3 {
		t.Fatalf("before the restart: %v", want)
	}
	h.stop(1)
	n = h.start(1)
	h.waitLeader()
	h.waitAll(hasBroker(12, 0))
	img := n.Image()
	if got := img.QuotaEntities(); len(got) != len(want) {
		t.Fatalf("after the restart: entities %v, want %d", got, len(want))
	}
	for e, q := range want {
		if !maps.Equal(img.ClientQuotas(e), q) {
			t.Errorf("after the restart %v: %v, want %v", e, img.ClientQuotas(e), q)
		}
	}
}
