package active

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/fjordlog/fjord/controller"
	"github.com/fjordlog/fjord/controller/node"
	"github.com/fjordlog/fjord/protocol"
	"github.com/fjordlog/fjord/protocol/lifecycle"
	"github.com/rs/zerolog"
)

// Raft ids are node.id+1, because raft reserves id 0 and Kafka allows
// node.id 0. Only this package sees raft ids.
func raftID(nodeID int32) uint64 { return uint64(nodeID) + 1 }
func nodeID(raftID uint64) int32 { return int32(raftID - 1) }

// Controller is a node's controller role: its member of the metadata
// quorum (a node.Node, which it constructs and owns), the active
// controller that decides while that member leads, and the CONTROLLER
// listener, which carries raft's connections and Kafka's controller
// requests side by side.
//
// One goroutine (run) owns the decisions: requests arrive on calls and are
// decided one at a time against the applied image, and each decision's
// records are proposed as one atomic batch and waited for (applied) before
// the next decision. So every decision sees every earlier one, without the
// speculative image Kafka's controller keeps; the price is one quorum
// round trip per decision, which metadata traffic affords. A node that
// does not lead answers nothing (Call returns nil: NOT_CONTROLLER).
//
// Liveness (heartbeat times) is soft state: a new leader starts with an
// empty one, so every broker gets a full session from its first tick.
//
// Lifecycle: Start joins the quorum (raft runs from then on); Serve starts
// deciding and serving the listener's Kafka half; Close stops everything
// and closes the member's log.
type Controller struct {
	cfg   Config
	m     member     // the quorum member the decisions go through: node, or a fake in tests
	node  *node.Node // the same member; nil in tests that only decide
	log   zerolog.Logger
	calls chan call
	// tasks runs every goroutine (spawn): run, the listener's mux,
	// Answer's waits, the broker watches. Close stops it.
	tasks lifecycle.Group
	// ctx is tasks' context; it ends at Close: run returns, proposals and
	// metadata fetches in flight give up.
	ctx   context.Context
	done  chan struct{} // closed when run returns (or at Close if never served): callers stop waiting
	serve sync.Once

	// arrivals are the heartbeats that arrived since the loop's last tick,
	// by broker (Call writes, the loop takes).
	arrivals struct {
		sync.Mutex
		m map[int32]arrival
	}

	mux    *connMux         // nil without a CONTROLLER listener
	server *protocol.Server // the listener's Kafka half; set by Serve

	// refused carries the watches' findings to run (watch.go).
	refused chan refusedBroker

	// Owned by run.
	live       *controller.Liveness // never nil; replaced on each change of leadership
	watches    watchSet             // while leading (watch.go)
	wasLeader  bool
	lastRebal  time.Time
	proposeTTL time.Duration
}

// Start joins the metadata quorum: it opens the raft log in cfg.Dir, takes
// over cfg.Listener for raft connections and starts the member. Requests
// are not decided, nor the listener's Kafka half served, until Serve.
func Start(cfg Config) (*Controller, error) {
	fail := func(err error) (*Controller, error) {
		if cfg.Listener != nil {
			cfg.Listener.Close()
		}
		return nil, err
	}
	if err := cfg.validateQuorum(); err != nil {
		return fail(err)
	}
	c, err := newController(cfg, nil)
	if err != nil {
		return fail(err)
	}
	voters := map[uint64]string{}
	for id, addr := range cfg.Voters {
		voters[raftID(id)] = addr
	}
	if len(voters) == 0 {
		voters[raftID(cfg.NodeID)] = "127.0.0.1:0"
	}
	nc := node.Config{
		ID:           raftID(cfg.NodeID),
		Voters:       voters,
		Dir:          cfg.Dir,
		FS:           cfg.FS,
		TickInterval: cfg.TickInterval,
		Dial:         cfg.Dial,
		Authenticate: raftAuthenticator(cfg.RaftSASL),
		Logger:       cfg.Logger.With().Str("component", "quorum").Logger(),
	}
	if cfg.Listener != nil {
		c.mux = newConnMux(cfg.Listener, cfg.TLS, cfg.Logger)
		c.mux.sasl, c.mux.failedAuthDelay = cfg.SASL, cfg.FailedAuthDelay
		c.mux.authorize, c.mux.tlsPrincipal = cfg.AuthorizeRaft, cfg.TLSPrincipal
		c.mux.maxRaft = raftConnsPerVoter * max(len(voters), 2)
		nc.Listener = c.mux.raft
	} else {
		nc.Listen = "127.0.0.1:0"
	}
	n, err := node.Start(nc)
	if err != nil {
		return fail(fmt.Errorf("metadata quorum: %w", err))
	}
	c.node, c.m = n, n
	if c.mux != nil {
		c.spawn(c.mux.run)
	}
	return c, nil
}

// spawn starts a goroutine Close waits for; false, and f not run, once
// Close has begun.
func (c *Controller) spawn(f func()) bool { return c.tasks.Go(f) }

// Serve starts deciding and, with a CONTROLLER listener, serving its Kafka
// half. Later calls, and calls after Close, do nothing.
func (c *Controller) Serve() {
	c.serve.Do(func() {
		c.spawn(c.run)
		if c.mux == nil {
			return
		}
		c.server = protocol.NewServer(protocol.ServerConfig{
			MaxFrameBytes: c.cfg.MaxFrameBytes,
			MaxInFlight:   16,
			Admit:         c.cfg.Admit,
			Budget:        c.cfg.Budget,
			IdleTimeout:   c.cfg.IdleTimeout,
			DrainTimeout:  5 * time.Second,
			// The mux did the TLS handshake (mux.go); SASL comes after it,
			// as on a client listener.
			SASL:            c.cfg.SASL,
			FailedAuthDelay: c.cfg.FailedAuthDelay,
			TLSPrincipal:    c.cfg.TLSPrincipal,
		}, c.cfg.KafkaHandler, c.cfg.KafkaVersions, c.cfg.Logger.With().Str("listener", "CONTROLLER").Logger())
		c.server.Serve(c.mux.kafka)
	})
}

// Close stops deciding (callers waiting get nil), closes the listener and
// its connections, waits for every goroutine and closes the quorum
// member's log. It is idempotent; it returns the member's Close error.
func (c *Controller) Close() error {
	c.tasks.Cancel()
	c.serve.Do(func() { close(c.done) }) // never served: nothing will close it
	if c.mux != nil {
		c.mux.ln.Close()
	}
	// Serve sets server under serve's Once, which the Do above waited for.
	if c.server != nil {
		c.server.Close()
	}
	c.tasks.Stop()
	if c.node == nil {
		return nil
	}
	return c.node.Close()
}

// Image is the latest image the member applied.
func (c *Controller) Image() *controller.Image { return c.m.Image() }

// WaitFor blocks until pred holds for the latest image, ctx ends or the
// member closes. pred runs on the caller's goroutine.
func (c *Controller) WaitFor(ctx context.Context, pred func(*controller.Image) bool) error {
	return c.node.WaitFor(ctx, pred)
}

// Leader is the node id of the active controller as this member knows it,
// or -1.
func (c *Controller) Leader() int32 {
	if l := c.node.Leader(); l != 0 {
		return nodeID(l)
	}
	return -1
}
