package broker

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fjordlog/fjord/protocol"
	"github.com/fjordlog/fjord/storage"
	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Broker is one Fjord node.
//
// Topic metadata lives in mu.topics, a copy-on-write map: readers take mu
// for reading just long enough to look a topic up; admin operations
// (create, delete) are serialised by adminMu, do their disk work without mu,
// and take mu for writing only to publish the result.
type Broker struct {
	cfg    Config
	log    zerolog.Logger
	logDir string
	ms     *metastore

	adminMu sync.Mutex // serialises metadata changes; held across their disk I/O
	mu      struct {
		sync.RWMutex
		state  *metaState          // persisted part; replaced, never mutated, once published
		topics map[string]*topic   // live topics by name
		byID   map[[16]byte]*topic // and by id
	}
	pidMu struct {
		sync.Mutex
		next, limit int64 // [next, limit) is this node's current producer-id block
	}

	servers    []*protocol.Server
	listeners  []net.Listener
	advertised []Listener // one per client listener, ports resolved

	metrics *metrics
	offsets *offsetStore
	groups  *coordinator

	stop    chan struct{}
	wg      sync.WaitGroup
	closing atomic.Bool
}

// topic is a live topic: its metadata and its partitions on this node.
type topic struct {
	name  string
	meta  *topicMeta
	parts []*partition
}

// New opens the node's data (recovering logs as needed) and binds its
// listeners; Start begins serving.
func New(cfg Config, log zerolog.Logger) (*Broker, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	b := &Broker{cfg: cfg, log: log, stop: make(chan struct{})}
	b.metrics = newMetrics(b)
	b.logDir = strings.Split(cfg.LogDirs, ",")[0]
	if err := os.MkdirAll(b.logDir, 0o755); err != nil {
		return nil, fmt.Errorf("log.dirs %s: %w", b.logDir, err)
	}
	storage.RemoveDeletedDirs(b.logDir)
	ms, st, err := loadMeta(b.logDir, cfg.NodeID, cfg.ClusterID)
	if err != nil {
		return nil, err
	}
	b.ms = ms
	b.mu.state = st
	b.mu.topics = map[string]*topic{}
	b.mu.byID = map[[16]byte]*topic{}
	start := time.Now()
	nparts := 0
	for name, tm := range st.Topics {
		t, err := b.openTopic(name, tm, false)
		if err != nil {
			b.closeLogs()
			return nil, err
		}
		b.mu.topics[name] = t
		b.mu.byID[tm.ID] = t
		nparts += len(t.parts)
	}
	log.Info().Int("topics", len(st.Topics)).Int("partitions", nparts).Dur("took", time.Since(start)).
		Str("cluster_id", st.ClusterID).Msg("opened logs")
	ot, err := b.ensureOffsetsTopic()
	if err != nil {
		b.closeLogs()
		return nil, fmt.Errorf("offsets topic: %w", err)
	}
	b.offsets = newOffsetStore(b, ot)
	b.groups = newCoordinator(b)
	if err := b.listen(); err != nil {
		b.closeLogs()
		return nil, err
	}
	return b, nil
}

// listen binds every client listener. Listeners named CONTROLLER are for the
// metadata quorum and are not served here.
func (b *Broker) listen() error {
	ls, _ := ParseListeners(b.cfg.Listeners)
	var adv []Listener
	if b.cfg.AdvertisedListeners != "" {
		adv, _ = ParseListeners(b.cfg.AdvertisedListeners)
	}
	for _, l := range ls {
		if l.Name == "CONTROLLER" {
			continue
		}
		ln, err := net.Listen("tcp", net.JoinHostPort(l.Host, strconv.Itoa(int(l.Port))))
		if err != nil {
			for _, o := range b.listeners {
				o.Close()
			}
			return fmt.Errorf("listener %s: %w", l.Name, err)
		}
		b.listeners = append(b.listeners, ln)
		a := Listener{Name: l.Name, Host: l.Host, Port: int32(ln.Addr().(*net.TCPAddr).Port)}
		if a.Host == "" || a.Host == "0.0.0.0" || a.Host == "::" {
			a.Host = "127.0.0.1"
		}
		for _, x := range adv {
			if x.Name == l.Name {
				a.Host, a.Port = x.Host, x.Port
			}
		}
		b.advertised = append(b.advertised, a)
	}
	if len(b.listeners) == 0 {
		return errors.New("listeners: no client listener (only CONTROLLER)")
	}
	return nil
}

// Addrs returns the bound client addresses, for tests and logs.
func (b *Broker) Addrs() []string {
	out := make([]string, len(b.listeners))
	for i, ln := range b.listeners {
		out[i] = ln.Addr().String()
	}
	return out
}

// Start serves clients and runs the background loops.
func (b *Broker) Start() {
	for i, ln := range b.listeners {
		h := &connHandler{b: b, listener: i}
		s := protocol.NewServer(protocol.ServerConfig{
			MaxFrameBytes: b.cfg.SocketRequestMaxBytes,
			MaxInFlight:   int(b.cfg.NumIOThreads),
			IdleTimeout:   time.Duration(b.cfg.ConnectionsMaxIdleMs) * time.Millisecond,
			DrainTimeout:  30 * time.Second,
		}, h, versionTable{}, b.log.With().Str("listener", b.advertised[i].Name).Logger())
		s.Serve(ln)
		b.servers = append(b.servers, s)
		b.log.Info().Str("listener", b.advertised[i].Name).Str("addr", ln.Addr().String()).
			Str("advertised", net.JoinHostPort(b.advertised[i].Host, strconv.Itoa(int(b.advertised[i].Port)))).
			Int32("node_id", b.cfg.NodeID).Msg("serving Kafka clients")
	}
	if b.cfg.MetricsAddr != "" {
		if err := b.serveMetrics(b.cfg.MetricsAddr); err != nil {
			b.log.Error().Err(err).Str("addr", b.cfg.MetricsAddr).Msg("metrics listener failed; serving Kafka without it")
		}
	}
	b.goLoop(b.offsets.load)
	b.goLoop(b.groups.run)
	b.goLoop(b.retentionLoop)
	b.goLoop(b.flushLoop)
	b.goLoop(b.cleanerLoop)
	b.goLoop(b.offsetsExpiryLoop)
}

func (b *Broker) goLoop(fn func()) {
	b.wg.Add(1)
	go func() {
		defer b.wg.Done()
		fn()
	}()
}

// Close shuts down cleanly: stop accepting, let in-flight requests finish,
// flush and close every log.
func (b *Broker) Close() error {
	if !b.closing.CompareAndSwap(false, true) {
		return nil
	}
	for _, ln := range b.listeners {
		ln.Close()
	}
	for _, s := range b.servers {
		s.Close()
	}
	close(b.stop)
	b.wg.Wait()
	return b.closeLogs()
}

func (b *Broker) closeLogs() error {
	b.mu.RLock()
	defer b.mu.RUnlock()
	var errs []error
	for _, t := range b.mu.topics {
		for _, p := range t.parts {
			if err := p.log.Close(); err != nil {
				errs = append(errs, fmt.Errorf("%s-%d: %w", t.name, p.index, err))
			}
		}
	}
	if len(errs) == 0 {
		b.log.Info().Msg("all logs flushed and closed")
	}
	return errors.Join(errs...)
}

func (b *Broker) partitionDir(topic string, p int32) string {
	return filepath.Join(b.logDir, fmt.Sprintf("%s-%d", topic, p))
}

// openTopic opens (creating when asked) the logs of a topic's partitions.
func (b *Broker) openTopic(name string, tm *topicMeta, create bool) (*topic, error) {
	t := &topic{name: name, meta: tm}
	s := settingsFor(&b.cfg, tm.Configs)
	for i := range tm.Partitions {
		dir := b.partitionDir(name, i)
		if create {
			if err := os.MkdirAll(dir, 0o755); err != nil {
				return nil, err
			}
			pm := fmt.Sprintf("version: 0\ntopic_id: %s\n", encodeUUID(tm.ID))
			if err := storage.WriteFileSync(filepath.Join(dir, "partition.metadata"), []byte(pm)); err != nil {
				return nil, fmt.Errorf("%s-%d: %w", name, i, err)
			}
		}
		plog := b.log.With().Str("topic", name).Int32("partition", i).Logger()
		lg, err := storage.Open(dir, s.storage, plog)
		if err != nil {
			for _, p := range t.parts {
				p.log.Close()
			}
			return nil, fmt.Errorf("%s-%d: %w", name, i, err)
		}
		p := newPartition(name, i, tm.ID, lg, s, plog)
		p.flushTime = b.metrics.flushTime
		t.parts = append(t.parts, p)
	}
	return t, nil
}

// lookup returns a live topic.
func (b *Broker) lookup(name string) *topic {
	b.mu.RLock()
	defer b.mu.RUnlock()
	return b.mu.topics[name]
}

func (b *Broker) lookupID(id [16]byte) *topic {
	b.mu.RLock()
	defer b.mu.RUnlock()
	return b.mu.byID[id]
}

func (b *Broker) partition(name string, idx int32) *partition {
	t := b.lookup(name)
	if t == nil || idx < 0 || int(idx) >= len(t.parts) {
		return nil
	}
	return t.parts[idx]
}

// topicsSnapshot returns the live topics.
func (b *Broker) topicsSnapshot() map[string]*topic {
	b.mu.RLock()
	defer b.mu.RUnlock()
	return b.mu.topics
}

func (b *Broker) clusterID() string {
	b.mu.RLock()
	defer b.mu.RUnlock()
	return b.mu.state.ClusterID
}

// connHandler adapts the broker to the protocol front end for one listener.
type connHandler struct {
	b        *Broker
	listener int
}

// connCtx is what a handler knows of the request's connection.
type connCtx struct {
	ctx        context.Context
	clientID   string
	clientHost string
	listener   int
	version    int16
	// fail closes the connection after the responses already owed; for
	// failures that cannot be answered (acks=0 produce errors, as Kafka does).
	fail func(error)
}

func (h *connHandler) Handle(ctx context.Context, req *protocol.Request, respond protocol.Responder) {
	e := apis[req.Key]
	m := h.b.metrics
	api := apiLabel(req.Key)
	m.requests.WithLabelValues(api).Inc()
	start := time.Now()
	cc := &connCtx{ctx: ctx, clientID: req.ClientID, clientHost: req.ClientHost, listener: h.listener, version: req.Version,
		fail: func(err error) { respond(nil, err) }}
	// Produce is the one handler that keeps nothing of the request once it
	// returns: the batches are written (pwrite copies them) before that.
	req.Recycle = req.Key == 0
	e.fn(h.b, cc, req.Body, func(resp kmsg.Response) {
		m.latency.WithLabelValues(api).Observe(time.Since(start).Seconds())
		if resp == nil {
			respond(nil, nil)
			return
		}
		respond(resp, nil)
	})
}
