// Package node is the I/O shell around a quorum.Member: it owns the member
// in one goroutine, drives it with a clock, carries raft messages between
// controllers over TCP, persists the raft log with raftlog (pebble), and
// publishes the applied metadata image.
//
// # Goroutines
//
//   - run (the owner): the only goroutine that touches the Member and the
//     Log. It selects over the ticker, inbound messages, transport reports
//     (unreachable peer, snapshot sent or failed), proposals and stop, and
//     after every event runs Ready cycles: Member.Ready saves to the Log
//     before it returns the messages, so sending them afterwards keeps
//     raft's persist-before-send rule.
//   - accept, plus one reader per inbound connection: decode frames, check
//     their sender (see Wire format) and hand the messages to run, which
//     steps them into the member; the member refuses messages raft would
//     panic on (quorum.ErrRefused), logged once per kind.
//   - one writer per peer: owns the outbound connection to that peer,
//     drains its bounded queue, redials with backoff.
//
// Every goroutine is started by Node.spawn, through a lifecycle.Group;
// Close cancels the node's context (spawn refuses from then on), closes
// the listener and every connection, waits for all of them, then closes
// the log.
//
// # Wire format
//
// A connection carries raft messages one way (dialer → listener). It opens
// with the 8-byte Preamble (0xFF "FJRAFT" 0x01), then each message is a
// frame:
//
//	+---------------------------+----------------------------------//-+
//	| length, uint32 big-endian | raftpb.Message.Marshal() bytes       |
//	+---------------------------+----------------------------------//-+
//
// When Config.Authenticate is set (a SASL CONTROLLER listener), its
// exchange runs between the preamble and the first frame; Config.Dial may
// wrap the whole connection in TLS.
//
// A frame longer than MaxFrameSize is rejected: the reader closes the
// connection, the writer drops the message and reports it undelivered.
// The reader's buffer grows as a frame's bytes arrive, not from its length
// prefix. An inbound connection carries one sender's messages: its first
// frame's From must be another configured member (a voter or learner), and
// fixes the sender; a frame with another From closes the connection before
// the member sees it. Who may open a connection at all is the listener's
// business (controller/active's mux authenticates and authorizes it).
// The preamble's last byte is the format version. Its first byte lets the
// CONTROLLER listener carry raft connections and Kafka requests (broker
// registration, heartbeats, admin forwarding) side by side: a Kafka frame
// length never has the high bit set.
//
// # Proposals
//
// Raft entries carry only data, so a proposal is matched to its entry by
// position: the owner notes the log's last index, proposes, runs one Ready
// cycle (which saves the new entry) and finds the entry with the
// proposal's data and the current term after the noted index. Propose
// returns once that (index, term) entry is applied.
//
// A leadership change does not end the wait. The entry may already sit in
// a majority's logs, and then the next leader commits it: answering
// "not the leader" there made the caller (a broker forwarding a client's
// CreateTopics) retry a change that had been made, and the client got
// TOPIC_ALREADY_EXISTS for its own topic. So Propose waits until its index
// is applied, whoever leads by then: applied as proposed, it succeeds;
// applied with another entry, the proposal was not committed and never
// will be (committed entries never change), and Propose fails with
// ErrNotCommitted, which is safe to retry. Only an index passed over by a
// snapshot leaves the outcome unknown: ErrLeadershipLost.
package node

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"net"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/vfs"
	"github.com/rs/zerolog"
	"go.etcd.io/raft/v3/raftpb"

	"github.com/fjordlog/fjord/controller"
	"github.com/fjordlog/fjord/controller/quorum"
	"github.com/fjordlog/fjord/controller/raftlog"
	"github.com/fjordlog/fjord/protocol/lifecycle"
)

var (
	// ErrNotLeader is returned by Propose on a node that is not the leader;
	// the error is a *NotLeaderError naming the leader it knows of.
	ErrNotLeader = errors.New("node: not the leader")
	// ErrNotCommitted means a proposal was not committed, and never will
	// be: its index applied with another entry, or this node lost the
	// leadership before saving it. Proposing it again is safe.
	ErrNotCommitted = errors.New("node: the proposal was not committed (leadership changed)")
	// ErrLeadershipLost means a proposal's outcome is unknown: a snapshot
	// passed over its index before this node applied it, so it may or may
	// not have committed.
	ErrLeadershipLost = errors.New("node: leadership lost; the proposal's outcome is unknown")
	// ErrClosed is returned after Close.
	ErrClosed = errors.New("node: closed")
)

// NotLeaderError is ErrNotLeader with the leader this node knows of.
type NotLeaderError struct {
	Leader uint64 // 0 when no leader is known
}

func (e *NotLeaderError) Error() string {
	return fmt.Sprintf("node: not the leader (leader is %d)", e.Leader)
}

// Is makes errors.Is(err, ErrNotLeader) true.
func (e *NotLeaderError) Is(target error) bool { return target == ErrNotLeader }

// Config configures a Node.
type Config struct {
	ID uint64 // raft id; a key of Voters or Learners
	// Voters and Learners map every member's raft id to the host:port of
	// its controller listener (this node's own entry is unused for
	// dialing). They bootstrap an empty log; see quorum.Config.
	Voters, Learners map[uint64]string
	Dir              string // data directory; the raft log lives in Dir/raft
	FS               vfs.FS // holds Dir; nil is the operating system's (see raftlog.OpenFS)
	// Listen is the host:port to bind (port 0 picks one); ignored when
	// Listener is set.
	Listen string
	// Listener, if set, is an already-bound listener the node takes over
	// (and closes on Close). Tests use it to learn every port first.
	Listener net.Listener
	// Dial, if set, opens a connection to a peer's controller listener
	// (a TLS one: the handshake is done when it returns); it must honour
	// ctx's deadline. nil dials plain TCP.
	Dial func(ctx context.Context, addr string) (net.Conn, error)
	// Authenticate, if set, runs on a new outbound connection after the
	// preamble and before the first frame (a SASL exchange); an error
	// closes the connection and counts as a failed dial.
	Authenticate func(ctx context.Context, c net.Conn) error
	// TickInterval is the raft tick (election timeout 10 ticks, heartbeat
	// 1). Default 100ms.
	TickInterval time.Duration
	// SnapshotEvery is how many applied entries trigger a new snapshot and
	// log compaction. Default 10000.
	SnapshotEvery uint64
	Logger        zerolog.Logger
}

const (
	defaultTick          = 100 * time.Millisecond
	defaultSnapshotEvery = 10000
)

func (c *Config) validate() error {
	if c.ID == 0 {
		return errors.New("node: Config.ID must be non-zero")
	}
	if len(c.Voters) == 0 {
		return errors.New("node: Config.Voters is empty")
	}
	_, v := c.Voters[c.ID]
	_, l := c.Learners[c.ID]
	if !v && !l {
		return fmt.Errorf("node: id %d is neither a voter nor a learner", c.ID)
	}
	for id := range c.Learners {
		if _, ok := c.Voters[id]; ok || id == 0 {
			return fmt.Errorf("node: learner id %d is zero or also a voter", id)
		}
	}
	if c.Dir == "" {
		return errors.New("node: Config.Dir is empty")
	}
	if c.Listener == nil && c.Listen == "" {
		return errors.New("node: Config needs Listen or Listener")
	}
	if c.TickInterval <= 0 {
		c.TickInterval = defaultTick
	}
	if c.SnapshotEvery == 0 {
		c.SnapshotEvery = defaultSnapshotEvery
	}
	return nil
}

// Node is one running member of the metadata quorum: a voter (a node with
// the controller role; controller/active builds it), or a learner.
//
// Design: the Member is a deterministic state machine and is not safe for
// concurrent use, so exactly one goroutine (run) owns it together with the
// Log; everything else talks to run over channels, and run publishes what
// readers need (image, leader) through atomics. A mutex-guarded Member was
// rejected: Ready does an fsync, which would then be held under the lock by
// every caller.
type Node struct {
	cfg    Config
	log    zerolog.Logger
	store  *raftlog.Storage
	member *quorum.Member // owned by run
	ln     net.Listener

	tasks lifecycle.Group // every goroutine (spawn); Close stops it
	ctx   context.Context // tasks' context: ends at Close
	done  chan struct{}   // closed when run returns

	recvc   chan raftpb.Message // inbound messages → run
	reportc chan report         // peer writers → run
	propc   chan *proposal      // Propose → run

	peers map[uint64]*peer // immutable after Start

	// Written by run only.
	pub      atomic.Pointer[published]
	leader   atomic.Uint64
	term     atomic.Uint64
	isLeader atomic.Bool

	mu struct {
		sync.Mutex
		conns  map[net.Conn]struct{} // every open connection, in and out
		closed bool
	}
	// ship keeps the latest applied entries for followers outside the
	// quorum (see Since). Written by run.
	ship struct {
		sync.Mutex
		first   uint64   // index of entries[0]
		entries [][]byte // record bytes; nil for an entry without a record
	}
	closeOnce sync.Once
	closeErr  error
}

// published is one image publication; next is closed when a newer one
// replaces it, which is how WaitFor wakes without polling.
type published struct {
	img  *controller.Image
	next chan struct{}
}

// proposal is a Propose call in flight. Fields other than reply are owned
// by run once sent.
type proposal struct {
	data  []byte
	reply chan proposeResult // buffered(1): run never blocks on it
	index uint64
	term  uint64
}

type proposeResult struct {
	index uint64
	err   error
}

// report is a peer writer's delivery outcome for one message.
type report struct {
	to       uint64
	snapshot bool // the message was a MsgSnap
	ok       bool // only snapshots report success
}

// Start opens the log in cfg.Dir, builds the member (bootstrapping an empty
// log from Voters and Learners), binds the listener and starts the node.
func Start(cfg Config) (*Node, error) {
	if err := cfg.validate(); err != nil {
		if cfg.Listener != nil {
			_ = cfg.Listener.Close()
		}
		return nil, err
	}
	n := &Node{cfg: cfg, log: cfg.Logger.With().Uint64("node", cfg.ID).Logger()}
	fail := func(err error) (*Node, error) {
		if n.ln != nil {
			_ = n.ln.Close()
		} else if cfg.Listener != nil {
			_ = cfg.Listener.Close()
		}
		if n.store != nil {
			_ = n.store.Close()
		}
		return nil, err
	}
	var err error
	if n.store, err = raftlog.OpenFS(filepath.Join(cfg.Dir, "raft"), cfg.FS); err != nil {
		return fail(fmt.Errorf("node: %w", err))
	}
	sortedIDs := func(m map[uint64]string) []uint64 {
		ids := make([]uint64, 0, len(m))
		for id := range m {
			ids = append(ids, id)
		}
		slices.Sort(ids)
		return ids
	}
	catchUp := min(cfg.SnapshotEvery/2, 1000)
	n.member, err = quorum.NewMember(quorum.Config{
		ID: cfg.ID, Voters: sortedIDs(cfg.Voters), Learners: sortedIDs(cfg.Learners),
		Log: n.store, CatchUpEntries: catchUp, Logger: raftLogger{n.log.With().Str("component", "raft").Logger()},
	})
	if err != nil {
		return fail(fmt.Errorf("node: %w", err))
	}
	if cfg.Listener != nil {
		n.ln = cfg.Listener
	} else if n.ln, err = net.Listen("tcp", cfg.Listen); err != nil {
		return fail(fmt.Errorf("node: listen: %w", err))
	}

	n.ctx = n.tasks.Context()
	n.done = make(chan struct{})
	n.recvc = make(chan raftpb.Message, 256)
	n.reportc = make(chan report, 256)
	n.propc = make(chan *proposal)
	n.mu.conns = map[net.Conn]struct{}{}
	n.pub.Store(&published{img: n.member.Image(), next: make(chan struct{})})

	n.peers = map[uint64]*peer{}
	for _, m := range []map[uint64]string{cfg.Voters, cfg.Learners} {
		for id, addr := range m {
			if id != cfg.ID {
				n.peers[id] = newPeer(n, id, addr)
			}
		}
	}
	n.log.Info().Str("addr", n.ln.Addr().String()).Uint64("applied", n.member.Applied()).Msg("controller node starting")
	for _, p := range n.peers {
		n.spawn(p.run)
	}
	n.spawn(n.accept)
	n.spawn(n.run)
	return n, nil
}

// spawn starts a tracked goroutine; Close waits for it. Once Close began
// it starts nothing and reports false.
func (n *Node) spawn(f func()) bool { return n.tasks.Go(f) }

// Addr is the bound listener address.
func (n *Node) Addr() net.Addr { return n.ln.Addr() }

// ID is the node's raft id.
func (n *Node) ID() uint64 { return n.cfg.ID }

// Image is the latest applied metadata image.
func (n *Node) Image() *controller.Image { return n.pub.Load().img }

// Leader is the leader this node knows of, 0 if none.
func (n *Node) Leader() uint64 { return n.leader.Load() }

// Term is the raft term as of the owner's last event.
func (n *Node) Term() uint64 { return n.term.Load() }

// IsLeader reports whether this node is the raft leader.
func (n *Node) IsLeader() bool { return n.isLeader.Load() }

// WaitFor blocks until pred returns true for the latest image, ctx ends or
// the node closes. pred runs on the caller's goroutine, once per published
// image (it may skip images published in quick succession).
func (n *Node) WaitFor(ctx context.Context, pred func(*controller.Image) bool) error {
	for {
		p := n.pub.Load()
		if pred(p.img) {
			return nil
		}
		select {
		case <-p.next:
		case <-ctx.Done():
			return ctx.Err()
		case <-n.done:
			if pred(n.pub.Load().img) {
				return nil
			}
			return ErrClosed
		}
	}
}

// Propose proposes r and returns the log index it applied at, once this
// node has applied it. On a non-leader it fails with a *NotLeaderError. A
// record that committed but did not apply to the image returns its index
// and an error wrapping controller.ErrNotApplicable. If ctx ends first the
// proposal may still commit.
func (n *Node) Propose(ctx context.Context, r controller.Record) (uint64, error) {
	p := &proposal{data: controller.Encode(r), reply: make(chan proposeResult, 1)}
	select {
	case n.propc <- p:
	case <-ctx.Done():
		return 0, ctx.Err()
	case <-n.done:
		return 0, ErrClosed
	}
	select {
	case res := <-p.reply:
		return res.index, res.err
	case <-ctx.Done():
		return 0, ctx.Err()
	case <-n.done:
		select {
		case res := <-p.reply:
			return res.index, res.err
		default:
			return 0, ErrClosed
		}
	}
}

// Close stops the node and closes its log. It is idempotent; later calls
// return the first call's result.
func (n *Node) Close() error {
	n.closeOnce.Do(func() {
		n.tasks.Cancel()
		_ = n.ln.Close()
		n.mu.Lock()
		n.mu.closed = true
		for c := range n.mu.conns {
			_ = c.Close()
		}
		n.mu.Unlock()
		n.tasks.Stop()
		n.closeErr = n.store.Close()
		n.log.Info().Msg("controller node closed")
	})
	return n.closeErr
}

// track registers an open connection so Close can close it; false (and the
// connection closed) when the node is closing.
func (n *Node) track(c net.Conn) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.mu.closed {
		_ = c.Close()
		return false
	}
	n.mu.conns[c] = struct{}{}
	return true
}

func (n *Node) untrack(c net.Conn) {
	n.mu.Lock()
	delete(n.mu.conns, c)
	n.mu.Unlock()
	_ = c.Close()
}

// owner is run's state; only run and the methods it calls touch it.
type owner struct {
	pending  map[uint64]*proposal // by entry index
	err      error                // sticky member error
	lead     uint64
	term     uint64
	leading  bool
	snapshot uint64  // SnapshotEvery
	refused  refusal // the last refused message logged at Warn
}

// refusal is what makes a refused message news (Node.step).
type refusal struct {
	from uint64
	typ  raftpb.MessageType
	term uint64 // the member's
}

// run is the owner goroutine: the only one touching n.member and n.store
// (besides Start and Close, before and after it).
func (n *Node) run() {
	defer close(n.done)
	o := &owner{pending: map[uint64]*proposal{}, snapshot: n.cfg.SnapshotEvery}
	t := time.NewTicker(n.cfg.TickInterval)
	defer t.Stop()
	if _, self := n.cfg.Voters[n.cfg.ID]; self && len(n.cfg.Voters) == 1 {
		// A quorum of one need not wait an election timeout to lead.
		if err := n.member.Campaign(); err != nil {
			n.log.Warn().Err(err).Msg("campaign")
		}
		n.readyLoop(o)
	}
	n.publishLeader(o)
	for {
		select {
		case <-t.C:
			n.member.Tick()
		case m := <-n.recvc:
			n.step(o, m)
		case r := <-n.reportc:
			if r.snapshot {
				n.member.ReportSnapshot(r.to, r.ok)
			}
			if !r.ok {
				n.member.ReportUnreachable(r.to)
			}
		case p := <-n.propc:
			n.propose(o, p)
		case <-n.ctx.Done():
			for i, p := range o.pending {
				p.reply <- proposeResult{err: ErrClosed}
				delete(o.pending, i)
			}
			return
		}
		n.readyLoop(o)
	}
}

// step hands a received message to the member. A refused one (a message
// raft would panic on, quorum.ErrRefused) is logged at Warn when it is the
// first of its kind: from another sender, of another type or at another
// term than the last one logged; a peer repeating it every heartbeat logs
// once.
func (n *Node) step(o *owner, m raftpb.Message) {
	err := n.member.Step(m)
	switch {
	case err == nil || o.err != nil:
	case errors.Is(err, quorum.ErrRefused):
		k := refusal{from: m.From, typ: m.Type, term: n.member.Term()}
		ev := n.log.Debug()
		if k != o.refused {
			o.refused = k
			ev = n.log.Warn()
		}
		ev.Err(err).Uint64("from", m.From).Stringer("type", m.Type).Uint64("term", m.Term).Msg("raft message refused")
	default:
		n.log.Debug().Err(err).Uint64("from", m.From).Stringer("type", m.Type).Msg("step")
	}
}

// readyLoop runs Ready cycles until one has nothing to report (Advance can
// leave more work, e.g. a leader's self-ack that commits entries).
func (n *Node) readyLoop(o *owner) {
	for i := 0; i < 16; i++ {
		if !n.cycle(o) && i > 0 {
			break
		}
	}
	n.publishLeader(o)
	n.checkPending(o)
}

// cycle runs one Ready cycle: save (inside Member.Ready), send, apply,
// publish. It reports whether Ready returned messages or applied entries.
func (n *Node) cycle(o *owner) bool {
	if o.err != nil {
		return false
	}
	msgs, applied, err := n.member.Ready()
	if err != nil {
		o.err = err
		n.log.Error().Err(err).Msg("raft member stopped")
		for i, p := range o.pending {
			p.reply <- proposeResult{err: err}
			delete(o.pending, i)
		}
		return false
	}
	for _, m := range msgs {
		n.send(m)
	}
	if len(applied) == 0 {
		return len(msgs) > 0
	}
	n.keep(applied)
	// Publish first: a proposer that gets its reply sees its entry in Image.
	if img := n.member.Image(); img != n.pub.Load().img {
		old := n.pub.Swap(&published{img: img, next: make(chan struct{})})
		close(old.next)
	}
	for _, a := range applied {
		p, ok := o.pending[a.Index]
		if !ok {
			continue
		}
		delete(o.pending, a.Index)
		switch {
		case a.Kind != quorum.KindRecord || a.Term != p.term || !bytes.Equal(a.Data, p.data):
			p.reply <- proposeResult{err: ErrNotCommitted}
		case a.Err != nil:
			p.reply <- proposeResult{index: a.Index, err: fmt.Errorf("node: entry %d: %w", a.Index, a.Err)}
		default:
			p.reply <- proposeResult{index: a.Index}
		}
	}
	for _, a := range applied {
		if a.Kind == quorum.KindSnapshot {
			n.log.Info().Uint64("index", a.Index).Uint64("term", a.Term).Msg("image restored from snapshot")
		}
		if a.Err != nil {
			n.log.Error().Err(a.Err).Uint64("index", a.Index).Msg("committed record did not apply")
		}
	}
	if took, err := n.member.MaybeSnapshot(o.snapshot); err != nil {
		n.log.Warn().Err(err).Msg("snapshot")
	} else if took {
		n.log.Debug().Uint64("index", n.member.Applied()).Msg("snapshot taken")
	}
	return true
}

// shipKeep bounds the entries kept for followers; one further behind
// gets a snapshot of the image instead.
const shipKeep = 8192

// keep records applied entries for Since.
func (n *Node) keep(applied []quorum.Applied) {
	n.ship.Lock()
	defer n.ship.Unlock()
	for _, a := range applied {
		if a.Kind == quorum.KindSnapshot || a.Index != n.ship.first+uint64(len(n.ship.entries)) {
			n.ship.first, n.ship.entries = a.Index+1, nil
			if a.Kind == quorum.KindSnapshot {
				continue
			}
			n.ship.first = a.Index
		}
		var data []byte
		if a.Kind == quorum.KindRecord {
			data = a.Data
		}
		n.ship.entries = append(n.ship.entries, data)
	}
	if len(n.ship.entries) > shipKeep {
		drop := len(n.ship.entries) - shipKeep/2
		n.ship.first += uint64(drop)
		n.ship.entries = append([][]byte(nil), n.ship.entries[drop:]...)
	}
}

// Since returns up to max applied entries from index from on, for a node
// that follows the log outside the quorum (quorum.ApplyEntry applies
// them): each entry's record bytes, or nil for an entry without one. ok is
// false when from is no longer kept: the follower needs a snapshot of
// Image first (quorum.EncodeImage). An empty slice with ok means nothing
// past from-1 is applied yet.
func (n *Node) Since(from uint64, max int) (entries [][]byte, ok bool) {
	n.ship.Lock()
	defer n.ship.Unlock()
	end := n.ship.first + uint64(len(n.ship.entries))
	if from < n.ship.first || from > end {
		return nil, false
	}
	out := n.ship.entries[from-n.ship.first:]
	if len(out) > max {
		out = out[:max]
	}
	return slices.Clone(out), true
}

// checkPending fails the proposals whose index was passed over (by a
// snapshot) without being applied here: their outcome is unknown. A term
// change alone fails none (see Proposals in the package doc): the index
// still applies, with the proposal or without it.
func (n *Node) checkPending(o *owner) {
	if len(o.pending) == 0 {
		return
	}
	applied := n.member.Applied()
	for i, p := range o.pending {
		if i <= applied {
			p.reply <- proposeResult{err: ErrLeadershipLost}
			delete(o.pending, i)
		}
	}
}

// publishLeader publishes the leader and logs role changes.
func (n *Node) publishLeader(o *owner) {
	lead, term := n.member.Leader(), n.member.Term()
	leading := lead == n.cfg.ID
	if lead != o.lead || leading != o.leading {
		ev := n.log.Info()
		if leading {
			ev.Uint64("term", term).Msg("became leader")
		} else {
			ev.Uint64("leader", lead).Uint64("term", term).Msg("leader changed")
		}
	}
	o.lead, o.term, o.leading = lead, term, leading
	n.leader.Store(lead)
	n.term.Store(term)
	n.isLeader.Store(leading)
}

// propose handles one proposal on the owner goroutine.
func (n *Node) propose(o *owner, p *proposal) {
	if o.err != nil {
		p.reply <- proposeResult{err: o.err}
		return
	}
	if !n.member.IsLeader() {
		p.reply <- proposeResult{err: &NotLeaderError{Leader: n.member.Leader()}}
		return
	}
	pre, err := n.store.LastIndex()
	if err != nil {
		p.reply <- proposeResult{err: fmt.Errorf("node: %w", err)}
		return
	}
	p.term = n.member.Term()
	if err := n.member.Propose(p.data); err != nil {
		p.reply <- proposeResult{err: fmt.Errorf("node: propose: %w", err)}
		return
	}
	// One cycle saves the new entry. Entries it applies were committed
	// before the proposal, so none of them is ours.
	n.cycle(o)
	if o.err != nil {
		p.reply <- proposeResult{err: o.err}
		return
	}
	last, err := n.store.LastIndex()
	if err != nil {
		p.reply <- proposeResult{err: fmt.Errorf("node: %w", err)}
		return
	}
	var ents []raftpb.Entry
	if last > pre {
		ents, err = n.store.Entries(pre+1, last+1, math.MaxUint64)
	}
	if err != nil {
		p.reply <- proposeResult{err: fmt.Errorf("node: %w", err)}
		return
	}
	for _, e := range ents {
		if e.Type == raftpb.EntryNormal && e.Term == p.term && bytes.Equal(e.Data, p.data) {
			p.index = e.Index
			o.pending[e.Index] = p
			return
		}
	}
	// Not saved: leadership changed while proposing, so no other member
	// has it either.
	p.reply <- proposeResult{err: ErrNotCommitted}
}
