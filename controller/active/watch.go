package active

import (
	"context"
	"errors"
	"net"
	"strconv"
	"syscall"
	"time"

	"github.com/fjordlog/fjord/controller"
	"github.com/fjordlog/fjord/protocol/lifecycle"
)

// The active controller watches every other unfenced broker's listeners
// over an idle TCP connection, so a killed broker is fenced in a fraction
// of a second instead of after broker.session.timeout.ms. When a process
// dies its kernel closes its sockets: the watch's read ends at once, and
// the watch dials the broker's listeners again. If every one of them
// refuses (connection refused: the host answers, nothing listens), twice,
// refusalGap apart, the loop fences the broker (Liveness.Refused).
//
// What it cannot see is left to the session, as before: a frozen process
// (SIGSTOP, a long GC pause) keeps its sockets open and its listen queue
// accepting; a dead host or a cut link answers nothing. So the watch never
// fences a slow broker, only one whose port is closed. A connection the
// broker closes (connections.max.idle.ms, an authentication timeout) only
// makes the watch dial again, after a backoff if it keeps happening.

const (
	// refusalGap separates the two rounds of refused dials that fence.
	refusalGap = 100 * time.Millisecond
	// watchDialTimeout bounds one dial; a timeout is not a refusal.
	watchDialTimeout = time.Second
	// watchBackoffMax bounds the wait between dials that find nothing
	// conclusive (timeouts, connections closed soon after opening).
	watchBackoffMax = 5 * time.Second
)

// refusedBroker is a watch's finding: broker's registration at epoch has
// no process listening.
type refusedBroker struct {
	id    int32
	epoch int64
}

// watchSet is the running watches, by broker. Owned by run.
type watchSet map[int32]*brokerWatch

// brokerWatch is the watch of one broker registration.
type brokerWatch struct {
	epoch  int64
	cancel context.CancelFunc
}

// syncWatches makes the running watches match img: one per unfenced broker
// other than this node, at its current registration, unless a heartbeat
// disproved an earlier refusal of it (Liveness.MayFenceEarly). It runs on
// the loop while leading; stopWatches ends them all.
func (c *Controller) syncWatches(img *controller.Image) {
	if !c.cfg.WatchListeners {
		return
	}
	want := map[int32]controller.BrokerState{}
	for _, b := range img.LiveBrokers() {
		if b.ID != c.cfg.NodeID && len(b.Endpoints) > 0 && c.live.MayFenceEarly(b.ID, b.Epoch) {
			want[b.ID] = b
		}
	}
	for id, w := range c.watches {
		if b, ok := want[id]; !ok || b.Epoch != w.epoch {
			w.cancel()
			delete(c.watches, id)
		}
	}
	for id, b := range want {
		if _, ok := c.watches[id]; ok {
			continue
		}
		ctx, cancel := context.WithCancel(c.ctx)
		c.watches[id] = &brokerWatch{epoch: b.Epoch, cancel: cancel}
		addrs := make([]string, 0, len(b.Endpoints))
		for _, e := range b.Endpoints {
			addrs = append(addrs, net.JoinHostPort(e.Host, strconv.Itoa(int(e.Port))))
		}
		rb := refusedBroker{id: id, epoch: b.Epoch}
		c.spawn(func() { c.watchBroker(ctx, rb, addrs) })
	}
}

// stopWatches ends every watch (this node stopped leading).
func (c *Controller) stopWatches() {
	for id, w := range c.watches {
		w.cancel()
		delete(c.watches, id)
	}
}

// watchBroker holds a connection to one of addrs until it ends, then dials
// again, until ctx ends or every address refused twice: then it tells the
// loop and stops.
func (c *Controller) watchBroker(ctx context.Context, rb refusedBroker, addrs []string) {
	backoff := lifecycle.Backoff{Initial: refusalGap, Max: watchBackoffMax}
	waits := 0 // pauses since the last news (a refusal, a long-lived connection's end)
	refusals := 0
	var d net.Dialer
	for ctx.Err() == nil {
		conn, refused := dialAny(ctx, &d, addrs)
		switch {
		case conn != nil:
			refusals = 0
			opened := time.Now()
			holdUntilClosed(ctx, conn)
			if time.Since(opened) > watchBackoffMax {
				waits = 0 // a long-lived connection: its end is news
				continue  // dial again at once
			}
		case refused:
			if refusals++; refusals >= 2 {
				select {
				case c.refused <- rb:
				case <-ctx.Done():
				}
				return
			}
			waits = 0
		default:
			refusals = 0 // a timeout between refusals: not conclusive
		}
		waits++
		lifecycle.Sleep(ctx, backoff.Delay(waits))
	}
}

// dialAny dials addrs in turn and returns the first connection made, or
// nil and whether every address refused.
func dialAny(ctx context.Context, d *net.Dialer, addrs []string) (net.Conn, bool) {
	refused := true
	for _, a := range addrs {
		dctx, cancel := context.WithTimeout(ctx, watchDialTimeout)
		conn, err := d.DialContext(dctx, "tcp", a)
		cancel()
		if err == nil {
			return conn, false
		}
		if !errors.Is(err, syscall.ECONNREFUSED) {
			refused = false
		}
	}
	return nil, refused && ctx.Err() == nil
}

// holdUntilClosed reads conn until the peer closes it (or ctx ends). The
// broker sends nothing on it: a Kafka server speaks only when asked.
func holdUntilClosed(ctx context.Context, conn net.Conn) {
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()
	defer conn.Close()
	buf := make([]byte, 512)
	for {
		if _, err := conn.Read(buf); err != nil {
			return
		}
	}
}
