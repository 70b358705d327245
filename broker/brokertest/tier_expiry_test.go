package brokertest

import (
	"context"
	"errors"
	"io"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/fjordlog/fjord/broker/config"
	"github.com/fjordlog/fjord/broker/tier"
	"github.com/fjordlog/fjord/storage/remote"
)

// gateStore holds the Gets of .index objects while hold is set, until
// release closes: a read caught between finding its segment and reading it.
type gateStore struct {
	remote.Store
	hold    atomic.Bool
	held    atomic.Int64
	release chan struct{}
}

func (s *gateStore) Get(ctx context.Context, key string, off, n int64) (io.ReadCloser, error) {
	if s.hold.Load() && strings.HasSuffix(key, ".index") {
		s.held.Add(1)
		select {
		case <-s.release:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return s.Store.Get(ctx, key, off, n)
}

// TestTierReadRacesExpiry: a consumer's read of a copied segment that
// remote retention deletes while the read is under way finds its objects
// missing. That is the log start moving, not damage: the fetch answers
// OFFSET_OUT_OF_RANGE, as Kafka does below the log start, and nothing is
// counted in fjord_remote_read_damaged_total.
func TestTierReadRacesExpiry(t *testing.T) {
	const topic = "tier-expiry"
	store := &gateStore{Store: remote.NewMemStore(), release: make(chan struct{})}
	metricsAddr, err := freeAddr()
	if err != nil {
		t.Fatal(err)
	}
	c, _, _ := tieredOneNode(t, store, topic, 60, 100, 5, func(cfg *config.Config) { cfg.MetricsAddr = metricsAddr })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// Fetch v12 names topics: a client of Kafka 3.0's versions.
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.Addrs()...), kgo.MaxVersions(kversion.V3_0_0()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()

	store.hold.Store(true)
	if p := fetchNoWait(t, ctx, cl, topic, 0); p.ErrorCode != 0 || len(p.RecordBatches) != 0 {
		t.Fatalf("first fetch of offset 0: code %d, %d bytes; want the read started, nothing yet", p.ErrorCode, len(p.RecordBatches))
	}
	eventually(t, 30*time.Second, "the read of offset 0 held in the store", func() bool { return store.held.Load() > 0 })

	// Every record is older than a second: retention expires the copy.
	rs, err := kadm.NewClient(cl).AlterTopicConfigs(ctx, []kadm.AlterConfig{{Name: "retention.ms", Value: kadm.StringPtr("1000")}}, topic)
	if err != nil || rs[0].Err != nil {
		t.Fatalf("alter retention.ms: %v %v", rs, err)
	}
	eventually(t, 60*time.Second, "the segment of offset 0 deleted from the store", func() bool {
		r, err := c.Broker(1).Replica(topic, 0)
		if err != nil {
			return false
		}
		if _, ok := tier.SegmentFor(r.Remote, 0); ok {
			return false
		}
		for _, k := range storeKeys(t, store.Store) {
			if strings.Contains(k, "/00000000000000000000-") {
				return false
			}
		}
		return true
	})
	store.hold.Store(false)
	close(store.release)

	var code int16
	eventually(t, 30*time.Second, "the held read's answer", func() bool {
		p := fetchNoWait(t, ctx, cl, topic, 0)
		code = p.ErrorCode
		return code != 0
	})
	if !errors.Is(kerr.ErrorForCode(code), kerr.OffsetOutOfRange) {
		t.Errorf("fetch of offset 0 after its segment expired under the read: %v, want OFFSET_OUT_OF_RANGE", kerr.ErrorForCode(code))
	}
	if v := metric(t, metricsAddr, "fjord_remote_read_damaged_total"); v != 0 {
		t.Errorf("fjord_remote_read_damaged_total = %v after a read raced expiry, want 0", v)
	}
}
