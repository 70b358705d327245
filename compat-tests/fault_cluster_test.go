package compattests

// The cluster the fault tests run: three combined fjord processes on
// loopback whose every inter-node link goes through a faultProxy owned by
// the test, so a node can be killed (SIGKILL), frozen (SIGSTOP), or cut off
// from the other two while clients still reach it.
//
// Node i reaches node j through proxies it alone uses:
//   - quorum: node i's controller.quorum.voters lists j@<proxy ctl i→j> for
//     every j≠i, and itself at its real CONTROLLER address;
//   - replication: node j has one listener R<i> per node i, advertised at
//     <proxy repl i→j>, and node i fetches through
//     inter.broker.listener.name=R<i>.
//
// Clients use each node's PLAINTEXT listener directly. Every port (the
// nodes' and the proxies') is fixed for the life of the test, so a node
// restarts on the same ports. broker/brokertest/cluster.go builds the same
// topology in one process.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// faultClusterID is set explicitly: the default is derived from the voter
// string, which differs per node here.
const faultClusterID = "fjord-faults-cluster-0001"

// faultBrokerSettings are the broker settings every fault test runs with.
var faultBrokerSettings = []string{
	"min.insync.replicas=2",
	"replica.lag.time.max.ms=3000",
	"broker.session.timeout.ms=3000",
	"broker.heartbeat.interval.ms=500",
	"default.replication.factor=3",
	"offsets.topic.replication.factor=3",
	"group.initial.rebalance.delay.ms=0",
}

// faultCluster is a Cluster (Kill, Restart, Client, Metadata, logs...) plus
// the proxies on its inter-node links and the faults currently applied.
type faultCluster struct {
	*Cluster
	ctl  map[[2]int]*faultProxy // [i,j]: node i's quorum traffic to node j
	repl map[[2]int]*faultProxy // [i,j]: node i's replica fetches from node j

	// rf is the replication factor awaitFullISR expects; 0: every node.
	rf int

	// metrics[id-1], when the cluster was started with metrics, is node
	// id's fjord.metrics.listener address.
	metrics []string

	fmu    sync.Mutex
	paused map[int]bool // SIGSTOPped nodes
	cut    map[int]bool // nodes whose links are cut
}

// faultClusterOpts are launch options beyond the nodes' settings.
type faultClusterOpts struct {
	// metrics gives each node a /metrics listener on a port of its own.
	metrics bool
}

// startFaultCluster starts n combined nodes with faultBrokerSettings and
// the proxies, and waits until every node lists all n brokers. A node that
// could not bind its ports makes the whole cluster start again on new ones.
func startFaultCluster(t testing.TB, n int, extra ...string) *faultCluster {
	t.Helper()
	return startFaultClusterOpts(t, n, faultClusterOpts{}, extra...)
}

// startFaultClusterOpts is startFaultCluster with launch options.
func startFaultClusterOpts(t testing.TB, n int, opts faultClusterOpts, extra ...string) *faultCluster {
	t.Helper()
	for attempt := 1; ; attempt++ {
		fc, err := launchFaultCluster(t, n, opts, extra)
		if err == nil {
			fc.waitAllListed(t, 30*time.Second)
			return fc
		}
		fc.killAll()
		fc.closeProxies()
		if errors.Is(err, errBindFailed) && attempt < 4 {
			t.Logf("fault cluster start attempt %d: %v; retrying on new ports", attempt, err)
			continue
		}
		t.Fatalf("starting a %d-node fault cluster: %v", n, err)
	}
}

func launchFaultCluster(t testing.TB, n int, opts faultClusterOpts, extra []string) (*faultCluster, error) {
	t.Helper()
	nports := n * (2 + n)
	if opts.metrics {
		nports += n
	}
	ports := freePorts(t, nports)
	roles := make([]string, n)
	for i := range roles {
		roles[i] = roleCombined
	}
	c := &Cluster{t: t, roles: roles, clientPorts: ports[:n], ctlPorts: ports[n : 2*n], clients: map[int]*kgo.Client{}}
	// replPort(j, i) is node j's listener R<i>.
	replPort := func(j, i int) string { return ports[2*n+(j-1)*n+(i-1)] }
	fc := &faultCluster{Cluster: c, ctl: map[[2]int]*faultProxy{}, repl: map[[2]int]*faultProxy{},
		paused: map[int]bool{}, cut: map[int]bool{}}
	if opts.metrics {
		for _, p := range ports[n*(2+n):] {
			fc.metrics = append(fc.metrics, "127.0.0.1:"+p)
		}
	}
	for i := 1; i <= n; i++ {
		for j := 1; j <= n; j++ {
			if i == j {
				continue
			}
			p, err := newFaultProxy("127.0.0.1:" + c.ctlPorts[j-1])
			if err != nil {
				return fc, err
			}
			fc.ctl[[2]int{i, j}] = p
			if p, err = newFaultProxy("127.0.0.1:" + replPort(j, i)); err != nil {
				return fc, err
			}
			fc.repl[[2]int{i, j}] = p
		}
	}
	for i := 1; i <= n; i++ {
		var voters, listeners, advertised []string
		for j := 1; j <= n; j++ {
			addr := "127.0.0.1:" + c.ctlPorts[i-1]
			if j != i {
				addr = fc.ctl[[2]int{i, j}].Addr()
			}
			voters = append(voters, fmt.Sprintf("%d@%s", j, addr))
		}
		listeners = append(listeners, "PLAINTEXT://127.0.0.1:"+c.clientPorts[i-1], "CONTROLLER://127.0.0.1:"+c.ctlPorts[i-1])
		protocols := []string{"PLAINTEXT:PLAINTEXT", "CONTROLLER:PLAINTEXT"}
		for k := 1; k <= n; k++ {
			listeners = append(listeners, fmt.Sprintf("R%d://127.0.0.1:%s", k, replPort(i, k)))
			protocols = append(protocols, fmt.Sprintf("R%d:PLAINTEXT", k))
			if k != i {
				advertised = append(advertised, fmt.Sprintf("R%d://%s", k, fc.repl[[2]int{k, i}].Addr()))
			}
		}
		ov := []string{
			"node.id=" + strconv.Itoa(i),
			"process.roles=" + roleCombined,
			"cluster.id=" + faultClusterID,
			"controller.quorum.voters=" + strings.Join(voters, ","),
			// Given after the harness's own listeners override, so it wins.
			"listeners=" + strings.Join(listeners, ","),
			"advertised.listeners=" + strings.Join(advertised, ","),
			"listener.security.protocol.map=" + strings.Join(protocols, ","),
			fmt.Sprintf("inter.broker.listener.name=R%d", i),
		}
		if opts.metrics {
			ov = append(ov, "fjord.metrics.listener="+fc.metrics[i-1])
		}
		ov = append(ov, faultBrokerSettings...)
		c.nodes = append(c.nodes, newClusterNode(t, i, append(ov, extra...)))
	}
	t.Cleanup(func() {
		// Thaw frozen nodes first, so their own clean-up (SIGKILL) and
		// log reading behave as for any node.
		fc.fmu.Lock()
		for id := range fc.paused {
			fc.signal(id, syscall.SIGCONT)
		}
		fc.fmu.Unlock()
		c.mu.Lock()
		for id, cl := range c.clients {
			cl.Close()
			delete(c.clients, id)
		}
		c.mu.Unlock()
		if t.Failed() || os.Getenv("FJORD_CLUSTER_LOGS") != "" {
			c.dumpLogs(100)
		}
		fc.closeProxies()
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
			return fc, fmt.Errorf("node %d: %w", i+1, err)
		}
	}
	t.Logf("fault cluster of %d nodes serving after %v (client ports %v, controller ports %v, %d proxies)",
		n, time.Since(start).Round(time.Millisecond), c.clientPorts, c.ctlPorts, len(fc.ctl)+len(fc.repl))
	return fc, nil
}

func (fc *faultCluster) closeProxies() {
	for _, p := range fc.ctl {
		p.Close()
	}
	for _, p := range fc.repl {
		p.Close()
	}
}

// seeds are the options of a workload client: every node as a seed, how
// to reach the nodes (ClientOpts), then opts.
func (fc *faultCluster) seeds(opts ...kgo.Opt) []kgo.Opt {
	return append(append(fc.ClientOpts(), kgo.SeedBrokers(fc.AllAddrs()...)), opts...)
}

// AllAddrs is every node's client address, running or not.
func (fc *faultCluster) AllAddrs() []string {
	var out []string
	for _, id := range fc.IDs() {
		out = append(out, fc.Addr(id))
	}
	return out
}

func (fc *faultCluster) signal(id int, sig syscall.Signal) error {
	b := fc.Node(id)
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.cmd == nil {
		return fmt.Errorf("node %d is not running", id)
	}
	return b.cmd.Process.Signal(sig)
}

// Freeze sends SIGSTOP to node id: the process keeps its sockets but does
// nothing, as a node stalled by GC or a hung disk.
func (fc *faultCluster) Freeze(t testing.TB, id int) {
	t.Helper()
	fc.fmu.Lock()
	defer fc.fmu.Unlock()
	if err := fc.signal(id, syscall.SIGSTOP); err != nil {
		t.Fatalf("SIGSTOP node %d: %v", id, err)
	}
	fc.paused[id] = true
}

// Thaw sends SIGCONT to a frozen node.
func (fc *faultCluster) Thaw(t testing.TB, id int) {
	t.Helper()
	fc.fmu.Lock()
	defer fc.fmu.Unlock()
	if err := fc.signal(id, syscall.SIGCONT); err != nil {
		t.Fatalf("SIGCONT node %d: %v", id, err)
	}
	delete(fc.paused, id)
}

// setLinks puts every proxy into or out of node id (quorum and
// replication, both directions) in state s.
func (fc *faultCluster) setLinks(id int, s faultLinkState) {
	for _, links := range []map[[2]int]*faultProxy{fc.ctl, fc.repl} {
		for k, p := range links {
			if k[0] == id || k[1] == id {
				p.Set(s)
			}
		}
	}
}

// Isolate cuts node id off from the other nodes: its quorum and replication
// connections are reset and new ones refused. Clients still reach it.
func (fc *faultCluster) Isolate(id int) {
	fc.fmu.Lock()
	defer fc.fmu.Unlock()
	fc.setLinks(id, faultLinkCut)
	fc.cut[id] = true
}

// Rejoin undoes Isolate.
func (fc *faultCluster) Rejoin(id int) {
	fc.fmu.Lock()
	defer fc.fmu.Unlock()
	fc.setLinks(id, faultLinkUp)
	delete(fc.cut, id)
}

// Healthy reports whether node id runs and is neither frozen nor cut off:
// its own answers are current.
func (fc *faultCluster) Healthy(id int) bool {
	fc.fmu.Lock()
	defer fc.fmu.Unlock()
	return fc.Running(id) && !fc.paused[id] && !fc.cut[id]
}

// HealthyIDs lists the nodes Healthy reports.
func (fc *faultCluster) HealthyIDs() []int {
	return slices.DeleteFunc(fc.IDs(), func(id int) bool { return !fc.Healthy(id) })
}

// Leaders returns partition -> leader of topic as a healthy node (other
// than the ones in not) sees it; an error if none answers.
func (fc *faultCluster) Leaders(topic string, not ...int) (map[int32]int32, error) {
	var errs []error
	for _, id := range fc.HealthyIDs() {
		if slices.Contains(not, id) {
			continue
		}
		m, err := fc.Metadata(id, topic)
		if err != nil {
			errs = append(errs, fmt.Errorf("node %d: %w", id, err))
			continue
		}
		td, ok := m.Topics[topic]
		if !ok || td.Err != nil {
			errs = append(errs, fmt.Errorf("node %d: topic %q missing or in error (%v)", id, topic, td.Err))
			continue
		}
		out := map[int32]int32{}
		for p, pd := range td.Partitions {
			out[p] = pd.Leader
		}
		return out, nil
	}
	return nil, fmt.Errorf("no healthy node answered metadata: %w", errors.Join(errs...))
}

// awaitLeaderOf waits up to timeout for partition p of topic to have a
// live leader (as a healthy node sees it) and returns it, or -1.
func (fc *faultCluster) awaitLeaderOf(topic string, p int32, timeout time.Duration) int {
	deadline := time.Now().Add(timeout)
	for {
		if ls, err := fc.Leaders(topic); err == nil {
			if l, ok := ls[p]; ok && l > 0 && fc.Running(int(l)) {
				return int(l)
			}
		}
		if time.Now().After(deadline) {
			return -1
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// awaitFullISR waits until every node answers Metadata for topic with the
// same layout and every partition led with all n replicas in sync. It
// returns false (after logging the last state) if that does not happen
// within timeout: the cluster did not recover.
func (fc *faultCluster) awaitFullISR(t testing.TB, topic string, timeout time.Duration) (time.Duration, bool) {
	t.Helper()
	ids := fc.IDs()
	rf := fc.rf
	if rf == 0 {
		rf = len(ids)
	}
	check := replicasOn(ids, rf)
	start := time.Now()
	var state string
	for {
		ok := true
		var views []string
		var first string
		for i, id := range ids {
			m, err := fc.Metadata(id, topic)
			if err != nil {
				ok = false
				views = append(views, fmt.Sprintf("node %d: %v", id, err))
				continue
			}
			td, present := m.Topics[topic]
			if !present || td.Err != nil {
				ok = false
				views = append(views, fmt.Sprintf("node %d: topic missing or in error (%v)", id, td.Err))
				continue
			}
			l := topicLayout(td)
			views = append(views, fmt.Sprintf("node %d: %s", id, l))
			if i == 0 {
				first = l
				if why := check(td); why != "" {
					ok = false
					views = append(views, "  "+why)
				}
			} else if l != first {
				ok = false
			}
		}
		if ok {
			return time.Since(start), true
		}
		state = strings.Join(views, "\n")
		if time.Since(start) > timeout {
			t.Errorf("topic %q: not every partition led with a full ISR on every node within %v; last state:\n%s", topic, timeout, state)
			return time.Since(start), false
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// createFaultTopic creates topic (partitions, RF 3) through a node and
// waits until every node agrees on it with full ISRs.
func (fc *faultCluster) createFaultTopic(t testing.TB, topic string, partitions int32) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	resp, err := fc.Admin(1).CreateTopic(ctx, partitions, 3, nil, topic)
	if err != nil {
		t.Fatalf("create %q: %v (%s)", topic, err, resp.ErrMessage)
	}
	if _, ok := fc.awaitFullISR(t, topic, 30*time.Second); !ok {
		t.FailNow()
	}
}

// stableEndOffsets waits until every partition of topic reports the same
// end offset (high watermark) twice 500ms apart and returns it.
func (fc *faultCluster) stableEndOffsets(t testing.TB, topic string, timeout time.Duration) map[int32]int64 {
	t.Helper()
	adm := kadm.NewClient(newClient(t, fc.AllAddrs()[0], fc.seeds()...))
	deadline := time.Now().Add(timeout)
	var prev map[int32]int64
	var last error
	for time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		lo, err := adm.ListEndOffsets(ctx, topic)
		cancel()
		if err == nil {
			err = lo.Error()
		}
		if err != nil {
			last = err
			prev = nil
			time.Sleep(200 * time.Millisecond)
			continue
		}
		cur := map[int32]int64{}
		lo.Each(func(o kadm.ListedOffset) { cur[o.Partition] = o.Offset })
		if prev != nil && sameOffsets(prev, cur) {
			return cur
		}
		prev = cur
		time.Sleep(500 * time.Millisecond)
	}
	t.Fatalf("end offsets of %q not stable within %v (last error %v, last %v)", topic, timeout, last, fmtOffsets(prev))
	return nil
}

// faultEvidencePatterns select the log lines worth showing when a fault
// test finds a problem.
var faultEvidencePatterns = []string{
	"truncated", "ISR", "became the active controller", "session expired", "unfenced",
	"resigned", "leader resigned", `"level":"error"`, `"level":"warn"`, "panic",
}

// evidence returns, for every node, the log lines about topic partition p
// (replica state, truncation, ISR changes) and the cluster-level lines
// matching faultEvidencePatterns, at most max lines per node (the last ones).
func (fc *faultCluster) evidence(topic string, partitions []int32, max int) string {
	var sb strings.Builder
	var pres []*regexp.Regexp
	for _, p := range partitions {
		pres = append(pres, regexp.MustCompile(fmt.Sprintf(`"topic":%q,"partition":%d[,}]`, topic, p)))
	}
	for _, id := range fc.IDs() {
		var keep []string
		for _, l := range strings.Split(fc.Node(id).readLog(), "\n") {
			mine := false
			for _, re := range pres {
				if re.MatchString(l) {
					mine = true
				}
			}
			if strings.HasPrefix(l, "=== compat-tests") {
				keep = append(keep, l)
				continue
			}
			if strings.Contains(l, `"topic":"__consumer_offsets"`) {
				continue
			}
			if mine || (!strings.Contains(l, `"partition":`) && slices.ContainsFunc(faultEvidencePatterns, func(s string) bool { return strings.Contains(l, s) })) {
				keep = append(keep, l)
			}
		}
		if len(keep) > max {
			keep = append([]string{fmt.Sprintf("... %d earlier lines left out", len(keep)-max)}, keep[len(keep)-max:]...)
		}
		fmt.Fprintf(&sb, "==== node %d (%s): %d lines about %s partitions %v and the cluster:\n%s\n",
			id, fc.Node(id).logPath, len(keep), topic, partitions, strings.Join(keep, "\n"))
	}
	return sb.String()
}
