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
// 1 ms per request so samples roll. one-shape has only the client-id
// default set, so resolve looks up one level; all-shapes adds quotas on
// other names in every shape that cannot match first, so it looks up six
// of the eight. The same benchmark ran against the broker's quota code
// before it moved here (which looked up all eight levels each time).
func BenchmarkQuotaRecord(b *testing.B) {
	d, n := controller.DefaultName(), controller.Named("other")
	for _, bc := range []struct {
		name string
		es   []controller.QuotaEntity
	}{
		{"one-shape", nil},
		{"all-shapes", []controller.QuotaEntity{{User: n, ClientID: n}, {User: n, ClientID: d}, {User: n}, {User: d, ClientID: n}, {ClientID: n}}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			img := testImage(b, controller.QuotaEntity{ClientID: d}, controller.QuotaConsumerByteRate, 1e12) // never throttles
			for i, e := range bc.es {
				v := 1.0
				var err error
				if img, err = img.Apply(uint64(i+2), controller.NewRecord(controller.ClientQuota{Entity: e.Parts(), Key: controller.QuotaConsumerByteRate, Value: &v})); err != nil {
					b.Fatal(err)
				}
			}
			benchRecord(b, img)
		})
	}
}

func benchRecord(b *testing.B, img *controller.Image) {
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
