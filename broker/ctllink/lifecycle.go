package ctllink

import (
	"context"
	"crypto/rand"
	"errors"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
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

// Lifecycle is a broker's membership of the cluster: Run registers it and
// heartbeats until it stops; Shutdown is Kafka's controlled shutdown.
//
// Run is the one sender of heartbeats. Shutdown sets shuttingDown and
// closes wake; Run then asks the controller to fence this broker and
// closes done once it is (or once there is nothing to ask).
type Lifecycle struct {
	cfg LifecycleConfig

	epoch  atomic.Int64 // from the last registration; 0 before the first
	fenced atomic.Bool  // as the last heartbeat said

	shuttingDown atomic.Bool
	wake         chan struct{}
	done         chan struct{}
}

// LifecycleConfig is what a Lifecycle needs of its broker.
type LifecycleConfig struct {
	// Client carries the registrations and heartbeats; its node id and
	// heartbeat settings are the broker's.
	Client *Client
	// Registration is what the broker registers.
	Registration Registration
	// Replicas are the local replicas (replicamgr.Manager): the metadata
	// offset they have applied goes in each heartbeat, and unfencing
	// waits until they reflect it.
	Replicas Replicas
	// MetadataVersion is the metadata log's latest applied version, for
	// the log line saying the broker serves.
	MetadataVersion func() uint64
	// Ready is called once, the first time the controller reports the
	// broker unfenced and the local replicas reflect it.
	Ready  func()
	Logger zerolog.Logger
}

// Replicas is what a Lifecycle reads of the local replicas.
type Replicas interface {
	// AppliedVersion is the version of the image they were last matched to.
	AppliedVersion() uint64
	// WaitImage waits until they reflect an image satisfying pred, and
	// reports whether they do; false when ctx ended first.
	WaitImage(ctx context.Context, pred func(*controller.Image) bool) bool
}

// NewLifecycle returns a broker's lifecycle, not yet running.
func NewLifecycle(cfg LifecycleConfig) *Lifecycle {
	return &Lifecycle{cfg: cfg, wake: make(chan struct{}), done: make(chan struct{})}
}

// Epoch is the broker epoch of the last registration, 0 before the first.
func (l *Lifecycle) Epoch() int64 { return l.epoch.Load() }

// Fenced is what the last heartbeat said of this broker.
func (l *Lifecycle) Fenced() bool { return l.fenced.Load() }

// Run registers this broker and heartbeats until ctx ends or a controlled
// shutdown finishes; Ready is called the first time the controller reports
// it unfenced.
// registerBackoff paces registration retries: quick while a controller is
// being elected at start-up, at most one ask per 2 s after.
var registerBackoff = lifecycle.Backoff{Initial: 200 * time.Millisecond, Max: 2 * time.Second}

func (l *Lifecycle) Run(ctx context.Context) {
	c, log, nodeID := l.cfg.Client, l.cfg.Logger, l.cfg.Client.cfg.NodeID
	var incarnation [16]byte
	rand.Read(incarnation[:])
	interval := c.cfg.HeartbeatInterval
	// Until unfenced, heartbeat faster: unfencing is what start-up waits on.
	fast := min(interval, 100*time.Millisecond)
	readyOnce := false
	defer l.finishShutdown()
	// Registration retries until it succeeds: a controller is being
	// elected at start-up, or this broker's configuration is wrong
	// (INCONSISTENT_CLUSTER_ID), which only a restart fixes. The log says
	// each different failure once, not every attempt.
	regFailures, lastRegErr := 0, ""
	for ctx.Err() == nil && !l.shuttingDown.Load() {
		epoch, err := c.register(ctx, l.cfg.Registration, incarnation)
		if err != nil {
			if ctx.Err() == nil {
				regFailures++
				if msg := err.Error(); msg != lastRegErr {
					lastRegErr = msg
					ev := log.Warn()
					if errors.Is(err, kerr.InconsistentClusterID) {
						ev = log.Error().Str("cluster_id", l.cfg.Registration.ClusterID)
						msg = "the controllers belong to another cluster: this broker cannot join it (check controller.quorum.voters and cluster.id); retrying"
					} else {
						msg = "broker registration failed; retrying (logged again if the failure changes)"
					}
					ev.Err(err).Msg(msg)
				}
				lifecycle.Sleep(ctx, registerBackoff.Delay(regFailures))
			}
			continue
		}
		l.epoch.Store(epoch)
		log.Info().Int64("broker_epoch", epoch).Int("failed_attempts", regFailures).Msg("registered with the controller")
		regFailures, lastRegErr = 0, ""
		// The controller unfences a broker whose heartbeat shows it has
		// applied the metadata up to its own registration (the epoch is
		// that record's offset): wait for that first, so the first
		// heartbeat unfences instead of the one after a fast interval.
		l.awaitApplied(ctx, epoch, fast)
		failed := 0 // heartbeats in a row without an answer
		for ctx.Err() == nil {
			shutdown := l.shuttingDown.Load()
			resp, err := c.heartbeat(ctx, epoch, int64(l.cfg.Replicas.AppliedVersion()), shutdown)
			if err != nil {
				if failed++; failed == 1 && ctx.Err() == nil {
					log.Warn().Err(err).Msg("heartbeat failed; retrying (logged again once answered)")
				}
				l.sleepHeartbeat(ctx, fast)
				continue
			}
			if failed > 0 {
				log.Info().Int("failed", failed).Msg("heartbeat answered again")
				failed = 0
			}
			if resp.code == kerr.StaleBrokerEpoch.Code || resp.code == kerr.BrokerIDNotRegistered.Code {
				if shutdown {
					return // nothing left to fence
				}
				log.Warn().Int16("code", resp.code).Msg("controller no longer knows this registration; registering again")
				break
			}
			if shutdown && resp.code == 0 && resp.shouldShutdown {
				// Stop once the local replicas have stepped down too.
				l.cfg.Replicas.WaitImage(ctx, func(img *controller.Image) bool {
					bs, ok := img.Broker(nodeID)
					return !ok || bs.Fenced || bs.Epoch != epoch
				})
				return
			}
			if resp.code != 0 || shutdown {
				l.sleepHeartbeat(ctx, fast)
				continue
			}
			l.fenced.Store(resp.fenced)
			if !resp.fenced && !readyOnce {
				// Serve once the local replicas reflect the unfencing (and
				// the leaderships it brought back), not merely once the
				// controller has decided it. The wait lasts at most a
				// heartbeat interval: a node slow to apply a large image
				// (a restart among a thousand partitions) keeps its session
				// meanwhile instead of being fenced again for silence.
				wctx, cancel := context.WithTimeout(ctx, interval)
				applied := l.cfg.Replicas.WaitImage(wctx, func(img *controller.Image) bool {
					bs, ok := img.Broker(nodeID)
					return ok && !bs.Fenced && bs.Epoch == epoch
				})
				cancel()
				if !applied {
					continue
				}
				readyOnce = true
				log.Info().Uint64("metadata_version", l.cfg.MetadataVersion()).Msg("unfenced: serving clients")
				l.cfg.Ready()
			}
			switch {
			case resp.fenced && int64(l.cfg.Replicas.AppliedVersion()) < epoch:
				l.awaitApplied(ctx, epoch, fast)
			case resp.fenced:
				l.sleepHeartbeat(ctx, fast)
			default:
				l.sleepHeartbeat(ctx, interval)
			}
		}
	}
}

// awaitApplied waits, at most d, until the local replicas have applied
// the metadata log up to offset (a broker's registration: its epoch).
func (l *Lifecycle) awaitApplied(ctx context.Context, offset int64, d time.Duration) {
	wctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	l.cfg.Replicas.WaitImage(wctx, func(img *controller.Image) bool { return int64(img.Version()) >= offset })
	// AppliedVersion is stored just after the image is published (once
	// the coordinators have been handed their partitions): a short poll,
	// within the same bound, covers that gap.
	for int64(l.cfg.Replicas.AppliedVersion()) < offset && wctx.Err() == nil {
		lifecycle.Sleep(wctx, time.Millisecond)
	}
}

// sleepHeartbeat waits d between heartbeats, less if a controlled
// shutdown begins meanwhile.
func (l *Lifecycle) sleepHeartbeat(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	case <-l.wake:
		if d > 100*time.Millisecond {
			lifecycle.Sleep(ctx, 20*time.Millisecond) // shutdown heartbeats: a short pause
		}
	}
}

// Shutdown is Kafka's controlled shutdown, run first by the broker's
// Close: a heartbeat asking to shut down makes the controller fence this
// broker and move its leaderships to other ISR members at once, so
// clients re-route now instead of after broker.session.timeout.ms, and
// the next start registers without waiting out the old session. Bounded
// by the session timeout and 5 s (docker stop allows 10 s before
// SIGKILL): a broker that cannot reach a controller (the last nodes of a
// cluster stopping together) stops anyway, as if it had crashed. A broker
// never registered has nothing to ask. Called at most once.
func (l *Lifecycle) Shutdown() {
	if l.epoch.Load() <= 0 {
		return
	}
	log := l.cfg.Logger
	start := time.Now()
	l.shuttingDown.Store(true)
	close(l.wake)
	limit := min(l.cfg.Client.cfg.SessionTimeout, 5*time.Second)
	select {
	case <-l.done:
		log.Info().Dur("took", time.Since(start)).Msg("controlled shutdown: fenced; leaderships moved to other replicas")
	case <-time.After(limit):
		log.Warn().Dur("waited", limit).Msg("controlled shutdown: the controller did not confirm; stopping anyway")
	}
}

// finishShutdown tells a waiting Shutdown that Run is done.
func (l *Lifecycle) finishShutdown() {
	if l.shuttingDown.Load() {
		close(l.done)
	}
}
