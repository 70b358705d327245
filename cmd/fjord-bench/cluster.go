package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The cluster benchmark (-cluster) measures the metadata quorum of a
// three-node fjord cluster on loopback: how long a created topic takes to
// reach every node's Metadata, how long 1,000 partitions take to create,
// and how long the cluster is without an active controller after the one
// it has is killed with SIGKILL (kill to first successful CreateTopics).

// clusterNode is one fjord process of the benchmark cluster.
type clusterNode struct {
	id         int
	addr, ctl  string // client and controller listener addresses
	metrics    string // metrics listener address
	dir        string
	proc       *fjordProc // nil while killed
	bin, voter string
}

// ClusterResult is the outcome of the cluster benchmark.
type ClusterResult struct {
	Nodes               int       `json:"nodes"`
	PropagationMs       []float64 `json:"propagation_ms"`         // CreateTopics sent → visible in every node's Metadata
	Create1000Ms        float64   `json:"create_1000_ms"`         // CreateTopics(1,000 partitions, RF 3) answered
	Create1000VisibleMs float64   `json:"create_1000_visible_ms"` // ... and visible on every node
	FailoverMs          []float64 `json:"failover_ms"`            // SIGKILL of the controller → first successful CreateTopics
	LeaderFailoverMs    []float64 `json:"leader_failover_ms"`     // SIGKILL of a partition leader → first acks=all write acknowledged by the new leader
	Error               string    `json:"error,omitempty"`
}

func runCluster(ctx context.Context, cfg *config, w io.Writer) int {
	res := &ClusterResult{Nodes: 3}
	err := benchCluster(ctx, cfg, res)
	if err != nil {
		res.Error = err.Error()
	}
	if cfg.json {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		enc.Encode(res)
	} else {
		printCluster(w, res)
	}
	if err != nil {
		return 1
	}
	return 0
}

func printCluster(w io.Writer, r *ClusterResult) {
	ms := func(v []float64) string {
		if len(v) == 0 {
			return "-"
		}
		s := slices.Clone(v)
		slices.Sort(s)
		return fmt.Sprintf("p50 %.0f ms, max %.0f ms (n=%d)", s[len(s)/2], s[len(s)-1], len(s))
	}
	fmt.Fprintf(w, "fjord cluster of %d nodes on loopback\n", r.Nodes)
	fmt.Fprintf(w, "  topic visible on every node after CreateTopics: %s\n", ms(r.PropagationMs))
	fmt.Fprintf(w, "  create 1,000 partitions (RF 3): answered %.0f ms, on every node %.0f ms\n", r.Create1000Ms, r.Create1000VisibleMs)
	fmt.Fprintf(w, "  controller failover (SIGKILL → CreateTopics ok): %s\n", ms(r.FailoverMs))
	fmt.Fprintf(w, "  partition leader failover (SIGKILL → acks=all write acked, RF 3, min.insync 2): %s\n", ms(r.LeaderFailoverMs))
	if r.Error != "" {
		fmt.Fprintf(w, "  error: %s\n", r.Error)
	}
}

func benchCluster(ctx context.Context, cfg *config, res *ClusterResult) error {
	bin, err := filepath.Abs(cfg.fjordBin)
	if err != nil {
		return err
	}
	root, err := os.MkdirTemp("", "fjord-bench-cluster-")
	if err != nil {
		return err
	}
	defer removeUnlessKept(root)
	nodes, err := newClusterNodes(bin, root)
	if err != nil {
		return err
	}
	for _, n := range nodes {
		if err := n.start(); err != nil {
			return err
		}
	}
	defer func() {
		for _, n := range nodes {
			n.stop()
		}
	}()
	if err := waitBrokers(ctx, nodes, 3); err != nil {
		return err
	}

	// Propagation.
	for i := range 20 {
		name := fmt.Sprintf("prop-%d", i)
		start := time.Now()
		if code := createTopic(ctx, nodes[i%3].addr, name, 1, 3); code != 0 {
			return fmt.Errorf("create %s: %v", name, kerr.ErrorForCode(code))
		}
		if err := waitVisible(ctx, nodes, name, 1); err != nil {
			return err
		}
		res.PropagationMs = append(res.PropagationMs, msSince(start))
	}
	logf("[cluster] propagation measured")

	// 1,000 partitions.
	start := time.Now()
	if code := createTopic(ctx, nodes[0].addr, "thousand", 1000, 3); code != 0 {
		return fmt.Errorf("create 1000 partitions: %v", kerr.ErrorForCode(code))
	}
	res.Create1000Ms = msSince(start)
	if err := waitVisible(ctx, nodes, "thousand", 1000); err != nil {
		return err
	}
	res.Create1000VisibleMs = msSince(start)
	logf("[cluster] 1000 partitions measured")

	if err := controllerFailover(ctx, nodes, 3, res); err != nil {
		return err
	}
	return leaderFailover(ctx, nodes, res)
}

// controllerFailover kills the active controller rounds times and measures
// the time to the first CreateTopics a survivor answers with success; the
// killed node is restarted (and the cluster whole again) between rounds.
func controllerFailover(ctx context.Context, nodes []*clusterNode, rounds int, res *ClusterResult) error {
	for round := range rounds {
		ctl, err := controllerOf(ctx, nodes)
		if err != nil {
			return err
		}
		victim := nodes[ctl-1]
		var survivor *clusterNode
		for _, n := range nodes {
			if n != victim {
				survivor = n
				break
			}
		}
		victim.kill()
		start := time.Now()
		for k := 0; ; k++ {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			name := fmt.Sprintf("failover-%d-%d", round, k)
			rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			code := createTopic(rctx, survivor.addr, name, 1, 1)
			cancel()
			if code == 0 || code == kerr.TopicAlreadyExists.Code {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
		res.FailoverMs = append(res.FailoverMs, msSince(start))
		logf("[cluster] failover %d: node %d killed, CreateTopics ok after %.0f ms", round, victim.id, res.FailoverMs[len(res.FailoverMs)-1])
		if err := victim.start(); err != nil {
			return err
		}
		if err := waitBrokers(ctx, nodes, 3); err != nil {
			return err
		}
	}
	return nil
}

// leaderFailover kills the leader of a replicated partition under acks=all
// load three times and measures the time to the first write the new leader
// acknowledges.
func leaderFailover(ctx context.Context, nodes []*clusterNode, res *ClusterResult) error {
	req := kmsg.NewPtrCreateTopicsRequest()
	t := kmsg.NewCreateTopicsRequestTopic()
	t.Topic, t.NumPartitions, t.ReplicationFactor = "failover", 1, 3
	two := "2"
	c := kmsg.NewCreateTopicsRequestTopicConfig()
	c.Name, c.Value = "min.insync.replicas", &two
	t.Configs = append(t.Configs, c)
	req.Topics = append(req.Topics, t)
	if _, err := direct(ctx, nodes[0].addr, req); err != nil {
		return err
	}
	if err := waitVisible(ctx, nodes, "failover", 1); err != nil {
		return err
	}
	var addrs []string
	for _, n := range nodes {
		addrs = append(addrs, n.addr)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(addrs...), kgo.DefaultProduceTopic("failover"),
		kgo.RequiredAcks(kgo.AllISRAcks()), kgo.ProducerLinger(0), kgo.MetadataMinAge(50*time.Millisecond),
		kgo.RetryBackoffFn(func(int) time.Duration { return 20 * time.Millisecond }),
		kgo.ProduceRequestTimeout(3*time.Second), kgo.RecordDeliveryTimeout(30*time.Second))
	if err != nil {
		return err
	}
	defer cl.Close()
	leaderOf := func() (int32, int) {
		m, err := metadata(ctx, nodes[0].addr, "failover")
		if err != nil || len(m.Topics) != 1 || len(m.Topics[0].Partitions) != 1 {
			for _, n := range nodes[1:] {
				if n.proc != nil {
					if m, err = metadata(ctx, n.addr, "failover"); err == nil && len(m.Topics) == 1 && len(m.Topics[0].Partitions) == 1 {
						break
					}
				}
			}
		}
		if err != nil || len(m.Topics) != 1 || len(m.Topics[0].Partitions) != 1 {
			return -1, 0
		}
		p := m.Topics[0].Partitions[0]
		return p.Leader, len(p.ISR)
	}
	for round := range 3 {
		// Steady state: full ISR, writes acknowledged.
		deadline := time.Now().Add(60 * time.Second)
		for {
			if l, isr := leaderOf(); l > 0 && isr == 3 {
				if err := cl.ProduceSync(ctx, kgo.StringRecord("warm")).FirstErr(); err == nil {
					break
				}
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("partition never back to a full ISR")
			}
			time.Sleep(100 * time.Millisecond)
		}
		leader, _ := leaderOf()
		victim := nodes[leader-1]
		// In combined mode the partition's leader may also be the active
		// controller: its failover then waits for a new one first.
		ctl, _ := controllerOf(ctx, nodes)
		victim.kill()
		start := time.Now()
		for {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			err := cl.ProduceSync(pctx, kgo.StringRecord("after")).FirstErr()
			cancel()
			if err == nil {
				break
			}
		}
		res.LeaderFailoverMs = append(res.LeaderFailoverMs, msSince(start))
		also := ""
		if ctl == victim.id {
			also = " (it was also the active controller)"
		}
		logf("[cluster] leader failover %d: node %d killed%s, acks=all write acked after %.0f ms", round, victim.id, also, res.LeaderFailoverMs[round])
		if err := victim.start(); err != nil {
			return err
		}
		if err := waitBrokers(ctx, nodes, 3); err != nil {
			return err
		}
	}
	return nil
}

func msSince(t time.Time) float64 { return float64(time.Since(t).Microseconds()) / 1000 }

func (n *clusterNode) start() error {
	if err := os.MkdirAll(n.dir, 0o755); err != nil {
		return err
	}
	p := &fjordProc{addr: n.addr, dir: n.dir, done: make(chan struct{})}
	var err error
	if p.log, err = os.OpenFile(filepath.Join(n.dir, "fjord.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644); err != nil {
		return err
	}
	p.cmd = exec.Command(n.bin,
		"--override", "node.id="+strconv.Itoa(n.id),
		"--override", "controller.quorum.voters="+n.voter,
		"--override", fmt.Sprintf("listeners=PLAINTEXT://%s,CONTROLLER://%s", n.addr, n.ctl),
		"--override", "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
		"--override", "log.dirs="+filepath.Join(n.dir, "data"),
		"--override", "fjord.metrics.listener="+n.metrics,
	)
	p.cmd.Stdout, p.cmd.Stderr = p.log, p.log
	p.cmd.SysProcAttr = childSysProcAttr()
	if err := p.cmd.Start(); err != nil {
		p.log.Close()
		return fmt.Errorf("start fjord node %d: %w", n.id, err)
	}
	childrenMu.Lock()
	children[p] = true
	childrenMu.Unlock()
	go func() { p.cmd.Wait(); close(p.done) }()
	n.proc = p
	return nil
}

// kill sends SIGKILL and waits for the process to go.
func (n *clusterNode) kill() {
	if n.proc == nil {
		return
	}
	n.proc.cmd.Process.Signal(syscall.SIGKILL)
	<-n.proc.done
	childrenMu.Lock()
	delete(children, n.proc)
	childrenMu.Unlock()
	n.proc.log.Close()
	n.proc = nil
}

// stop ends the process with SIGTERM (SIGKILL after 10s), keeping data.
func (n *clusterNode) stop() {
	if n.proc == nil {
		return
	}
	n.proc.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-n.proc.done:
	case <-time.After(10 * time.Second):
		n.proc.cmd.Process.Kill()
		<-n.proc.done
	}
	childrenMu.Lock()
	delete(children, n.proc)
	childrenMu.Unlock()
	n.proc.log.Close()
	n.proc = nil
}

// direct sends req to the node at addr itself (not routed by kgo).
func direct(ctx context.Context, addr string, req kmsg.Request) (kmsg.Response, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.RequestRetries(0), kgo.DialTimeout(time.Second))
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	return cl.SeedBrokers()[0].Request(rctx, req)
}

func createTopic(ctx context.Context, addr, name string, partitions int32, rf int16) int16 {
	req := kmsg.NewPtrCreateTopicsRequest()
	t := kmsg.NewCreateTopicsRequestTopic()
	t.Topic, t.NumPartitions, t.ReplicationFactor = name, partitions, rf
	req.Topics = append(req.Topics, t)
	req.TimeoutMillis = 30000
	resp, err := direct(ctx, addr, req)
	if err != nil {
		return kerr.RequestTimedOut.Code
	}
	return resp.(*kmsg.CreateTopicsResponse).Topics[0].ErrorCode
}

func metadata(ctx context.Context, addr string, topic string) (*kmsg.MetadataResponse, error) {
	req := kmsg.NewPtrMetadataRequest()
	if topic != "" {
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(topic)
		req.Topics = append(req.Topics, rt)
	}
	resp, err := direct(ctx, addr, req)
	if err != nil {
		return nil, err
	}
	return resp.(*kmsg.MetadataResponse), nil
}

// waitVisible polls every running node until its Metadata has topic with
// the given partition count.
func waitVisible(ctx context.Context, nodes []*clusterNode, topic string, partitions int) error {
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	for _, n := range nodes {
		if n.proc == nil {
			continue
		}
		for {
			m, err := metadata(ctx, n.addr, topic)
			if err == nil && len(m.Topics) == 1 && m.Topics[0].ErrorCode == 0 && len(m.Topics[0].Partitions) == partitions {
				break
			}
			if ctx.Err() != nil {
				return fmt.Errorf("topic %s not visible on node %d: %v", topic, n.id, ctx.Err())
			}
			time.Sleep(time.Millisecond)
		}
	}
	return nil
}

// waitBrokers waits until every running node lists want brokers.
func waitBrokers(ctx context.Context, nodes []*clusterNode, want int) error {
	ctx, cancel := context.WithTimeout(ctx, startupWait)
	defer cancel()
	for _, n := range nodes {
		for {
			m, err := metadata(ctx, n.addr, "")
			if err == nil && len(m.Brokers) == want {
				break
			}
			if ctx.Err() != nil {
				seen := "no answer"
				if m != nil {
					var ids []int32
					for _, b := range m.Brokers {
						ids = append(ids, b.NodeID)
					}
					seen = fmt.Sprintf("brokers %v, controller %d", ids, m.ControllerID)
				}
				return fmt.Errorf("node %d does not list %d brokers within %s (last answer: %s; %v); its log: %s", n.id, want, startupWait, seen, err, n.proc.logTail())
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	return nil
}

// controllerOf asks the nodes which of them is the active controller.
func controllerOf(ctx context.Context, nodes []*clusterNode) (int, error) {
	for _, n := range nodes {
		if m, err := metadata(ctx, n.addr, ""); err == nil && m.ControllerID > 0 {
			return int(m.ControllerID), nil
		}
	}
	return 0, fmt.Errorf("no node names an active controller")
}

// startBenchCluster starts three combined nodes in a temp dir and waits
// until each lists all three brokers. stop ends them and removes the dir.
func startBenchCluster(ctx context.Context, binPath string) (nodes []*clusterNode, stop func(), err error) {
	bin, err := filepath.Abs(binPath)
	if err != nil {
		return nil, nil, err
	}
	root, err := os.MkdirTemp("", "fjord-bench-cluster-")
	if err != nil {
		return nil, nil, err
	}
	if nodes, err = newClusterNodes(bin, root); err != nil {
		os.RemoveAll(root)
		return nil, nil, err
	}
	stop = func() {
		for _, n := range nodes {
			n.stop()
		}
		os.RemoveAll(root)
	}
	for _, n := range nodes {
		if err := n.start(); err != nil {
			stop()
			return nil, nil, err
		}
	}
	if err := waitBrokers(ctx, nodes, 3); err != nil {
		// Keep the nodes' logs: a cluster that does not form is a finding.
		for _, n := range nodes {
			n.stop()
		}
		return nil, nil, fmt.Errorf("%w (the nodes' directories and logs are kept in %s)", err, root)
	}
	return nodes, stop, nil
}

// newClusterNodes lays out three voters under root on free loopback
// ports (client, controller and metrics listeners); none is started.
func newClusterNodes(bin, root string) ([]*clusterNode, error) {
	nodes := make([]*clusterNode, 3)
	ports, err := freePorts(3 * len(nodes))
	if err != nil {
		return nil, err
	}
	hostPort := func(p int) string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(p)) }
	var voters []string
	for i := range nodes {
		nodes[i] = &clusterNode{id: i + 1, bin: bin, dir: filepath.Join(root, fmt.Sprintf("node-%d", i+1)),
			addr: hostPort(ports[3*i]), ctl: hostPort(ports[3*i+1]), metrics: hostPort(ports[3*i+2])}
		voters = append(voters, fmt.Sprintf("%d@%s", nodes[i].id, nodes[i].ctl))
	}
	for _, n := range nodes {
		n.voter = strings.Join(voters, ",")
	}
	return nodes, nil
}

// clusterMetrics lists the nodes' metrics listeners.
func clusterMetrics(nodes []*clusterNode) []string {
	var out []string
	for _, n := range nodes {
		out = append(out, n.metrics)
	}
	return out
}

// benchFjordCluster runs the client suites against a 3-node fjord cluster
// with replication factor 3: every byte written three times, by three
// processes sharing the machine.
func benchFjordCluster(ctx context.Context, cfg *config) *TargetResult {
	nodes, stop, err := startBenchCluster(ctx, cfg.fjordBin)
	if err != nil {
		return &TargetResult{Target: "fjord x3 rf3", Error: err.Error()}
	}
	defer stop()
	var addrs []string
	for _, n := range nodes {
		addrs = append(addrs, n.addr)
	}
	c := *cfg
	c.rf = 3
	c.metrics = clusterMetrics(nodes)
	return benchBrokers(ctx, &c, "fjord x3 rf3", addrs, false)
}

// removeUnlessKept removes a run's directory, or keeps it (and says where)
// when FJORD_BENCH_KEEP is set, so the nodes' logs can be read afterwards.
func removeUnlessKept(dir string) {
	if os.Getenv("FJORD_BENCH_KEEP") != "" {
		logf("kept %s (FJORD_BENCH_KEEP)", dir)
		return
	}
	os.RemoveAll(dir)
}
