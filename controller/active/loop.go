package active

import (
	"context"
	"errors"
	"time"

	"github.com/fjordlog/fjord/controller"
	"github.com/fjordlog/fjord/controller/node"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// member is what the active controller needs of its quorum member: a
// *node.Node, or a fake in tests.
type member interface {
	// Image is the latest applied image.
	Image() *controller.Image
	// IsLeader reports whether this member leads the quorum.
	IsLeader() bool
	// Propose commits r and returns its index once this member has applied
	// it; see node.Node.Propose for its errors.
	Propose(ctx context.Context, r controller.Record) (uint64, error)
}

// tickInterval is how often the loop checks broker sessions and, when it
// is due, preferred leadership.
const tickInterval = 200 * time.Millisecond

// proposeTimeout bounds one decision's wait for its records to apply.
const proposeTimeout = 10 * time.Second

// call is one request for the active controller.
type call struct {
	ctx     context.Context
	req     kmsg.Request
	reply   chan answer // buffered 1
	arrived int64       // ms, when Call took it
}

// answer is a call's outcome: the response (nil: not decided here) and
// the metadata offset of the records it committed (decide).
type answer struct {
	resp   kmsg.Response
	offset uint64
}

// newController returns a Controller deciding through m that is not yet
// serving; Start gives it a node, tests a fake.
func newController(cfg Config, m member) (*Controller, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	c := &Controller{cfg: cfg, m: m, log: cfg.Logger.With().Str("component", "controller").Logger(),
		calls: make(chan call, 64), done: make(chan struct{}), proposeTTL: proposeTimeout, live: controller.NewLiveness()}
	c.arrivals.m = map[int32]arrival{}
	c.refused, c.watches = make(chan refusedBroker, 16), watchSet{}
	c.ctx = c.tasks.Context()
	return c, nil
}

// Call hands req to the loop and waits for its response: one of the
// controller requests the package doc lists, answered as Kafka's
// controller answers it (decide.go). A nil response means this node is
// not the active controller (now), ctx ended first, or req is not one of
// them; the caller answers NOT_CONTROLLER or retries elsewhere. The caller
// keeps req; the response is the caller's.
//
// offset is the metadata offset (image version) from which the records
// the answer committed are in the image, 0 when it committed none: a
// broker that waits until its own image reaches it shows its client what
// the answer says was done (Answer carries it over the wire, OffsetTag).
func (c *Controller) Call(ctx context.Context, req kmsg.Request) (resp kmsg.Response, offset uint64) {
	if hb, ok := req.(*kmsg.BrokerHeartbeatRequest); ok {
		c.arrived(hb.BrokerID, hb.BrokerEpoch)
	}
	cl := call{ctx: ctx, req: req, reply: make(chan answer, 1), arrived: time.Now().UnixMilli()}
	select {
	case c.calls <- cl:
	case <-ctx.Done():
		return nil, 0
	case <-c.done:
		return nil, 0
	}
	select {
	case a := <-cl.reply:
		return a.resp, a.offset
	case <-ctx.Done():
		return nil, 0
	case <-c.done:
		return nil, 0
	}
}

// run decides requests and fences silent brokers until Close.
func (c *Controller) run() {
	defer close(c.done)
	tick := time.NewTicker(tickInterval)
	defer tick.Stop()
	for {
		select {
		case <-c.ctx.Done():
			return
		case <-tick.C:
			// Heartbeats already queued (behind a slow proposal, say) are
			// heard before anyone is fenced for silence: select picks at
			// random among ready cases, and the tick must not win over
			// them. At most a channel's worth.
			for range cap(c.calls) {
				select {
				case cl := <-c.calls:
					c.handle(cl)
					continue
				default:
				}
				break
			}
			// After the calls: one of them may have found the leadership
			// gone (and the liveness with it).
			if !c.leading() {
				continue
			}
			if c.cfg.AutoLeaderRebalance && time.Since(c.lastRebal) >= c.cfg.LeaderImbalanceCheckInterval {
				c.lastRebal = time.Now()
				if recs := controller.ElectPreferred(c.m.Image()); len(recs) > 0 {
					if _, err := c.propose(c.ctx, recs); err == nil {
						c.log.Info().Int("partitions", len(recs)).Msg("leadership moved back to preferred replicas")
					}
				}
			}
			if !c.leading() {
				continue
			}
			c.completeMoves()
			if !c.leading() {
				continue
			}
			now, img := time.Now().UnixMilli(), c.m.Image()
			for id, a := range c.takeArrivals() {
				c.live.Heard(img, id, a.epoch, a.at)
			}
			if recs := c.live.Tick(img, now, c.sessionMs()); len(recs) > 0 {
				var fenced []int32
				for _, r := range recs {
					if f, ok := r.Body.(controller.FenceBroker); ok {
						fenced = append(fenced, f.ID)
					}
				}
				c.log.Warn().Ints32("brokers", fenced).Int("partition_changes", len(recs)-len(fenced)).
					Msg("broker session expired: fencing, moving its leaderships")
				c.propose(c.ctx, recs)
			}
			c.syncWatches(c.m.Image())
		case rb := <-c.refused:
			if w := c.watches[rb.id]; w != nil && w.epoch == rb.epoch {
				w.cancel() // ended; the next tick watches again if still wanted
				delete(c.watches, rb.id)
			}
			if !c.leading() {
				continue
			}
			if recs := c.live.Refused(c.m.Image(), rb.id, rb.epoch, time.Now().UnixMilli()); len(recs) > 0 {
				c.log.Warn().Int32("broker", rb.id).Int("partition_changes", len(recs)-1).
					Msg("broker's listeners refuse connections (its process is gone): fencing it now, moving its leaderships")
				c.propose(c.ctx, recs)
			}
		case cl := <-c.calls:
			c.handle(cl)
		}
	}
}

// handle decides one call, if this node still leads and its caller still
// waits.
func (c *Controller) handle(cl call) {
	if cl.ctx.Err() != nil || !c.leading() {
		cl.reply <- answer{}
		return
	}
	resp, offset := c.decide(cl.ctx, cl.req, cl.arrived)
	cl.reply <- answer{resp, offset}
}

func (c *Controller) sessionMs() int64 { return c.cfg.BrokerSessionTimeout.Milliseconds() }

// leading reports whether this node leads, resetting liveness when it has
// just become the leader.
func (c *Controller) leading() bool {
	if !c.m.IsLeader() {
		// Liveness is soft state of a leadership: forget it, keeping an
		// empty table (never nil) for whatever still runs this turn.
		c.wasLeader, c.live = false, controller.NewLiveness()
		c.stopWatches()
		return false
	}
	if !c.wasLeader {
		c.wasLeader, c.live, c.lastRebal = true, controller.NewLiveness(), time.Now()
		c.takeArrivals() // heard by an earlier leadership: every broker gets a full session
		c.log.Info().Uint64("image_version", c.m.Image().Version()).Msg("became the active controller")
	}
	return true
}

// propose commits recs as one atomic entry and returns its index. It gives
// up after proposeTTL, or at Close.
func (c *Controller) propose(ctx context.Context, recs []controller.Record) (uint64, error) {
	if len(recs) == 0 {
		return 0, nil
	}
	ctx, cancel := context.WithTimeout(ctx, c.proposeTTL)
	defer cancel()
	defer context.AfterFunc(c.ctx, cancel)()
	idx, err := c.m.Propose(ctx, controller.NewBatch(recs))
	if err != nil {
		c.log.Warn().Err(err).Int("records", len(recs)).Msg("proposal failed")
	}
	return idx, err
}

// proposeCode maps a failed proposal to its error code. NOT_CONTROLLER,
// which the forwarding broker retries at the next leader, only when the
// proposal is known not to have committed: a retry of a change that did
// commit answers its client TOPIC_ALREADY_EXISTS for its own topic, or
// appends an IncrementalAlterConfigs value twice. An unknown outcome is
// REQUEST_TIMED_OUT, as Kafka answers a request whose fate it cannot tell.
func proposeCode(err error) int16 {
	switch {
	case err == nil:
		return 0
	case errors.Is(err, node.ErrNotLeader), errors.Is(err, node.ErrNotCommitted):
		return kerr.NotController.Code
	}
	return kerr.RequestTimedOut.Code
}

func (c *Controller) defaults() controller.Defaults {
	n := c.cfg.NumPartitions
	if c.cfg.DynamicNumPartitions != nil {
		n = c.cfg.DynamicNumPartitions(c.m.Image())
	}
	return controller.Defaults{
		Partitions:      n,
		RF:              c.cfg.DefaultReplication,
		ValidateConfig:  c.cfg.ValidateTopicConfig,
		ValidateConfigs: c.cfg.ValidateTopicConfigs,
	}
}

// completeMoves completes every reassignment whose ISR covers its target.
// The AlterPartition that grows the ISR normally completes the move itself;
// this catches the rest (a controller that took over mid-move, a proposal
// that was lost).
func (c *Controller) completeMoves() {
	recs := controller.CompleteReassignments(c.m.Image())
	if len(recs) == 0 {
		return
	}
	if _, err := c.propose(c.ctx, recs); err == nil {
		c.log.Info().Int("partitions", len(recs)).Msg("partition reassignments completed")
	}
}

// arrival is the latest heartbeat a broker sent, as it arrived.
type arrival struct {
	epoch int64 // the broker epoch it heartbeat for
	at    int64 // ms
}

// arrived notes a heartbeat from broker at brokerEpoch as it arrives, before
// it waits for the loop: the loop counts it towards the broker's session
// even if the broker gives up waiting for the answer (Liveness.Heard).
func (c *Controller) arrived(broker int32, brokerEpoch int64) {
	c.arrivals.Lock()
	c.arrivals.m[broker] = arrival{epoch: brokerEpoch, at: time.Now().UnixMilli()}
	c.arrivals.Unlock()
}

// takeArrivals returns the heartbeats that arrived since the last call.
func (c *Controller) takeArrivals() map[int32]arrival {
	c.arrivals.Lock()
	defer c.arrivals.Unlock()
	if len(c.arrivals.m) == 0 {
		return nil
	}
	m := c.arrivals.m
	c.arrivals.m = map[int32]arrival{}
	return m
}
