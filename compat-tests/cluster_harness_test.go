package compattests

// A multi-node fjord cluster for the TestCluster... tests: n processes, by
// default each broker and controller (KRaft combined mode), forming one
// metadata quorum. startClusterRoles mixes in controller-only nodes (a
// voter with only a CONTROLLER listener) and broker-only nodes (a client
// listener only; not a voter, it follows the metadata log). Each node is a
// *Broker from harness_test.go, launched on fixed ports (the voter list
// names every voter's CONTROLLER listener, so a node must come back on the
// same ports after a restart).

import (
	"context"
	"crypto/tls"
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
	"github.com/twmb/franz-go/pkg/sasl/plain"
)

// Session and heartbeat settings of every cluster test: a silent broker is
// fenced after clusterSessionTimeout.
const (
	clusterSessionTimeout  = 3 * time.Second
	clusterHeartbeatPeriod = 500 * time.Millisecond
)

// process.roles of a cluster node.
const (
	roleCombined   = "broker,controller"
	roleController = "controller" // a voter serving no clients
	roleBroker     = "broker"     // not a voter: follows the metadata log
)

// Cluster is n fjord nodes forming one metadata quorum.
type Cluster struct {
	t           testing.TB
	nodes       []*Broker // nodes[id-1]
	roles       []string  // process.roles of node id at [id-1]
	clientPorts []string  // PLAINTEXT listener of node id at [id-1] (unused on a controller-only node)
	ctlPorts    []string  // CONTROLLER listener of node id at [id-1] (unused on a broker-only node)
	// netns, if set, holds every node; the harness dials into it.
	netns *netNS
	// hosts, if set, is node id's listener address at [id-1] (a node of a
	// namespaced network, each in its own namespace); else 127.0.0.1.
	hosts []string
	// dial, if set, is how the harness and the pinned clients reach every
	// node (from the client namespace of a namespaced network).
	dial dialFunc

	// clientOpts are extra options of every pinned client: SASL when the
	// overrides ask the probe to authenticate (compat.probe.sasl.plain).
	clientOpts []kgo.Opt
	// tls, when set, is the pinned clients' TLS configuration: the client
	// listener is TLS (compat.probe.tls.ca).
	tls *tls.Config

	mu      sync.Mutex
	clients map[int]*kgo.Client // pinned clients by node id
}

// startCluster starts n combined nodes (ids 1..n) with extra --override
// settings, all at once (they need each other to elect a controller), and
// waits until every node answers Metadata listing all n brokers. A node
// that could not bind its ports (taken between picking and binding) makes
// the whole cluster start again on new ports.
func startCluster(t testing.TB, n int, overrides ...string) *Cluster {
	t.Helper()
	roles := make([]string, n)
	for i := range roles {
		roles[i] = roleCombined
	}
	return startClusterRoles(t, roles, overrides...)
}

// startClusterRoles is startCluster with node id's process.roles at
// roles[id-1] (roleCombined, roleController or roleBroker). The voters are
// the nodes with the controller role. It waits until every node with the
// broker role answers Metadata listing exactly the broker-role nodes; a
// controller-only node serves no Metadata and is ready once it logs that
// it started as one.
func startClusterRoles(t testing.TB, roles []string, overrides ...string) *Cluster {
	t.Helper()
	return startClusterAt(t, nil, roles, overrides...)
}

// clusterPlace puts a cluster's nodes in a network namespace on fixed
// ports instead of on free ports of the host: all in ns on 127.0.0.1, or
// (nodeNS set) node id alone in nodeNS[id-1] listening on hosts[id-1],
// reached through dial (a namespaced network: netLab).
type clusterPlace struct {
	ns          *netNS
	clientPorts []string // of node id at [id-1]
	ctlPorts    []string // of node id at [id-1]

	nodeNS []*netNS // of node id at [id-1]
	hosts  []string // of node id at [id-1]
	dial   dialFunc // from outside the nodes' namespaces to any node
}

// startClusterIn is startCluster with the n combined nodes inside
// place.ns on place's ports.
func startClusterIn(t testing.TB, place *clusterPlace, n int, overrides ...string) *Cluster {
	t.Helper()
	roles := make([]string, n)
	for i := range roles {
		roles[i] = roleCombined
	}
	return startClusterAt(t, place, roles, overrides...)
}

// startClusterAt is startClusterRoles on place (nil: free host ports).
// Ports of a place are fixed, so a bind failure there is not retried.
func startClusterAt(t testing.TB, place *clusterPlace, roles []string, overrides ...string) *Cluster {
	t.Helper()
	for attempt := 1; ; attempt++ {
		c, err := launchCluster(t, roles, overrides, place)
		if err == nil {
			c.waitAllListed(t, 30*time.Second)
			return c
		}
		c.killAll()
		if errors.Is(err, errBindFailed) && attempt < 4 && place == nil {
			t.Logf("cluster start attempt %d: %v; retrying on new ports", attempt, err)
			continue
		}
		t.Fatalf("starting a %d-node cluster (roles %q): %v", len(roles), roles, err)
	}
}

func hasRole(roles, role string) bool {
	return slices.Contains(strings.Split(roles, ","), role)
}

func launchCluster(t testing.TB, roles []string, overrides []string, place *clusterPlace) (*Cluster, error) {
	t.Helper()
	n := len(roles)
	c := &Cluster{t: t, roles: roles, clients: map[int]*kgo.Client{}}
	if place != nil {
		if len(place.clientPorts) != n || len(place.ctlPorts) != n {
			t.Fatalf("cluster place: %d client and %d controller ports for %d nodes", len(place.clientPorts), len(place.ctlPorts), n)
		}
		c.clientPorts, c.ctlPorts, c.netns = place.clientPorts, place.ctlPorts, place.ns
		c.hosts, c.dial = place.hosts, place.dial
	} else {
		ports := freePorts(t, 2*n)
		c.clientPorts, c.ctlPorts = ports[:n], ports[n:]
	}
	for _, o := range overrides {
		if up, ok := strings.CutPrefix(o, "compat.probe.sasl.plain="); ok {
			u, p, _ := strings.Cut(up, ":")
			c.clientOpts = append(c.clientOpts, kgo.SASL(plain.Auth{User: u, Pass: p}.AsMechanism()))
		}
		if ca, ok := strings.CutPrefix(o, "compat.probe.tls.ca="); ok {
			c.tls = probeTLS(t, ca)
		}
	}
	var voters []string
	for i := 0; i < n; i++ {
		if hasRole(roles[i], "controller") {
			voters = append(voters, fmt.Sprintf("%d@%s", i+1, net.JoinHostPort(c.host(i+1), c.ctlPorts[i])))
		}
	}
	for i := 0; i < n; i++ {
		id := i + 1
		var listeners []string
		if hasRole(roles[i], "broker") {
			listeners = append(listeners, "PLAINTEXT://"+net.JoinHostPort(c.host(id), c.clientPorts[i]))
		}
		if hasRole(roles[i], "controller") {
			listeners = append(listeners, "CONTROLLER://"+net.JoinHostPort(c.host(id), c.ctlPorts[i]))
		}
		ov := []string{
			"node.id=" + strconv.Itoa(id),
			"process.roles=" + roles[i],
			"controller.quorum.voters=" + strings.Join(voters, ","),
			// Given after the harness's own listeners override, so it wins.
			"listeners=" + strings.Join(listeners, ","),
			// Every listener name needs a protocol; a test's own map
			// (an override, given later) wins.
			"listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
			fmt.Sprintf("broker.session.timeout.ms=%d", clusterSessionTimeout.Milliseconds()),
			fmt.Sprintf("broker.heartbeat.interval.ms=%d", clusterHeartbeatPeriod.Milliseconds()),
		}
		node := newClusterNode(t, id, append(ov, overrides...))
		node.netns = c.netns
		if place != nil && place.nodeNS != nil {
			node.netns = place.nodeNS[i]
		}
		node.host, node.dial = c.hosts0(id), c.dial
		c.nodes = append(c.nodes, node)
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
	for i := range c.nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = c.launchNode(i + 1)
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			return c, fmt.Errorf("node %d: %w", i+1, err)
		}
	}
	t.Logf("cluster of %d nodes (roles %q) serving after %v (client ports %v, controller ports %v)",
		n, roles, time.Since(start).Round(time.Millisecond), c.clientPorts, c.ctlPorts)
	return c, nil
}

// launchNode starts node id's process on its ports and waits until it is
// ready: answering Metadata with the broker role, else (controller-only)
// having logged that it started as one.
func (c *Cluster) launchNode(id int) error {
	if c.IsBroker(id) {
		return c.nodes[id-1].launch(c.clientPorts[id-1])
	}
	return c.nodes[id-1].launchController(c.ctlPorts[id-1])
}

// controllerOnlyLine is what a controller-only node logs once its
// CONTROLLER listener is bound and its quorum member started.
const controllerOnlyLine = "controller-only node"

// launchController is Broker.launch for a controller-only node, which has
// no client listener to probe: it waits for controllerOnlyLine in the log
// this process writes, then for its CONTROLLER listener (ctlPort) to
// accept TCP.
func (b *Broker) launchController(ctlPort string) error {
	addr := net.JoinHostPort(b.listenHost(), ctlPort)
	args := []string{"--override", "log.dirs=" + b.DataDir}
	for _, o := range b.overrides {
		args = append(args, "--override", o)
	}
	b.mu.Lock()
	b.starts++
	fmt.Fprintf(b.logFile, "=== compat-tests: start #%d (controller only) on %s: %s %s\n", b.starts, addr, fjordBin, strings.Join(args, " "))
	var from int64 // where this start's lines begin
	if st, err := b.logFile.Stat(); err == nil {
		from = st.Size()
	}
	cmd := b.command(args)
	cmd.Stdout = b.logFile
	cmd.Stderr = b.logFile
	if err := cmd.Start(); err != nil {
		b.mu.Unlock()
		return err
	}
	done := make(chan struct{})
	b.cmd, b.done, b.waitErr, b.Addr = cmd, done, nil, addr
	b.mu.Unlock()
	go func() {
		err := cmd.Wait()
		b.mu.Lock()
		b.waitErr = err
		b.mu.Unlock()
		close(done)
	}()

	deadline := time.Now().Add(30 * time.Second)
	last := errors.New("no " + strconv.Quote(controllerOnlyLine) + " log line yet")
	for time.Now().Before(deadline) {
		select {
		case <-done:
			b.mu.Lock()
			werr := b.waitErr
			b.mu.Unlock()
			if strings.Contains(b.tailLog(20), "address already in use") {
				return fmt.Errorf("%w: %v", errBindFailed, werr)
			}
			return fmt.Errorf("controller exited during start-up: %v\n%s", werr, b.tailLog(50))
		default:
		}
		if log := b.readLog(); int64(len(log)) > from && strings.Contains(log[from:], controllerOnlyLine) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			conn, err := b.dialer()(ctx, "tcp", addr)
			cancel()
			if err == nil {
				conn.Close()
				return nil
			}
			last = err
		}
		time.Sleep(25 * time.Millisecond)
	}
	b.Kill()
	return fmt.Errorf("controller-only node at %s not ready after 30s (last: %v)", addr, last)
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

// host is node id's listener address.
func (c *Cluster) host(id int) string {
	if h := c.hosts0(id); h != "" {
		return h
	}
	return "127.0.0.1"
}

// hosts0 is node id's own listener address, "" for the default.
func (c *Cluster) hosts0(id int) string {
	if c.hosts == nil {
		return ""
	}
	return c.hosts[id-1]
}

// ClientOpts are the options every client of the cluster needs besides
// its seeds: how to reach the nodes, SASL.
func (c *Cluster) ClientOpts() []kgo.Opt {
	opts := slices.Clone(c.clientOpts)
	if c.dial != nil {
		opts = append(opts, kgo.Dialer(c.dial))
	}
	return opts
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

// Roles returns node id's process.roles.
func (c *Cluster) Roles(id int) string {
	c.Node(id)
	return c.roles[id-1]
}

// IsBroker reports whether node id has the broker role (serves clients).
func (c *Cluster) IsBroker(id int) bool { return hasRole(c.Roles(id), "broker") }

// IsVoter reports whether node id has the controller role (votes).
func (c *Cluster) IsVoter(id int) bool { return hasRole(c.Roles(id), "controller") }

// BrokerIDs returns the ids of the nodes with the broker role.
func (c *Cluster) BrokerIDs() []int {
	return slices.DeleteFunc(c.IDs(), func(id int) bool { return !c.IsBroker(id) })
}

// VoterIDs returns the ids of the nodes with the controller role.
func (c *Cluster) VoterIDs() []int {
	return slices.DeleteFunc(c.IDs(), func(id int) bool { return !c.IsVoter(id) })
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

// Addr is node id's client address (the same across restarts). A
// controller-only node has none.
func (c *Cluster) Addr(id int) string {
	if !c.IsBroker(id) {
		c.t.Fatalf("node %d (process.roles=%s) has no client address", id, c.Roles(id))
	}
	return net.JoinHostPort(c.host(id), c.clientPorts[id-1])
}

// CtlAddr is a voter's CONTROLLER listener address.
func (c *Cluster) CtlAddr(id int) string {
	if !c.IsVoter(id) {
		c.t.Fatalf("node %d (process.roles=%s) has no CONTROLLER listener", id, c.Roles(id))
	}
	return net.JoinHostPort(c.host(id), c.ctlPorts[id-1])
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

// LiveBrokerIDs returns the ids of the running nodes with the broker role.
func (c *Cluster) LiveBrokerIDs() []int {
	return slices.DeleteFunc(c.LiveIDs(), func(id int) bool { return !c.IsBroker(id) })
}

// Addrs returns the client addresses of the running brokers.
func (c *Cluster) Addrs() []string {
	var out []string
	for _, id := range c.LiveBrokerIDs() {
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
// registered and unfenced it), or for a controller-only node until it
// logged its start. A port still held (bind failure) is retried
// for a few seconds: the ports cannot change, the voter list names them.
func (c *Cluster) Restart(id int) {
	c.t.Helper()
	if c.Running(id) {
		c.t.Fatalf("Restart(%d) with the node still running", id)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := c.launchNode(id)
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
	addr := c.Addr(id)
	c.mu.Lock()
	defer c.mu.Unlock()
	if cl, ok := c.clients[id]; ok {
		return cl
	}
	dial := c.Node(id).dialer()
	cl, err := kgo.NewClient(append([]kgo.Opt{
		kgo.SeedBrokers(addr),
		kgo.Dialer(func(ctx context.Context, network, _ string) (net.Conn, error) {
			if c.tls != nil {
				if c.netns != nil {
					return nil, fmt.Errorf("node %d: TLS into a network namespace is not supported", id)
				}
				d := tls.Dialer{Config: c.tls}
				return d.DialContext(ctx, network, addr)
			}
			return dial(ctx, network, addr)
		}),
		kgo.DialTimeout(time.Second),
		kgo.RequestRetries(2),
		kgo.RetryTimeout(5 * time.Second),
		kgo.MetadataMinAge(10 * time.Millisecond),
	}, c.clientOpts...)...)
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

// Controller returns the controller id reported by the first live broker
// that knows one, or -1. With controller-only voters that is the answering
// broker itself while the active controller is not a broker.
func (c *Cluster) Controller() int {
	for _, id := range c.LiveBrokerIDs() {
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

// waitBrokers waits until every running broker's Metadata lists exactly
// the brokers want (ids), returning how long that took.
func (c *Cluster) waitBrokers(t testing.TB, timeout time.Duration, want []int32) time.Duration {
	t.Helper()
	want = slices.Sorted(slices.Values(want))
	return c.Await(t, timeout, fmt.Sprintf("every live node lists brokers %v", want), func() (bool, string) {
		var states []string
		ok := true
		for _, id := range c.LiveBrokerIDs() {
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
	c.waitBrokers(t, timeout, toInt32s(c.BrokerIDs()))
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
// too; FJORD_KEEP_LOGS=dir also copies the whole logs to dir/<test>/, as
// t.TempDir is removed when the test ends.
func (c *Cluster) dumpLogs(n int) {
	if dir := os.Getenv("FJORD_KEEP_LOGS"); dir != "" {
		dst := filepath.Join(dir, strings.ReplaceAll(c.t.Name(), "/", "_"))
		if err := os.MkdirAll(dst, 0o755); err != nil {
			c.t.Logf("FJORD_KEEP_LOGS: %v", err)
		}
		for _, b := range c.nodes {
			err := os.WriteFile(filepath.Join(dst, filepath.Base(b.logPath)), []byte(b.readLog()), 0o644)
			if err != nil {
				c.t.Logf("FJORD_KEEP_LOGS: %v", err)
			}
		}
		c.t.Logf("node logs kept in %s", dst)
	}
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
