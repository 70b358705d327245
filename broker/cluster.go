package broker

import (
	"context"
	"crypto/rand"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/fjordlog/fjord/controller"
	"github.com/fjordlog/fjord/protocol/lifecycle"
)

// A broker's life in the cluster:
//
//	register ──► heartbeat (fenced) ──► caught up: unfenced ──► serving
//	   ▲                                       │
//	   └──── STALE_BROKER_EPOCH / not registered (e.g. fenced by silence)
//
// Meanwhile the replica manager's publish loop applies every new metadata
// image to the local replicas (broker/replicamgr).

// lifecycle registers this broker and heartbeats until the broker stops;
// ready closes the first time the controller reports it unfenced.
func (b *Broker) lifecycle() {
	ctx := b.ctx
	var incarnation [16]byte
	rand.Read(incarnation[:])
	interval := time.Duration(b.cfg.BrokerHeartbeatIntervalMs) * time.Millisecond
	// Until unfenced, heartbeat faster: unfencing is what start-up waits on.
	fast := min(interval, 100*time.Millisecond)
	readyOnce := false
	defer b.finishShutdown()
	for ctx.Err() == nil && !b.shuttingDown.Load() {
		epoch, err := b.ctl.Register(ctx, incarnation)
		if err != nil {
			if ctx.Err() == nil {
				b.log.Warn().Err(err).Msg("broker registration failed; retrying")
				lifecycle.Sleep(ctx, time.Second)
			}
			continue
		}
		b.brokerEpoch.Store(epoch)
		b.log.Info().Int64("broker_epoch", epoch).Msg("registered with the controller")
		failed := 0 // heartbeats in a row without an answer
		for ctx.Err() == nil {
			shutdown := b.shuttingDown.Load()
			resp, err := b.ctl.Heartbeat(ctx, epoch, int64(b.replicas.AppliedVersion()), shutdown)
			if err != nil {
				if failed++; failed == 1 && ctx.Err() == nil {
					b.log.Warn().Err(err).Msg("heartbeat failed; retrying (logged again once answered)")
				}
				b.sleepHeartbeat(ctx, fast)
				continue
			}
			if failed > 0 {
				b.log.Info().Int("failed", failed).Msg("heartbeat answered again")
				failed = 0
			}
			if resp.code == kerr.StaleBrokerEpoch.Code || resp.code == kerr.BrokerIDNotRegistered.Code {
				if shutdown {
					return // nothing left to fence
				}
				b.log.Warn().Int16("code", resp.code).Msg("controller no longer knows this registration; registering again")
				break
			}
			if shutdown && resp.code == 0 && resp.shouldShutdown {
				// Stop once the local replicas have stepped down too.
				b.waitImage(ctx, func(img *controller.Image) bool {
					bs, ok := img.Broker(b.cfg.NodeID)
					return !ok || bs.Fenced || bs.Epoch != epoch
				})
				return
			}
			if resp.code != 0 || shutdown {
				b.sleepHeartbeat(ctx, fast)
				continue
			}
			b.fenced.Store(resp.fenced)
			if !resp.fenced && !readyOnce {
				// Serve once the local replicas reflect the unfencing (and
				// the leaderships it brought back), not merely once the
				// controller has decided it. The wait lasts at most a
				// heartbeat interval: a node slow to apply a large image
				// (a restart among a thousand partitions) keeps its session
				// meanwhile instead of being fenced again for silence.
				wctx, cancel := context.WithTimeout(ctx, interval)
				applied := b.waitImage(wctx, func(img *controller.Image) bool {
					bs, ok := img.Broker(b.cfg.NodeID)
					return ok && !bs.Fenced && bs.Epoch == epoch
				})
				cancel()
				if !applied {
					continue
				}
				readyOnce = true
				b.log.Info().Uint64("metadata_version", b.meta.Image().Version()).Msg("unfenced: serving clients")
				close(b.ready)
			}
			if resp.fenced {
				b.sleepHeartbeat(ctx, fast)
			} else {
				b.sleepHeartbeat(ctx, interval)
			}
		}
	}
}

// sleepHeartbeat waits d between heartbeats, less if a controlled
// shutdown begins meanwhile.
func (b *Broker) sleepHeartbeat(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	case <-b.shutdownWake:
		if d > 100*time.Millisecond {
			lifecycle.Sleep(ctx, 20*time.Millisecond) // shutdown heartbeats: a short pause
		}
	}
}

// controlledShutdown is Kafka's controlled shutdown, run first by Close:
// a heartbeat asking to shut down makes the controller fence this broker
// and move its leaderships to other ISR members at once, so clients
// re-route now instead of after broker.session.timeout.ms, and the next
// start registers without waiting out the old session. Bounded by the
// session timeout and 5 s (docker stop allows 10 s before SIGKILL): a
// broker that cannot reach a controller (the last nodes of a cluster
// stopping together) stops anyway, as if it had crashed.
func (b *Broker) controlledShutdown() {
	if !b.cfg.HasRole("broker") || b.brokerEpoch.Load() <= 0 {
		return
	}
	start := time.Now()
	b.shuttingDown.Store(true)
	close(b.shutdownWake)
	limit := min(time.Duration(b.cfg.BrokerSessionTimeoutMs)*time.Millisecond, 5*time.Second)
	select {
	case <-b.shutdownDone:
		b.log.Info().Dur("took", time.Since(start)).Msg("controlled shutdown: fenced; leaderships moved to other replicas")
	case <-time.After(limit):
		b.log.Warn().Dur("waited", limit).Msg("controlled shutdown: the controller did not confirm; stopping anyway")
	}
}

// finishShutdown tells a waiting controlledShutdown that lifecycle is done.
func (b *Broker) finishShutdown() {
	if b.shuttingDown.Load() {
		close(b.shutdownDone)
	}
}

// image returns the metadata image the local replicas were last matched
// to: what this broker answers from.
func (b *Broker) image() *controller.Image { return b.replicas.Image() }

// endpoint returns broker id's address on the named listener.
func endpoint(img *controller.Image, id int32, listener string) (controller.Endpoint, bool) {
	bs, ok := img.Broker(id)
	if !ok {
		return controller.Endpoint{}, false
	}
	for _, e := range bs.Endpoints {
		if e.Name == listener {
			return e, true
		}
	}
	return controller.Endpoint{}, false
}

// waitImage waits until the local replicas reflect an image satisfying
// pred, so a client that created a topic here sees it here at once.
func (b *Broker) waitImage(ctx context.Context, pred func(*controller.Image) bool) bool {
	return b.replicas.WaitImage(ctx, pred)
}
