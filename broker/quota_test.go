package broker

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordlog/fjord/broker/api"
	"github.com/fjordlog/fjord/broker/partitions"
	"github.com/fjordlog/fjord/controller"
)

// The quota arithmetic is broker/quota's, tested there; these test the
// glue: what each request path charges, what it does to the request and
// the response, the mute, the exemptions, and the metric.

func quotaGlue(t *testing.T, quotas ...controller.ClientQuota) (*clientQuotas, *prometheus.Registry) {
	t.Helper()
	img := new(controller.Image)
	for i, q := range quotas {
		var err error
		if img, err = img.Apply(uint64(i+1), controller.NewRecord(q)); err != nil {
			t.Fatal(err)
		}
	}
	reg := prometheus.NewRegistry()
	return newClientQuotas(func() *controller.Image { return img }, reg, zerolog.Nop()), reg
}

func clientQuota(e controller.QuotaEntity, key string, v float64) controller.ClientQuota {
	return controller.ClientQuota{Entity: e.Parts(), Key: key, Value: &v}
}

// near reports whether a throttle of got ms is want ms, less what the
// real clock moved since the first charge (at most 100 ms): the glue
// reads the clock, and the window grows with it.
func near(got, want int64) bool { return got <= want && got > want-100 }

// mutedConn is a connection of client whose mutes are recorded.
func mutedConn(client string, muted *[]time.Duration) *api.Conn {
	return &api.Conn{ClientID: client, Mute: func(d time.Duration) { *muted = append(*muted, d) }}
}

func TestQuotaProduceGlue(t *testing.T) {
	q, reg := quotaGlue(t, clientQuota(controller.QuotaEntity{ClientID: controller.Named("slow")}, controller.QuotaProducerByteRate, 100))
	var muted []time.Duration
	produce := func(client string, n int) *kmsg.ProduceResponse {
		req := kmsg.NewPtrProduceRequest()
		req.Topics = []kmsg.ProduceRequestTopic{{Partitions: []kmsg.ProduceRequestTopicPartition{{Records: make([]byte, n)}}}}
		var got kmsg.Response
		q.produce(mutedConn(client, &muted), req, func(r kmsg.Response) { got = r })(kmsg.NewPtrProduceResponse())
		return got.(*kmsg.ProduceResponse)
	}
	// 1000 bytes is 100/s over the first 10 s: at the bound, not over.
	if r := produce("slow", 1000); r.ThrottleMillis != 0 || len(muted) != 0 {
		t.Fatalf("within the bound: throttle %d ms, muted %v", r.ThrottleMillis, muted)
	}
	// 1000 more is twice the bound: one more 10 s window.
	if r := produce("slow", 1000); !near(int64(r.ThrottleMillis), 10000) || len(muted) != 1 || muted[0] != time.Duration(r.ThrottleMillis)*time.Millisecond {
		t.Fatalf("over the bound: throttle %d ms, muted %v", r.ThrottleMillis, muted)
	}
	if r := produce("other", 1e6); r.ThrottleMillis != 0 || len(muted) != 1 {
		t.Fatalf("a client without a quota: throttle %d ms, muted %v", r.ThrottleMillis, muted)
	}
	if got := throttledSeconds(t, reg, "produce"); !near(int64(got*1000), 10000) {
		t.Errorf("metric: %v s of produce throttle, want 10", got)
	}
}

func TestQuotaFetchGlue(t *testing.T) {
	q, reg := quotaGlue(t, clientQuota(controller.QuotaEntity{ClientID: controller.DefaultName()}, controller.QuotaConsumerByteRate, 100))
	var muted []time.Duration
	fetch := func(req *kmsg.FetchRequest, n int) *partitions.PooledFetch {
		resp := &partitions.PooledFetch{FetchResponse: kmsg.NewPtrFetchResponse()}
		resp.Topics = []kmsg.FetchResponseTopic{{Partitions: []kmsg.FetchResponseTopicPartition{{RecordBatches: make([]byte, n)}}}}
		q.fetch(mutedConn("c", &muted), req, func(kmsg.Response) {})(resp)
		return resp
	}
	// Max bytes are capped at the window's worth (10 s of 100/s), and min
	// bytes with them.
	req := kmsg.NewPtrFetchRequest()
	req.ReplicaID, req.MaxBytes, req.MinBytes = -1, 0, 5000
	r := fetch(req, 500)
	if req.MaxBytes != 1000 || req.MinBytes != 1000 {
		t.Errorf("max bytes %d, min bytes %d, want both capped at 1000", req.MaxBytes, req.MinBytes)
	}
	if r.ThrottleMillis != 0 || len(r.Topics[0].Partitions[0].RecordBatches) != 500 || len(muted) != 0 {
		t.Fatalf("within the bound: throttle %d, muted %v", r.ThrottleMillis, muted)
	}
	// 800 more is 1300 over 10 s, 30% over: answered without records, and
	// not charged, so the throttle is that of 1300, not more.
	r = fetch(req, 800)
	if !near(int64(r.ThrottleMillis), 3000) || r.Topics[0].Partitions[0].RecordBatches != nil || len(muted) != 1 || muted[0] != time.Duration(r.ThrottleMillis)*time.Millisecond {
		t.Fatalf("over the bound: throttle %d, %d record bytes, muted %v", r.ThrottleMillis, len(r.Topics[0].Partitions[0].RecordBatches), muted)
	}
	if r = fetch(req, 800); !near(int64(r.ThrottleMillis), 3000) {
		t.Errorf("the refused fetch was charged: throttle %d", r.ThrottleMillis)
	}
	// A follower's fetch is neither capped nor charged.
	follower := kmsg.NewPtrFetchRequest()
	follower.ReplicaID, follower.MaxBytes = 2, 1<<30
	if r = fetch(follower, 1<<20); r.ThrottleMillis != 0 || r.Topics[0].Partitions[0].RecordBatches == nil || follower.MaxBytes != 1<<30 {
		t.Errorf("follower fetch: max bytes %d, throttle %d", follower.MaxBytes, r.ThrottleMillis)
	}
	if got := throttledSeconds(t, reg, "fetch"); !near(int64(got*1000), 6000) {
		t.Errorf("metric: %v s of fetch throttle, want 6", got)
	}
}

func TestQuotaRequestTimeGlue(t *testing.T) {
	q, _ := quotaGlue(t, clientQuota(controller.QuotaEntity{ClientID: controller.DefaultName()}, controller.QuotaRequestPercentage, 1))
	var muted []time.Duration
	cc := mutedConn("c", &muted)
	// Requests between brokers are exempt however long they take.
	replicaFetch := kmsg.NewPtrFetchRequest()
	replicaFetch.ReplicaID = 1
	batched := kmsg.NewPtrAddPartitionsToTxnRequest()
	batched.Version = 4
	for _, req := range []kmsg.Request{replicaFetch, kmsg.NewPtrWriteTxnMarkersRequest(), batched} {
		q.requestTime(cc, req, time.Hour)
	}
	if len(muted) != 0 {
		t.Fatalf("an exempt request muted the connection: %v", muted)
	}
	// A client's second of handler time is 10% of a thread over 10 s,
	// over 1%: muted for at most one window.
	q.requestTime(cc, kmsg.NewPtrMetadataRequest(), time.Second)
	if len(muted) != 1 || !near(muted[0].Milliseconds(), 1000) {
		t.Fatalf("muted %v, want one window", muted)
	}
}

func TestQuotaConnectionGlue(t *testing.T) {
	q, _ := quotaGlue(t, clientQuota(controller.QuotaEntity{IP: controller.DefaultName()}, controller.QuotaConnectionCreationRate, 1))
	served := 0
	for range 12 {
		if d := q.connectionDelay("10.0.0.9"); d == 0 {
			served++
		} else if !near(d.Milliseconds(), 1000) {
			t.Fatalf("refused with a delay of %v, want one window", d)
		}
	}
	if served != 10 {
		t.Errorf("served %d of 12, want 10 (1/s over a 10 s window)", served)
	}
}

// TestQuotaGlueInactive: without quotas (nil manager, no image, an image
// without quotas) every path passes through.
func TestQuotaGlueInactive(t *testing.T) {
	var muted []time.Duration
	cc := mutedConn("c", &muted)
	empty, _ := quotaGlue(t)
	noImage := newClientQuotas(func() *controller.Image { return nil }, nil, zerolog.Nop())
	for _, q := range []*clientQuotas{nil, noImage, empty} {
		req := kmsg.NewPtrFetchRequest()
		req.MaxBytes = 1 << 30
		q.fetch(cc, req, func(kmsg.Response) {})(&partitions.PooledFetch{FetchResponse: kmsg.NewPtrFetchResponse()})
		q.produce(cc, kmsg.NewPtrProduceRequest(), func(kmsg.Response) {})(kmsg.NewPtrProduceResponse())
		q.requestTime(cc, kmsg.NewPtrMetadataRequest(), time.Hour)
		if d := q.connectionDelay("10.0.0.9"); d != 0 || req.MaxBytes != 1<<30 || len(muted) != 0 {
			t.Errorf("without quotas: delay %v, max bytes %d, muted %v", d, req.MaxBytes, muted)
		}
	}
}

func TestQuotaPrincipal(t *testing.T) {
	for p, want := range map[string]string{"User:alice": "alice", "": anonymousPrincipal, "User:": anonymousPrincipal, "Group:x": anonymousPrincipal} {
		if got := principalOf(&api.Conn{Principal: p}); got != want {
			t.Errorf("principal %q: user %q, want %q", p, got, want)
		}
	}
}

func throttledSeconds(t *testing.T, reg *prometheus.Registry, typ string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "fjord_quota_throttle_seconds_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "type" && l.GetValue() == typ {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}
