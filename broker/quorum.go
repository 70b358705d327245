package broker

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/fjordlog/fjord/controller/active"
	"github.com/fjordlog/fjord/controller/node"
	"github.com/fjordlog/fjord/storage"
	"github.com/rs/zerolog"
)

// Every node runs a member of the metadata quorum: a voter when it has the
// controller role. Raft ids are node.id+1, because raft reserves id 0 and
// Kafka allows node.id 0.
func raftID(nodeID int32) uint64 { return uint64(nodeID) + 1 }
func nodeID(raftID uint64) int32 { return int32(raftID - 1) }

// metadataDir is where the raft log (pebble) lives, named as Kafka names
// its metadata log directory.
const metadataDir = "__cluster_metadata-0"

// metaProperties is the identity file of a data directory, in Kafka's
// format: it ties the directory to one node and one cluster.
const metaProperties = "meta.properties"

// loadIdentity reads or writes meta.properties and returns the cluster id.
// A directory written for another node or cluster is refused rather than
// served. On first start the cluster id is cluster.id if set; otherwise a
// multi-voter cluster derives it from controller.quorum.voters (every node
// computes the same value) and a quorum of one draws a random one.
func loadIdentity(dir string, cfg *Config) (string, error) {
	path := filepath.Join(dir, metaProperties)
	if _, err := os.Stat(filepath.Join(dir, "fjord-metadata.json")); err == nil {
		return "", fmt.Errorf("%s holds fjord-metadata.json from a single-node release before the metadata quorum; "+
			"this release cannot read it: keep using the earlier release for that directory, or start with an empty log.dirs", dir)
	}
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		id := cfg.ClusterID
		if id == "" && cfg.ControllerQuorumVoters != "" {
			sum := sha256.Sum256([]byte(strings.TrimSpace(cfg.ControllerQuorumVoters)))
			id = base64.RawURLEncoding.EncodeToString(sum[:16])
		} else if id == "" {
			id = newClusterID()
		}
		text := fmt.Sprintf("version=1\nnode.id=%d\ncluster.id=%s\n", cfg.NodeID, id)
		if err := storage.WriteFileSync(path, []byte(text)); err != nil {
			return "", fmt.Errorf("%s: %w", path, err)
		}
		return id, nil
	}
	if err != nil {
		return "", fmt.Errorf("%s: %w", path, err)
	}
	props := map[string]string{}
	for _, line := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), "="); ok {
			props[k] = v
		}
	}
	if props["node.id"] != strconv.Itoa(int(cfg.NodeID)) {
		return "", fmt.Errorf("%s: data belongs to node.id %s, configured %d", path, props["node.id"], cfg.NodeID)
	}
	id := props["cluster.id"]
	if id == "" {
		return "", fmt.Errorf("%s: no cluster.id", path)
	}
	if cfg.ClusterID != "" && cfg.ClusterID != id {
		return "", fmt.Errorf("%s: data belongs to cluster %q, configured %q", path, id, cfg.ClusterID)
	}
	return id, nil
}

// newClusterID makes a Kafka-style cluster id: 16 random bytes, base64url.
func newClusterID() string {
	var b [16]byte
	rand.Read(b[:])
	return encodeUUID(b)
}

// startQuorum starts this node's quorum member, or on a broker-only node
// its follower of the metadata log. ctl is the bound controller listener,
// or nil for a quorum of one without one (the member then listens on a
// loopback port nobody dials).
func (b *Broker) startQuorum(ctl net.Listener) error {
	if !b.cfg.HasRole("controller") {
		b.meta = startFollower(b)
		return nil
	}
	voters := map[uint64]string{}
	vs, _ := ParseVoters(b.cfg.ControllerQuorumVoters)
	for _, v := range vs {
		voters[raftID(v.ID)] = v.Addr
	}
	if len(voters) == 0 {
		voters[raftID(b.cfg.NodeID)] = "127.0.0.1:0"
	}
	nc := node.Config{
		ID:           raftID(b.cfg.NodeID),
		Voters:       voters,
		Dir:          filepath.Join(b.logDir, metadataDir),
		TickInterval: 100 * time.Millisecond,
		Logger:       b.log.With().Str("component", "quorum").Logger(),
	}
	if ctl != nil {
		mux := newConnMux(ctl, b.log)
		nc.Listener = mux.raft
		b.ctlKafka = mux.kafka
		b.goLoop(mux.run)
	} else {
		nc.Listen = "127.0.0.1:0"
	}
	n, err := node.Start(nc)
	if err != nil {
		return fmt.Errorf("metadata quorum: %w", err)
	}
	b.node, b.meta = n, n
	return nil
}

// activeConfig is what the active controller decides with, from cfg.
func (b *Broker) activeConfig() active.Config {
	return active.Config{
		BrokerSessionTimeout:         time.Duration(b.cfg.BrokerSessionTimeoutMs) * time.Millisecond,
		NumPartitions:                b.cfg.NumPartitions,
		DefaultReplication:           b.cfg.DefaultReplication,
		DeleteTopicEnable:            b.cfg.DeleteTopicEnable,
		AutoLeaderRebalance:          b.cfg.AutoLeaderRebalance,
		LeaderImbalanceCheckInterval: time.Duration(b.cfg.LeaderImbalanceCheckSecs) * time.Second,
		ValidateTopicConfig: func(name, value string) error {
			return validateTopicConfigs(map[string]string{name: value})
		},
		Logger: b.log,
	}
}

// connMux splits the CONTROLLER listener in two by each connection's first
// byte: raft connections open with node.Preamble, whose first byte no Kafka
// frame can start with; everything else is Kafka's protocol (broker
// registration, heartbeats, forwarded admin requests).
type connMux struct {
	ln          net.Listener
	raft, kafka *chanListener
	log         zerolog.Logger
}

func newConnMux(ln net.Listener, log zerolog.Logger) *connMux {
	return &connMux{ln: ln, raft: newChanListener(ln.Addr()), kafka: newChanListener(ln.Addr()), log: log}
}

// run accepts until the listener closes, then closes both halves.
func (m *connMux) run() {
	defer m.raft.Close()
	defer m.kafka.Close()
	for {
		c, err := m.ln.Accept()
		if err != nil {
			return
		}
		go m.route(c)
	}
}

// route reads the first byte (a silent connection gets 10 s) and hands the
// connection, first byte replayed, to the matching half.
func (m *connMux) route(c net.Conn) {
	var first [1]byte
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.ReadFull(c, first[:]); err != nil {
		m.log.Debug().Err(err).Str("remote", c.RemoteAddr().String()).Msg("controller listener: connection closed before its first byte")
		c.Close()
		return
	}
	_ = c.SetReadDeadline(time.Time{})
	pc := &prefixConn{Conn: c, prefix: first[:]}
	dst := m.kafka
	if node.IsPreamble(first[:]) {
		dst = m.raft
	}
	if !dst.deliver(pc) {
		c.Close()
	}
}

// prefixConn replays bytes already read before the connection's own.
type prefixConn struct {
	net.Conn
	prefix []byte
}

func (c *prefixConn) Read(p []byte) (int, error) {
	if len(c.prefix) > 0 {
		n := copy(p, c.prefix)
		c.prefix = c.prefix[n:]
		return n, nil
	}
	return c.Conn.Read(p)
}

// chanListener is a net.Listener fed connections by a connMux.
type chanListener struct {
	addr net.Addr
	c    chan net.Conn
	done chan struct{}
	once sync.Once
}

func newChanListener(addr net.Addr) *chanListener {
	return &chanListener{addr: addr, c: make(chan net.Conn), done: make(chan struct{})}
}

func (l *chanListener) deliver(c net.Conn) bool {
	select {
	case l.c <- c:
		return true
	case <-l.done:
		return false
	}
}

func (l *chanListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.c:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *chanListener) Close() error {
	l.once.Do(func() { close(l.done) })
	return nil
}

func (l *chanListener) Addr() net.Addr { return l.addr }
