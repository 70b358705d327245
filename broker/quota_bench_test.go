package broker

import (
	"strconv"
	"testing"
	"time"

	"github.com/fjordlog/fjord/controller"
)

// BenchmarkQuotaRecord is the hot path of a quota'd fetch: the bound
// lookup (Kafka's precedence walked down to the client-id default) and
// the record that charges the sensor, for 64 client ids, the clock moving
// 1 ms per request so samples roll.
func BenchmarkQuotaRecord(b *testing.B) {
	v := 1e12 // never throttles: the benchmark measures the accounting
	img, err := new(controller.Image).Apply(1, controller.NewRecord(controller.ClientQuota{
		Entity: controller.QuotaEntity{ClientID: controller.DefaultName()}.Parts(), Key: controller.QuotaConsumerByteRate, Value: &v}))
	if err != nil {
		b.Fatal(err)
	}
	now := time.Unix(1000, 0)
	q := newQuotas(func() *controller.Image { return img }, func() time.Time { return now })
	var ids [64]string
	for i := range ids {
		ids[i] = "client-" + strconv.Itoa(i)
	}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		id := ids[i%len(ids)]
		if _, ok := q.bound(quotaFetch, anonymousPrincipal, id); !ok {
			b.Fatal("no bound")
		}
		if q.record(quotaFetch, anonymousPrincipal, id, 1000, true) != 0 {
			b.Fatal("throttled")
		}
		now = now.Add(time.Millisecond)
	}
}
