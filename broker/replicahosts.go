package broker

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/rs/zerolog"

	"github.com/fjordlog/fjord/broker/config"
	"github.com/fjordlog/fjord/broker/replica"
	"github.com/fjordlog/fjord/broker/replicamgr"
	"github.com/fjordlog/fjord/broker/sharecoord"
	"github.com/fjordlog/fjord/controller"
)

// newReplicaManager builds the node's replica manager (broker/replicamgr)
// from the broker's config and parts. Made before the metadata log starts
// (metaRef) and after the coordinators, ctl and the fetchers it calls.
func (b *Broker) newReplicaManager() *replicamgr.Manager {
	return replicamgr.New(b.ctx, replicamgr.Config{
		NodeID:                 b.cfg.NodeID,
		LogDir:                 b.logDir,
		MetadataDir:            metadataDir,
		FS:                     b.fs,
		Logger:                 b.log,
		ReplicaLagTimeMaxMs:    b.cfg.ReplicaLagTimeMaxMs,
		PartitionOpenTimeoutMs: b.cfg.PartitionOpenTimeoutMs,
		LogFlushStallMaxMs:     b.cfg.LogFlushStallMaxMs,
		Tiering:                b.tier != nil,
		LogOpenFilesMax:        b.cfg.LogOpenFilesMax,
		LogIndexCacheBytes:     b.cfg.LogIndexCacheBytes,
		Metadata:               metaRef{b},
		Go:                     b.goLoop,
		BrokerEpoch:            func() int64 { return b.life.Epoch() }, // b.life is set after, read after Start
		AlterPartitions:        b.ctl.AlterPartitions,
		AskPeer: func(ctx context.Context, peer int32, req *kmsg.MetadataRequest, timeout time.Duration) *kmsg.MetadataResponse {
			kresp, err := b.peers.ask(ctx, b, peer, req, timeout)
			if err != nil {
				return nil
			}
			resp, _ := kresp.(*kmsg.MetadataResponse)
			return resp
		},
		Settings: func(overrides map[string]string) replica.Settings { return config.SettingsFor(b.live(), overrides) },
		// The dynamic broker configs changed: the running configuration
		// (and the TLS listeners) follow, before the replicas' settings.
		Reconfigure: func(img *controller.Image) {
			live := config.Live(&b.cfg, img, b.log)
			if old := b.liveCfg.Swap(&live); old != nil {
				b.log.Info().Msg("dynamic broker configs changed: the running configuration follows")
			}
			b.tls.Reconfigure(img.BrokerConfigs()[strconv.Itoa(int(b.cfg.NodeID))])
		},
		// A deleted topic's committed offsets and share state go with it.
		TopicsGone: func(gone []*replicamgr.Topic) {
			ids, names := make([][16]byte, len(gone)), make([]string, len(gone))
			for i, t := range gone {
				ids[i], names[i] = t.ID, t.Name
			}
			b.shares.TopicsDeleted(ids)
			b.coord.TopicsDeleted(names)
		},
		Fetchers:          b.fetch,
		CoordinatorTopics: []string{offsetsTopic, txnTopic, sharecoord.Topic},
		Coordinate: func(t *replicamgr.Topic) {
			switch t.Name {
			case offsetsTopic:
				b.coord.Follow(t.Parts)
			case txnTopic:
				b.txns.Follow(t.Parts)
			case sharecoord.Topic:
				b.shares.Follow(t.Parts)
			}
		},
		Metrics: replicamgr.Metrics{FlushTime: b.metrics.FlushObserver(), ISRShrinks: b.metrics.ISRShrinks, ISRExpands: b.metrics.ISRExpands},
	})
}

// peerClientIDPrefix starts the client id of a broker's peer clients
// (peerClientID): a request with it, on the inter-broker listener, comes
// from another broker (discoveryHost.FromPeer).
const peerClientIDPrefix = "fjord-peer-"

func peerClientID(node int32) string { return peerClientIDPrefix + strconv.Itoa(int(node)) }

// ask sends req to peer's inter-broker listener through its peer client
// and waits at most timeout for the answer. A failed ask while ctx is
// live (an ask timed out included) drops the client, so the next ask
// dials afresh: a peer that stopped answering may have restarted at the
// same address.
func (pc *peerClients) ask(ctx context.Context, b *Broker, peer int32, req kmsg.Request, timeout time.Duration) (kmsg.Response, error) {
	cl, err := pc.client(b, peer)
	if err != nil {
		return nil, err
	}
	seeds := cl.SeedBrokers()
	if len(seeds) == 0 {
		return nil, fmt.Errorf("peer client of broker %d has no broker", peer)
	}
	askCtx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	resp, err := seeds[0].Request(askCtx, req)
	if err != nil {
		if ctx.Err() == nil {
			pc.drop(peer, cl)
		}
		return nil, fmt.Errorf("asking broker %d (%T): %w", peer, req, err)
	}
	return resp, nil
}

// live is the running configuration: the static one with the applied
// image's dynamic broker configs (config.Live, stored by Reconfigure).
func (b *Broker) live() *config.Config {
	if c := b.liveCfg.Load(); c != nil {
		return c
	}
	return &b.cfg
}

// metaRef is b.meta read at each call: the replica manager is made before
// startQuorum sets it, and reads it only after.
type metaRef struct{ b *Broker }

func (r metaRef) Image() *controller.Image { return r.b.meta.Image() }
func (r metaRef) WaitFor(ctx context.Context, pred func(*controller.Image) bool) error {
	return r.b.meta.WaitFor(ctx, pred)
}

// readFailed handles an error from reading p's log for a fetch: a damaged
// log goes to its core (replica.Partition.ReadFailed), which logs it once
// and decides — resign, keep leading, or stop fetching and repair (see the
// replica package).
func (b *Broker) readFailed(p *replica.Partition, err error) {
	if p.ReadFailed(err) {
		b.metrics.LogDamage.Inc()
	}
}

// fetchHost gives the replica fetchers what they need of the broker.
type fetchHost struct{ b *Broker }

func (h fetchHost) Go(fn func()) bool       { return h.b.goLoop(fn) }
func (h fetchHost) NodeID() int32           { return h.b.cfg.NodeID }
func (h fetchHost) BrokerEpoch() int64      { return h.b.life.Epoch() }
func (h fetchHost) Logger() *zerolog.Logger { return &h.b.log }

// ClientOpts are the replica fetchers' extra client options: TLS when the
// inter-broker listener is SSL, SASL when it is SASL (interBrokerOpts).
func (h fetchHost) ClientOpts() []kgo.Opt { return h.b.interBrokerOpts }
func (h fetchHost) Repaired(*replica.Partition) {
	h.b.metrics.LogRepairs.Inc()
}

// LeaderAddr is broker id's endpoint on the inter-broker listener.
func (h fetchHost) LeaderAddr(id int32) (string, error) {
	e, ok := h.b.image().Endpoint(id, h.b.interBrokerListener())
	if !ok {
		return "", fmt.Errorf("leader %d has no %s endpoint", id, h.b.interBrokerListener())
	}
	return net.JoinHostPort(e.Host, strconv.Itoa(int(e.Port))), nil
}

// interBrokerListener names the listener this broker fetches through: the
// leader's advertised endpoint of that name (inter.broker.listener.name,
// else this broker's first client listener).
func (b *Broker) interBrokerListener() string {
	if n := config.NormaliseListenerName(b.cfg.InterBrokerListenerName); n != "" {
		return n
	}
	if len(b.advertised) == 0 {
		return ""
	}
	return b.advertised[0].Name
}
