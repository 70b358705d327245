package compattests

// A multi-node fjord cluster for the TestCluster... tests: n processes that
// are each broker and controller (KRaft combined mode) and form one
// metadata quorum. Each node is a *Broker from harness_test.go, launched on
// fixed ports (the voter list names every node's CONTROLLER listener, so a
// node must come back on the same ports after a restart).

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Session and heartbeat settings of every cluster test: a silent broker is
// fenced after clusterSessionTimeout.
const (
	clusterSessionTimeout  = 3 * time.Second
	clusterHeartbeatPeriod = 500 * time.Millisecond
)

// Cluster is n fjord nodes forming one metadata quorum.
type Cluster struct {
	t           testing.TB
	nodes       []*Broker // nodes[id-1]
	clientPorts []string  // PLAINTEXT listener of node id at [id-1]
	ctlPorts    []string  // CONTROLLER listener of node id at [id-1]

	mu      sync.Mutex
	clients map[int]*kgo.Client // pinned clients by node id
}

// startCluster starts n nodes (ids 1..n) with extra --override settings,
// all at once (they need each other to elect a controller), and waits until
// every node answers Metadata listing all n brokers. A node that could not
// bind its ports (taken between picking and binding) makes the whole
// cluster start again on new ports.
func startCluster(t testing.TB, n int, overrides ...string) *Cluster {
	t.Helper()
	for attempt := 1; ; attempt++ {
		c, err := launchCluster(t, n, overrides)
		if err == nil {
			c.waitAllListed(t, 30*time.Second)
			return c
		}
		c.killAll()
		if errors.Is(err, errBindFailed) && attempt < 4 {
			t.Logf("cluster start attempt %d: %v; retrying on new ports", attempt, err)
			continue
		}
		t.Fatalf("starting a %d-node cluster: %v", n, err)
	}
}

func launchCluster(t testing.TB, n int, overrides []string) (*Cluster, error) {
	t.Helper()
	ports := freePorts(t, 2*n)
	c := &Cluster{t: t, clientPorts: ports[:n], ctlPorts: ports[n:], clients: map[int]*kgo.Client{}}
	var voters []string
	for i := 0; i < n; i++ {
		voters = append(voters, fmt.Sprintf("%d@127.0.0.1:%s", i+1, c.ctlPorts[i]))
	}
	for i := 0; i < n; i++ {
		id := i + 1
		ov := []string{
			"node.id=" + strconv.Itoa(id),
			"process.roles=broker,controller",
			"controller.quorum.voters=" + strings.Join(voters, ","),
			// Given after the harness's own listeners override, so it wins.
			fmt.Sprintf("listeners=PLAINTEXT://127.0.0.1:%s,CONTROLLER://127.0.0.1:%s", c.clientPorts[i], c.ctlPorts[i]),
			fmt.Sprintf("broker.session.timeout.ms=%d", clusterSessionTimeout.Milliseconds()),
			fmt.Sprintf("broker.heartbeat.interval.ms=%d", clusterHeartbeatPeriod.Milliseconds()),
		}
		c.nodes = append(c.nodes, newClusterNode(t, id, append(ov, overrides...)))
	}
	t.Cleanup(func() {
		c.mu.Lock()
		for id, cl := range c.clients {
			cl.Close()
			delete(c.clients, id)
		}
		c.mu.Unlock()
		if t.Failed() || os.Getenv("FJORD_CLUSTER_LOGS") != "" {
			c.dumpLogs(100)
		}
	})

	start := time.Now()
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i, b := range c.nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = b.launch(c.clientPorts[i])
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			return c, fmt.Errorf("node %d: %w", i+1, err)
		}
	}
	t.Logf("cluster of %d nodes serving after %v (client ports %v, controller ports %v)",
		n, time.Since(start).Round(time.Millisecond), c.clientPorts, c.ctlPorts)
	return c, nil
}

// newClusterNode is startBroker without the start: the same log file and
// clean-up, but the process is launched by the cluster on fixed ports.
func newClusterNode(t testing.TB, id int, overrides []string) *Broker {
	t.Helper()
	logDir := t.TempDir()
	b := &Broker{
		t:         t,
		DataDir:   filepath.Join(t.TempDir(), fmt.Sprintf("node%d", id)),
		overrides: overrides,
		logPath:   filepath.Join(logDir, fmt.Sprintf("fjord-node%d.log", id)),
	}
	f, err := os.OpenFile(b.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatalf("node %d log: %v", id, err)
	}
	b.logFile = f
	t.Cleanup(func() {
		b.Kill()
		b.reportErrorLines()
		b.logFile.Close()
	})
	return b
}

// freePorts returns k distinct loopback ports that were free a moment ago
// (all held open together, so no two are the same).
func freePorts(t testing.TB, k int) []string {
	t.Helper()
	var lns []net.Listener
	defer func() {
		for _, ln := range lns {
			ln.Close()
		}
	}()
	var out []string
	for range k {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatalf("finding a free port: %v", err)
		}
		lns = append(lns, ln)
		out = append(out, strconv.Itoa(ln.Addr().(*net.TCPAddr).Port))
	}
	return out
}

// N is the number of nodes.
func (c *Cluster) N() int { return len(c.nodes) }

// IDs returns every node id, 1..n.
func (c *Cluster) IDs() []int {
	ids := make([]int, len(c.nodes))
	for i := range ids {
		ids[i] = i + 1
	}
	return ids
}

// Node returns node id's process handle (Stop, Kill, logs). Restart a node
// with c.Restart, not Broker.Restart: the latter may move to a new port,
// which the voter list would not know.
func (c *Cluster) Node(id int) *Broker {
	if id < 1 || id > len(c.nodes) {
		c.t.Fatalf("no node %d in a %d-node cluster", id, len(c.nodes))
	}
	return c.nodes[id-1]
}

// Addr is node id's client address (the same across restarts).
func (c *Cluster) Addr(id int) string {
	return net.JoinHostPort("127.0.0.1", c.clientPorts[id-1])
}

// Running reports whether node id has a live process.
func (c *Cluster) Running(id int) bool {
	b := c.Node(id)
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.cmd != nil
}

// LiveIDs returns the ids of the nodes with a running process.
func (c *Cluster) LiveIDs() []int {
	var out []int
	for _, id := range c.IDs() {
		if c.Running(id) {
			out = append(out, id)
		}
	}
	return out
}

// Addrs returns the client addresses of the running nodes.
func (c *Cluster) Addrs() []string {
	var out []string
	for _, id := range c.LiveIDs() {
		out = append(out, c.Addr(id))
	}
	return out
}

// Kill sends SIGKILL to node id and waits for it to go. The node's pinned
// client is closed: the next Client(id) connects afresh to the restarted
// node instead of retrying on connections to the dead one.
func (c *Cluster) Kill(id int) {
	c.Node(id).Kill()
	c.mu.Lock()
	cl := c.clients[id]
	delete(c.clients, id)
	c.mu.Unlock()
	if cl != nil {
		cl.Close()
	}
}

func (c *Cluster) killAll() {
	for _, b := range c.nodes {
		b.Kill()
	}
}

// Restart starts node id again on its data directory and its own ports,
// and waits until it answers metadata (so until the controller has
// registered and unfenced it). A port still held (bind failure) is retried
// for a few seconds: the ports cannot change, the voter list names them.
func (c *Cluster) Restart(id int) {
	c.t.Helper()
	if c.Running(id) {
		c.t.Fatalf("Restart(%d) with the node still running", id)
	}
	b := c.Node(id)
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := b.launch(c.clientPorts[id-1])
		if err == nil {
			return
		}
		if errors.Is(err, errBindFailed) && time.Now().Before(deadline) {
			c.t.Logf("node %d could not bind its ports yet, retrying: %v", id, err)
			time.Sleep(200 * time.Millisecond)
			continue
		}
		c.t.Fatalf("restarting node %d: %v", id, err)
	}
}

// Client returns a franz-go client pinned to node id: every connection it
// opens, whatever broker it means to reach, goes to that node, so Metadata
// is that node's own answer and admin requests are forwarded by that node.
// Its requests fail (after a short retry) while the node is down.
func (c *Cluster) Client(id int) *kgo.Client {
	c.mu.Lock()
	defer c.mu.Unlock()
	if cl, ok := c.clients[id]; ok {
		return cl
	}
	addr := c.Addr(id)
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(addr),
		kgo.Dialer(func(ctx context.Context, network, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, network, addr)
		}),
		kgo.DialTimeout(time.Second),
		kgo.RequestRetries(2),
		kgo.RetryTimeout(5*time.Second),
		kgo.MetadataMinAge(10*time.Millisecond),
	)
	if err != nil {
		c.t.Fatalf("kgo.NewClient for node %d: %v", id, err)
	}
	c.clients[id] = cl
	return cl
}

// Admin is a kadm client over Client(id).
func (c *Cluster) Admin(id int) *kadm.Client {
	adm := kadm.NewClient(c.Client(id))
	adm.SetTimeoutMillis(10000)
	return adm
}

// Metadata asks node id itself for fresh metadata (topics nil = all),
// bypassing franz-go's metadata cache.
func (c *Cluster) Metadata(id int, topics ...string) (kadm.Metadata, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	// Asking for authorized operations makes kadm issue a direct request
	// instead of answering from the client's cache.
	return c.Admin(id).Metadata(kadm.WithAuthorizedOps(ctx), topics...)
}

// Controller returns the node id of the active controller as reported by
// the first live node that knows one, or -1.
func (c *Cluster) Controller() int {
	for _, id := range c.LiveIDs() {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		m, err := c.Admin(id).BrokerMetadata(kadm.WithAuthorizedOps(ctx))
		cancel()
		if err == nil && m.Controller >= 0 {
			return int(m.Controller)
		}
	}
	return -1
}

// WaitFor polls cond every 20ms until it holds, failing the test after
// timeout; it returns how long it took.
func (c *Cluster) WaitFor(t testing.TB, timeout time.Duration, cond func() bool) time.Duration {
	t.Helper()
	return c.Await(t, timeout, "condition", func() (bool, string) { return cond(), "" })
}

// Await is WaitFor with a description and the last observed state, both
// printed on timeout.
func (c *Cluster) Await(t testing.TB, timeout time.Duration, what string, cond func() (ok bool, state string)) time.Duration {
	t.Helper()
	start := time.Now()
	var state string
	for {
		var ok bool
		if ok, state = cond(); ok {
			return time.Since(start)
		}
		if time.Since(start) > timeout {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("%s: not reached within %v; last state: %s", what, timeout, state)
	return 0
}

// brokerIDs lists the broker ids of a metadata response.
func brokerIDs(m kadm.Metadata) []int32 {
	var ids []int32
	for _, b := range m.Brokers {
		ids = append(ids, b.NodeID)
	}
	slices.Sort(ids)
	return ids
}

// waitBrokers waits until every running node's Metadata lists exactly the
// brokers want (ids), returning how long that took.
func (c *Cluster) waitBrokers(t testing.TB, timeout time.Duration, want []int32) time.Duration {
	t.Helper()
	want = slices.Sorted(slices.Values(want))
	return c.Await(t, timeout, fmt.Sprintf("every live node lists brokers %v", want), func() (bool, string) {
		var states []string
		ok := true
		for _, id := range c.LiveIDs() {
			m, err := c.Metadata(id)
			if err != nil {
				ok = false
				states = append(states, fmt.Sprintf("node %d: %v", id, err))
				continue
			}
			got := brokerIDs(m)
			if !slices.Equal(got, want) {
				ok = false
			}
			states = append(states, fmt.Sprintf("node %d: brokers %v controller %d", id, got, m.Controller))
		}
		return ok, strings.Join(states, "; ")
	})
}

func (c *Cluster) waitAllListed(t testing.TB, timeout time.Duration) {
	t.Helper()
	var all []int32
	for _, id := range c.IDs() {
		all = append(all, int32(id))
	}
	c.waitBrokers(t, timeout, all)
}

// noisyLogLines are per-partition messages that drown everything else in a
// cluster node's log (a node holds 50 offsets partitions and more).
var noisyLogLines = []string{
	`"message":"replica state"`,
	`"message":"recovered log after unclean shutdown"`,
	`"message":"no longer coordinator for this offsets partition"`,
	`"message":"loaded committed offsets"`,
}

// dumpLogs prints the last n lines of every node's log, without the
// per-partition noise. FJORD_CLUSTER_LOGS=1 prints them for passing tests
// too.
func (c *Cluster) dumpLogs(n int) {
	for i, b := range c.nodes {
		var keep []string
		for _, l := range strings.Split(strings.TrimRight(b.readLog(), "\n"), "\n") {
			if !slices.ContainsFunc(noisyLogLines, func(s string) bool { return strings.Contains(l, s) }) {
				keep = append(keep, l)
			}
		}
		if len(keep) > n {
			keep = keep[len(keep)-n:]
		}
		c.t.Logf("==== node %d: last %d lines of %s (per-partition lines left out; \"component\":\"quorum\" lines give raft ids, node.id+1):\n%s",
			i+1, len(keep), b.logPath, strings.Join(keep, "\n"))
	}
}
