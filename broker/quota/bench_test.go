package quota

import (
	"strconv"
	"testing"
	"time"

	"github.com/fjordlog/fjord/controller"
)

// BenchmarkQuotaRecord is the hot path of a quota'd fetch: the bound
// lookup (Kafka's precedence walked down to the client-id default) and
// the record that charges the sensor, for 64 client ids, the clock moving
// 1 ms per request so samples roll. The same benchmark ran against the
// broker's quota code before it moved here.
func BenchmarkQuotaRecord(b *testing.B) {
	img := testImage(b, controller.QuotaEntity{ClientID: controller.DefaultName()}, controller.QuotaConsumerByteRate, 1e12) // never throttles
	now := time.Unix(1000, 0)
	q := New(MaxSensors)
	var ids [64]string
	for i := range ids {
		ids[i] = "client-" + strconv.Itoa(i)
	}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		id := ids[i%len(ids)]
		if _, _, ok := q.Resolve(img, Fetch, "ANONYMOUS", id); !ok {
			b.Fatal("no bound")
		}
		if q.Record(now, img, Fetch, "ANONYMOUS", id, 1000, true) != 0 {
			b.Fatal("throttled")
		}
		now = now.Add(time.Millisecond)
	}
}
