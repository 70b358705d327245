// Package brokertest starts a real Fjord cluster inside one process, for
// tests of code that talks to Kafka: N combined nodes (broker and
// controller), real raft, real log files in a directory of your choice,
// loopback ports. Nothing is mocked; clients connect to Addrs() as to any
// Kafka cluster.
//
//	c, err := brokertest.Start(brokertest.Options{Nodes: 3, Dir: t.TempDir()})
//	if err != nil { t.Fatal(err) }
//	defer c.Close()
//	cl, _ := kgo.NewClient(kgo.SeedBrokers(c.Addrs()...))
//
// Fault hooks act on one node:
//   - Stop and Restart: a clean shutdown, then a start on the same data
//     and ports (a restarted process).
//   - Cut and Heal: the node's links to the other nodes (raft and
//     broker-to-controller traffic) are severed: connections reset, new
//     ones refused. Clients can still reach it, as in a partial network
//     partition.
//   - Pause and Resume: the links stay open but carry nothing, as the
//     other nodes see a stopped (SIGSTOP) process. Clients can still reach
//     it; for a process that truly stops, run fjord processes.
//   - PowerCut (power-loss mode only): the power of one or more nodes goes
//     at one instant, then they start again on what their disks kept.
//
// Every inter-node link goes through a small TCP proxy owned by the
// cluster: node i reaches node j through proxy (i→j), so a hook only flips
// proxies. That covers both the metadata quorum (each node's voter list
// names the proxies) and replication: node j has one listener R<i> per
// node i, advertised at proxy (i→j), and node i fetches through
// inter.broker.listener.name=R<i>.
//
// # Power loss
//
// With Options.PowerLoss every file a node writes goes through a file
// system in memory that knows what an fsync made durable: its log
// directory (partition logs and their checkpoint, snapshot and index
// files, partition.metadata, meta.properties, deletions of partition
// directories) through a storage.MemFS given as broker.Options.FS, its
// metadata log (pebble) through pebble's strict in-memory FS
// (vfs.NewStrictMem) given as broker.Options.MetadataFS. Clients reach
// each node through a proxy of the cluster's too, advertised as its
// client listener. PowerCut then cuts the power of chosen nodes at once:
// their network first (peers and clients), then their disks, which keep
// only what a power loss keeps, and they start again on that.
//
// What a cut models: the page cache is lost. A file keeps its contents as
// of its last fsync or fdatasync, a directory its names (creations,
// renames, removals) as of its last fsync of the directory, as POSIX
// promises and no more (a new directory's name needs its parent synced; a
// synced file under an unsynced name is lost with the name). With
// Options.PowerLossSeed the partition logs' file systems may also keep a
// random part of what was not synced, in order per file and per directory,
// the first change dropped possibly torn (a prefix of its bytes kept):
// write-back the kernel did before the power went. The metadata log keeps
// exactly what was synced (pebble's strict FS has no partial write-back).
// Not modelled: a file's pages written back out of order, sectors torn
// inside a write otherwise kept, a disk that lies about fsync, and
// corruption of what was durable (storage's own crash and fuzz tests
// cover damaged files). Preallocation is refused in this mode (a MemFS
// would hold every segment's 4 MiB of zeros), so segments grow as their
// data does. Nothing is written to the real disk; Dir is only a name.
package brokertest

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/cockroachdb/pebble/vfs"
	"github.com/rs/zerolog"

	"github.com/fjordlog/fjord/broker"
	"github.com/fjordlog/fjord/broker/config"
	"github.com/fjordlog/fjord/storage"
	"github.com/fjordlog/fjord/storage/remote"
)

// Options configures a cluster.
type Options struct {
	Nodes int // number of combined nodes (broker and controller), ids 1..Nodes; default 3
	// Brokers is the number of extra broker-only nodes, ids Nodes+1...; they
	// follow the metadata log from the controllers without voting.
	Brokers int
	Dir     string // data directory root; node i uses Dir/node-i. Required.
	// Configure, if set, adjusts each node's config before it starts
	// (called again on every Restart).
	Configure func(id int32, c *config.Config)
	Logger    zerolog.Logger // default: discard
	// ReadyTimeout bounds Start and Restart waiting for nodes to serve;
	// default 30s.
	ReadyTimeout time.Duration
	// PowerLoss runs every node on file systems in memory that PowerCut
	// can crash (see the package comment): a storage.MemFS for its files
	// under Dir, pebble's strict in-memory FS for its metadata log.
	// Nothing is written to the real disk, and Dir may be empty (a root
	// of its own inside each MemFS is used).
	PowerLoss bool
	// PowerLossSeed, when not 0, lets a power cut keep a random part of
	// what the partition logs' file systems had not synced (any prefix of
	// each file's and each directory's pending changes, the first change
	// dropped possibly torn: storage.MemFS.CrashClone), drawn from a
	// generator with this seed. 0 keeps exactly what was synced.
	PowerLossSeed uint64
	// FS, if set (and not PowerLoss), gives node id the file system its
	// files under Dir go through, at each start (broker.Options.FS); nil
	// from it is the operating system's. A storage.ErrorFS over the
	// operating system's is a sick disk on one node.
	FS func(id int32) storage.FS
	// RemoteStore is every node's tiered-storage object store (one
	// bucket, shared as in a real cluster; broker.Options.RemoteStore);
	// nil: no tiering. RemoteTaskInterval is the remote log manager's
	// round interval.
	RemoteStore        remote.Store
	RemoteTaskInterval time.Duration
}

// Cluster is a running in-process cluster. Its methods are safe for
// concurrent use.
type Cluster struct {
	opts Options
	mu   sync.Mutex
	// nodes by id (1-based; nodes[0] unused).
	nodes []*member
	// links[i][j] carries node i's connections to node j's CONTROLLER
	// listener; repl[i][j] its replication fetches from node j.
	links map[[2]int32]*proxy
	repl  map[[2]int32]*proxy
	// crashRand draws what a power cut keeps beyond the synced state
	// (PowerLossSeed); nil keeps that state alone. Guarded by mu.
	crashRand *rand.Rand
}

type member struct {
	id         int32
	b          *broker.Broker // nil while stopped
	voter      bool           // combined node; else broker-only
	clientPort int
	ctlAddr    string // a voter's own CONTROLLER listener, fixed across restarts
	// replAddr[i] is the bound address of listener R<i>, which node i's
	// fetches reach through proxy (i→this).
	replAddr map[int32]string

	// Power-loss mode only (Options.PowerLoss), else nil.
	//
	// fs holds the node's files under its log directory, meta its
	// metadata log; a power cut replaces fs by its crash image and resets
	// meta to its synced state. client is the proxy clients reach the
	// node through (advertised as its client listener), so that a power
	// cut silences the node towards clients at once, as towards its peers.
	fs     *storage.MemFS
	meta   *vfs.MemFS
	client *proxy
}

// Start starts opts.Nodes nodes and waits until every one serves clients.
func Start(opts Options) (*Cluster, error) {
	if opts.Nodes == 0 {
		opts.Nodes = 3
	}
	if opts.Dir == "" && opts.PowerLoss {
		opts.Dir = "/brokertest" // inside each node's MemFS
	}
	if opts.Dir == "" {
		return nil, errors.New("brokertest: Options.Dir is required")
	}
	if opts.ReadyTimeout == 0 {
		opts.ReadyTimeout = 30 * time.Second
	}
	total := opts.Nodes + opts.Brokers
	c := &Cluster{opts: opts, nodes: make([]*member, total+1), links: map[[2]int32]*proxy{}, repl: map[[2]int32]*proxy{}}
	if opts.PowerLossSeed != 0 {
		c.crashRand = rand.New(rand.NewPCG(opts.PowerLossSeed, 0x9e3779b97f4a7c15))
	}
	// Controller listeners first: the proxies must know where to forward.
	for id := int32(1); id <= int32(total); id++ {
		c.nodes[id] = &member{id: id, voter: id <= int32(opts.Nodes), replAddr: map[int32]string{}}
		if opts.PowerLoss {
			m := c.nodes[id]
			m.fs, m.meta = storage.NewMemFS(), vfs.NewStrictMem()
			// The node's client port is not known before it starts: the
			// proxy is pointed at it then (start).
			p, err := newProxy("127.0.0.1:1")
			if err != nil {
				c.Close()
				return nil, err
			}
			m.client = p
		}
		for i := int32(1); i <= int32(total); i++ {
			port, err := freePort()
			if err != nil {
				return nil, err
			}
			c.nodes[id].replAddr[i] = net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		}
		if !c.nodes[id].voter {
			continue
		}
		port, err := freePort()
		if err != nil {
			return nil, err
		}
		c.nodes[id].ctlAddr = net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	}
	// Every node reaches every voter through its own proxy.
	for i := int32(1); i <= int32(total); i++ {
		for j := int32(1); j <= int32(opts.Nodes); j++ {
			if i == j {
				continue
			}
			p, err := newProxy(c.nodes[j].ctlAddr)
			if err != nil {
				c.Close()
				return nil, err
			}
			c.links[[2]int32{i, j}] = p
		}
	}
	for i := int32(1); i <= int32(total); i++ {
		for j := int32(1); j <= int32(total); j++ {
			if i == j {
				continue
			}
			p, err := newProxy(c.nodes[j].replAddr[i])
			if err != nil {
				c.Close()
				return nil, err
			}
			c.repl[[2]int32{i, j}] = p
		}
	}
	// All nodes start together: none is ready before a quorum exists.
	errs := make(chan error, total)
	for id := int32(1); id <= int32(total); id++ {
		go func() { errs <- c.start(id) }()
	}
	var first error
	for range total {
		if err := <-errs; err != nil && first == nil {
			first = err
		}
	}
	if first != nil {
		c.Close()
		return nil, first
	}
	return c, nil
}

// repickLocked gives node m new listener ports and points the proxies in
// front of it at them. REQUIRES: c.mu held, m stopped.
func (c *Cluster) repickLocked(m *member) error {
	pick := func() (string, error) {
		port, err := freePort()
		return net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), err
	}
	m.clientPort = 0
	for i := range m.replAddr {
		addr, err := pick()
		if err != nil {
			return err
		}
		m.replAddr[i] = addr
		if p := c.repl[[2]int32{i, m.id}]; p != nil {
			p.retarget(addr)
		}
	}
	if m.voter {
		addr, err := pick()
		if err != nil {
			return err
		}
		m.ctlAddr = addr
		for k, p := range c.links {
			if k[1] == m.id {
				p.retarget(addr)
			}
		}
	}
	return nil
}

// config builds node id's configuration: its voter list names the other
// nodes by the proxies in front of them.
func (c *Cluster) config(m *member) config.Config {
	cfg := config.Default()
	cfg.NodeID = m.id
	cfg.ClusterID = "brokertest-cluster-0001"
	cfg.LogDirs = filepath.Join(c.opts.Dir, fmt.Sprintf("node-%d", m.id))
	listeners := []string{fmt.Sprintf("PLAINTEXT://127.0.0.1:%d", m.clientPort)}
	protocols := []string{"PLAINTEXT:PLAINTEXT", "CONTROLLER:PLAINTEXT"}
	var advertised []string
	for i := int32(1); i < int32(len(c.nodes)); i++ {
		listeners = append(listeners, fmt.Sprintf("R%d://%s", i, m.replAddr[i]))
		protocols = append(protocols, fmt.Sprintf("R%d:PLAINTEXT", i))
		if i != m.id {
			advertised = append(advertised, fmt.Sprintf("R%d://%s", i, c.repl[[2]int32{i, m.id}].addr()))
		}
	}
	if m.voter {
		listeners = append(listeners, "CONTROLLER://"+m.ctlAddr)
	} else {
		cfg.ProcessRoles = "broker"
	}
	if m.client != nil {
		advertised = append(advertised, "PLAINTEXT://"+m.client.addr())
	}
	cfg.Listeners = strings.Join(listeners, ",")
	// Every name has a protocol, or the node refuses to start.
	cfg.ListenerSecurityProtocolMap = strings.Join(protocols, ",")
	cfg.AdvertisedListeners = strings.Join(advertised, ",")
	cfg.InterBrokerListenerName = fmt.Sprintf("R%d", m.id)
	var voters []string
	for j := int32(1); j <= int32(c.opts.Nodes); j++ {
		addr := m.ctlAddr
		if j != m.id {
			addr = c.links[[2]int32{m.id, j}].addr()
		}
		voters = append(voters, fmt.Sprintf("%d@%s", j, addr))
	}
	cfg.ControllerQuorumVoters = strings.Join(voters, ",")
	cfg.BrokerSessionTimeoutMs = 3000
	cfg.BrokerHeartbeatIntervalMs = 250
	cfg.GroupInitialRebalanceMs = 0
	cfg.NumPartitions = 1
	if c.opts.Configure != nil {
		c.opts.Configure(m.id, &cfg)
	}
	return cfg
}

// start starts node id and waits until it serves clients. A port taken
// by someone else since it was picked (free ports are only free a moment)
// is picked again: peers reach the node through proxies, which follow.
func (c *Cluster) start(id int32) error {
	var b *broker.Broker
	for attempt := 0; ; attempt++ {
		c.mu.Lock()
		m := c.nodes[id]
		if m.b != nil {
			c.mu.Unlock()
			return fmt.Errorf("brokertest: node %d is running", id)
		}
		if attempt > 0 {
			if err := c.repickLocked(m); err != nil {
				c.mu.Unlock()
				return err
			}
		}
		cfg := c.config(m)
		var bopts broker.Options
		switch {
		case m.fs != nil:
			bopts = broker.Options{FS: nodeFS(m.fs), MetadataFS: m.meta}
		case c.opts.FS != nil:
			bopts.FS = c.opts.FS(id)
		}
		bopts.RemoteStore, bopts.RemoteTaskInterval = c.opts.RemoteStore, c.opts.RemoteTaskInterval
		c.mu.Unlock()
		var err error
		b, err = broker.NewWithOptions(cfg, c.opts.Logger.With().Int32("node", id).Logger(), bopts)
		if err == nil {
			break
		}
		if attempt < 5 && strings.Contains(err.Error(), "address already in use") {
			continue
		}
		return fmt.Errorf("brokertest: node %d: %w", id, err)
	}
	b.Start()
	select {
	case <-b.Ready():
	case <-time.After(c.opts.ReadyTimeout):
		b.Close()
		return fmt.Errorf("brokertest: node %d not serving after %v", id, c.opts.ReadyTimeout)
	}
	_, port, _ := net.SplitHostPort(b.Addrs()[0])
	c.mu.Lock()
	m := c.nodes[id]
	m.b = b
	m.clientPort, _ = strconv.Atoi(port)
	if m.client != nil {
		m.client.retarget(b.Addrs()[0])
	}
	c.mu.Unlock()
	return nil
}

// nodeFS is the file system a node in power-loss mode is given: fs, with
// preallocation refused. A segment preallocates 4 MiB ahead of its data
// (storage's preallocChunk), which MemFS would hold as zeros and copy at
// every sync, for each of the cluster's hundreds of logs; refused, a
// segment grows with its writes, as on a file system without fallocate.
// Recovery from preallocated tails is storage's own crash tests' business.
func nodeFS(fs *storage.MemFS) storage.FS {
	return storage.NewErrorFS(fs, storage.Fault{Op: storage.OpAlloc, Err: syscall.EOPNOTSUPP})
}

func (c *Cluster) member(id int32) (*member, error) {
	if id < 1 || int(id) >= len(c.nodes) {
		return nil, fmt.Errorf("brokertest: no node %d", id)
	}
	return c.nodes[id], nil
}

// Addrs returns the client addresses of the running nodes, by id.
func (c *Cluster) Addrs() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for _, m := range c.nodes[1:] {
		if m.b != nil {
			out = append(out, m.clientAddr())
		}
	}
	return out
}

// clientAddr is where clients reach m, running: its client proxy in
// power-loss mode, else its listener. REQUIRES: c.mu held, m.b != nil.
func (m *member) clientAddr() string {
	if m.client != nil {
		return m.client.addr()
	}
	return m.b.Addrs()[0]
}

// Addr returns node id's client address ("" while stopped).
func (c *Cluster) Addr(id int32) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if m, err := c.member(id); err == nil && m.b != nil {
		return m.clientAddr()
	}
	return ""
}

// Broker returns node id's running broker, or nil while it is stopped.
func (c *Cluster) Broker(id int32) *broker.Broker {
	c.mu.Lock()
	defer c.mu.Unlock()
	if m, err := c.member(id); err == nil {
		return m.b
	}
	return nil
}

// Controller returns the active controller's id as the running nodes
// agree on it, or -1 while they do not.
func (c *Cluster) Controller() int32 {
	c.mu.Lock()
	defer c.mu.Unlock()
	leader := int32(-1)
	for _, m := range c.nodes[1:] {
		if m.b == nil {
			continue
		}
		l := m.b.ActiveController()
		if leader == -1 {
			leader = l
		}
		if l != leader || l == -1 {
			return -1
		}
	}
	return leader
}

// Stop shuts node id down cleanly.
func (c *Cluster) Stop(id int32) error {
	c.mu.Lock()
	m, err := c.member(id)
	if err != nil {
		c.mu.Unlock()
		return err
	}
	b := m.b
	m.b = nil
	c.mu.Unlock()
	if b == nil {
		return nil
	}
	return b.Close()
}

// Restart starts a stopped node on its data and ports.
func (c *Cluster) Restart(id int32) error {
	if _, err := c.member(id); err != nil {
		return err
	}
	return c.start(id)
}

// Cut severs node id's links to every other node; Heal restores them.
func (c *Cluster) Cut(id int32) { c.setLinks(id, linkCut) }

// Heal undoes Cut and Pause.
func (c *Cluster) Heal(id int32) { c.setLinks(id, linkUp) }

// CutReplication severs only node id's replication links (fetches to and
// from it), leaving its quorum links up: it stays registered and keeps its
// leaderships while its followers stop receiving its writes. Heal undoes
// it.
func (c *Cluster) CutReplication(id int32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k, p := range c.repl {
		if k[0] == id || k[1] == id {
			p.set(linkCut)
		}
	}
}

// Pause freezes node id's links (open, silent); Resume is Heal.
func (c *Cluster) Pause(id int32) { c.setLinks(id, linkPaused) }

// Resume undoes Pause.
func (c *Cluster) Resume(id int32) { c.setLinks(id, linkUp) }

func (c *Cluster) setLinks(id int32, s linkState) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.setLinksLocked(id, s)
}

// setLinksLocked is setLinks. REQUIRES: c.mu held.
func (c *Cluster) setLinksLocked(id int32, s linkState) {
	for _, links := range []map[[2]int32]*proxy{c.links, c.repl} {
		for k, p := range links {
			if k[0] == id || k[1] == id {
				p.set(s)
			}
		}
	}
}

// Close stops every node and proxy.
func (c *Cluster) Close() error {
	// All at once, as a whole cluster is stopped: each node's controlled
	// shutdown then finds the quorum still up, where one by one the last
	// nodes would wait for a controller that is gone.
	errs := make([]error, len(c.nodes))
	var wg sync.WaitGroup
	for id := int32(1); id < int32(len(c.nodes)); id++ {
		if c.nodes[id] != nil {
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs[id] = c.Stop(id)
			}()
		}
	}
	wg.Wait()
	c.mu.Lock()
	for _, p := range c.links {
		p.close()
	}
	for _, p := range c.repl {
		p.close()
	}
	for _, m := range c.nodes[1:] {
		if m != nil && m.client != nil {
			m.client.close()
		}
	}
	c.mu.Unlock()
	return errors.Join(errs...)
}
