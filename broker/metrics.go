package broker

import (
	"time"

	"net"
	"strconv"

	"github.com/rs/zerolog"

	"github.com/fjordlog/fjord/broker/httpserve"
	"github.com/fjordlog/fjord/broker/metrics"
	"github.com/fjordlog/fjord/controller"
	"github.com/fjordlog/fjord/protocol/lifecycle"
	"github.com/fjordlog/fjord/storage"
)

// metricsSource is what the node's Prometheus series (package
// broker/metrics) read of the broker at scrape time. Each call works from
// published state: the topics map (copy-on-write, read under the read
// lock for the map only), the replicas' views and atomics, the
// coordinator's tables (copies), the metadata image. It is the one place
// to change when what it reads moves.
type metricsSource struct{ b *Broker }

func (s metricsSource) Topics() map[string][]metrics.Partition {
	topics := s.b.replicas.Topics()
	out := make(map[string][]metrics.Partition, len(topics))
	for name, t := range topics {
		var ps []metrics.Partition
		now := time.Now().UnixMilli()
		for i, p := range t.Parts {
			if p == nil {
				continue
			}
			mp := metrics.Partition{Index: int32(i), Leader: -1}
			if v := p.View(); v != nil {
				mp.Leads, mp.Leader = v.Leads(), v.Leader
				mp.Replicas, mp.ISR, mp.Removing = v.Replicas, v.ISR, v.Removing
			}
			mp.Storage = string(p.StorageState(now))
			if lg := p.Log(); lg != nil {
				mp.HasLog, mp.HW = true, p.HW()
				mp.LogStart, mp.LogEnd, mp.LogBytes = lg.StartOffset(), lg.EndOffset(), lg.Size()
			}
			ps = append(ps, mp)
		}
		out[name] = ps
	}
	return out
}

func (s metricsSource) UnderReplicated() int64 { return s.b.replicas.UnderReplicated() }

func (s metricsSource) FileCache() storage.FileCacheStats { return s.b.replicas.Files().Stats() }
func (s metricsSource) IndexCache() storage.IndexCacheStats {
	return s.b.replicas.Indexes().Stats()
}

// Groups are those whose offsets this node's coordinator has loaded: a
// group's series come from its coordinator only.
func (s metricsSource) Groups() []metrics.Group {
	c := s.b.coord
	if c == nil {
		return nil
	}
	var out []metrics.Group
	for _, g := range c.ListGroups() {
		if c.Status(g.ID) != nil {
			continue
		}
		mg := metrics.Group{ID: g.ID, Members: c.Members(g.ID)}
		for tp, off := range c.Offsets(g.ID) {
			mg.Offsets = append(mg.Offsets, metrics.GroupOffset{
				TopicPartition: metrics.TopicPartition{Topic: tp.Topic, Partition: tp.Partition}, Offset: off.Offset})
		}
		out = append(out, mg)
	}
	return out
}

func (s metricsSource) Controller() (*controller.Image, bool) {
	b := s.b
	if b.actl == nil || b.meta.Leader() != b.cfg.NodeID {
		return nil, false
	}
	return b.meta.Image(), true
}

// BrokerAddress answers on the listener named as this node's first
// client listener, else (a controller-only node has none) on bs's first
// registered one.
func (s metricsSource) BrokerAddress(img *controller.Image, bs controller.BrokerState) string {
	e, ok := controller.Endpoint{}, false
	if len(s.b.advertised) > 0 {
		e, ok = img.Endpoint(bs.ID, s.b.advertised[0].Name)
	}
	if !ok && len(bs.Endpoints) > 0 {
		e = bs.Endpoints[0]
	}
	return net.JoinHostPort(e.Host, strconv.Itoa(int(e.Port)))
}

func (s metricsSource) TopicName(id [16]byte) (string, bool) {
	t := s.b.replicas.TopicByID(id)
	if t == nil {
		return "", false
	}
	return t.Name, true
}

// serveMetrics serves m's /metrics on addr until tasks stops, and Go's
// /debug/pprof when fjord.metrics.pprof.enable (pprof) asks for it.
func serveMetrics(tasks *lifecycle.Group, addr string, m *metrics.Metrics, pprof bool, log zerolog.Logger) error {
	what := "/metrics"
	if pprof {
		what = "/metrics and /debug/pprof"
	}
	return httpserve.Listen(tasks, addr, m.Handler(pprof), what, log)
}
