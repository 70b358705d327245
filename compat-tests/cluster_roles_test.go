package compattests

// A cluster with every KRaft role: a controller-only voter (node 1), two
// combined nodes (2 and 3) and a broker-only node (4) that follows the
// metadata log without voting. Only RF=1 topics take data: replication
// between brokers is not implemented yet.

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// startMarker opens the harness's line before each process start.
const startMarker = "=== compat-tests: start #"

// logSinceStart is the log of node id's current (or last) process.
func (c *Cluster) logSinceStart(id int) string {
	log := c.Node(id).readLog()
	if i := strings.LastIndex(log, startMarker); i >= 0 {
		return log[i:]
	}
	return log
}

// logLine is the part of a fjord JSON log line the tests read.
type logLine struct {
	Component string `json:"component"`
	Message   string `json:"message"`
	Term      uint64 `json:"term"`
	Leader    uint64 `json:"leader"` // raft id: node.id+1
	Version   uint64 `json:"version"`
	Voter     int32  `json:"voter"`
}

// logLines parses the JSON lines of log (the harness's own lines skipped).
func logLines(log string) []logLine {
	var out []logLine
	sc := bufio.NewScanner(strings.NewReader(log))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var l logLine
		if json.Unmarshal(sc.Bytes(), &l) == nil && l.Message != "" {
			out = append(out, l)
		}
	}
	return out
}

// quorumLeader reads the voters' logs: the leader of the highest raft
// term any voter has seen a leader in ("became leader" on the leader,
// "leader changed" on the others), with that term, or 0. A dead voter's
// old lines are harmless: a later term outranks them.
func (c *Cluster) quorumLeader() (id int, term uint64) {
	for _, v := range c.VoterIDs() {
		for _, l := range logLines(c.Node(v).readLog()) {
			if l.Component != "quorum" || l.Term < term {
				continue
			}
			switch {
			case l.Message == "became leader":
				id, term = v, l.Term
			case l.Message == "leader changed" && l.Leader != 0:
				id, term = int(l.Leader)-1, l.Term
			}
		}
	}
	return id, term
}

// activeSince reports whether node id's current process logged "became
// the active controller" after its last "became leader".
func (c *Cluster) activeSince(id int) bool {
	active := false
	for _, l := range logLines(c.logSinceStart(id)) {
		switch l.Message {
		case "became leader":
			active = false
		case "became the active controller":
			active = true
		}
	}
	return active
}

// awaitActiveController waits until the voters' logs name a running
// voter, not one of not, as the raft leader that has become the active
// controller, and every running broker's Metadata ControllerID agrees:
// that voter when it is a broker, else the answering broker itself.
func (c *Cluster) awaitActiveController(t testing.TB, timeout time.Duration, not ...int) (int, time.Duration) {
	t.Helper()
	var ctrl int
	took := c.Await(t, timeout, "a live active controller that every broker agrees on", func() (bool, string) {
		l, term := c.quorumLeader()
		switch {
		case l == 0:
			return false, "no voter has logged a leader"
		case slices.Contains(not, l):
			return false, fmt.Sprintf("the logs still name node %d (term %d)", l, term)
		case !c.Running(l):
			return false, fmt.Sprintf("the logs name node %d (term %d), which is down", l, term)
		case !c.activeSince(l):
			return false, fmt.Sprintf("node %d leads term %d but has not logged \"became the active controller\"", l, term)
		}
		var states []string
		ok := true
		for _, b := range c.LiveBrokerIDs() {
			m, err := c.Metadata(b)
			if err != nil {
				return false, fmt.Sprintf("node %d: %v", b, err)
			}
			want := int32(b)
			if c.IsBroker(l) {
				want = int32(l)
			}
			if m.Controller != want {
				ok = false
			}
			states = append(states, fmt.Sprintf("node %d says %d (want %d)", b, m.Controller, want))
		}
		ctrl = l
		return ok, fmt.Sprintf("logs: node %d leads term %d; %s", l, term, strings.Join(states, ", "))
	})
	return ctrl, took
}

// produced is one acknowledged record.
type produced struct {
	key, value string
	partition  int32
	offset     int64
}

// TestClusterRoles: 1 controller-only voter, 2 combined nodes and 1
// broker-only node. Only brokers are listed; a topic created through the
// broker-only node spreads over the three brokers; records produced
// through it read back through a combined node; the active controller
// fails over (whichever kind it is) and rejoins; the broker-only node,
// restarted, gets the metadata image back from a voter's snapshot and
// still serves its replicas' records.
func TestClusterRoles(t *testing.T) {
	kcat := kcatPath(t)
	testStart := time.Now()
	c := startClusterRoles(t, []string{roleController, roleCombined, roleCombined, roleBroker})
	t.Logf("cluster ready %v after the test began", time.Since(testStart).Round(time.Millisecond))
	brokers := c.BrokerIDs() // 2, 3, 4
	wantBrokers := toInt32s(brokers)
	const (
		ctlOnly    = 1
		brokerOnly = 4
	)
	if !slices.Equal(brokers, []int{2, 3, 4}) || !slices.Equal(c.VoterIDs(), []int{1, 2, 3}) {
		t.Fatalf("brokers %v voters %v, want [2 3 4] and [1 2 3]", brokers, c.VoterIDs())
	}
	if !c.Node(ctlOnly).logContains(controllerOnlyLine) {
		t.Errorf("node %d did not log %q", ctlOnly, controllerOnlyLine)
	}

	ctrl, _ := c.awaitActiveController(t, 10*time.Second)
	t.Logf("active controller: node %d (%s)", ctrl, c.Roles(ctrl))

	// Only the broker-role nodes are brokers, through every API.
	var clusterID string
	for _, id := range brokers {
		m, err := c.Metadata(id)
		if err != nil {
			t.Fatalf("metadata from node %d: %v", id, err)
		}
		if got := brokerIDs(m); !slices.Equal(got, wantBrokers) {
			t.Errorf("node %d lists brokers %v, want %v", id, got, wantBrokers)
		}
		for _, b := range m.Brokers {
			if want := c.Addr(int(b.NodeID)); fmt.Sprintf("%s:%d", b.Host, b.Port) != want {
				t.Errorf("node %d lists broker %d at %s:%d, want %s", id, b.NodeID, b.Host, b.Port, want)
			}
		}
		if clusterID == "" {
			clusterID = m.Cluster
		} else if m.Cluster != clusterID {
			t.Errorf("node %d cluster id %q, node %d says %q", id, m.Cluster, brokers[0], clusterID)
		}

		req := kmsg.NewPtrDescribeClusterRequest()
		req.IncludeFencedBrokers = true
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		resp, err := req.RequestWith(ctx, c.Client(id))
		cancel()
		if err != nil {
			t.Fatalf("DescribeCluster from node %d: %v", id, err)
		}
		var ids []int32
		for _, b := range resp.Brokers {
			ids = append(ids, b.NodeID)
			if b.IsFenced {
				t.Errorf("DescribeCluster from node %d: broker %d fenced", id, b.NodeID)
			}
		}
		slices.Sort(ids)
		if resp.ErrorCode != 0 || !slices.Equal(ids, wantBrokers) {
			t.Errorf("DescribeCluster from node %d: error %v, brokers %v, want %v", id, kerr.ErrorForCode(resp.ErrorCode), ids, wantBrokers)
		}
		if !slices.Contains(brokers, int(resp.ControllerID)) {
			t.Errorf("DescribeCluster from node %d: controller %d is not a broker", id, resp.ControllerID)
		}

		out := runKcat(t, kcat, "", "-L", "-J", "-b", c.Addr(id), "-m", "10")
		var km kcatMetadata
		if err := json.Unmarshal([]byte(out), &km); err != nil {
			t.Fatalf("kcat -L -J via node %d: %v\n%s", id, err, out)
		}
		var kids []int32
		for _, b := range km.Brokers {
			kids = append(kids, b.ID)
			if b.ID == ctlOnly || !c.IsBroker(int(b.ID)) {
				t.Errorf("kcat via node %d lists node %d (%s), which is not a broker", id, b.ID, b.Name)
			} else if b.Name != c.Addr(int(b.ID)) {
				t.Errorf("kcat via node %d: broker %d at %s, want %s", id, b.ID, b.Name, c.Addr(int(b.ID)))
			}
		}
		slices.Sort(kids)
		if !slices.Equal(kids, wantBrokers) {
			t.Errorf("kcat via node %d: brokers %v, want %v", id, kids, wantBrokers)
		}
		if !slices.Contains(brokers, int(km.ControllerID)) {
			t.Errorf("kcat via node %d: controller %d is not a broker", id, km.ControllerID)
		}
	}

	// A topic created through the broker-only node: 2 leaders per broker,
	// nothing on the controller-only node.
	const topic = "roles"
	start := time.Now()
	created := c.createOn(t, brokerOnly, topic, 6, 1)
	createTook := time.Since(start)
	layout, took := c.awaitTopic(t, 10*time.Second, topic, brokers, replicasOn(brokers, 1))
	t.Logf("CreateTopics through broker-only node %d took %v; brokers %v agreed %v later: %s",
		brokerOnly, createTook.Round(time.Millisecond), brokers, took.Round(time.Millisecond), topicLayout(layout))
	if layout.ID != created.ID {
		t.Errorf("metadata topic id %v, CreateTopics answered %v", layout.ID, created.ID)
	}
	leads := map[int32][]int32{}
	for _, p := range layout.Partitions.Sorted() {
		leads[p.Leader] = append(leads[p.Leader], p.Partition)
		if p.Err != nil {
			t.Errorf("p%d: %v", p.Partition, p.Err)
		}
	}
	for _, id := range brokers {
		if len(leads[int32(id)]) != 2 {
			t.Errorf("broker %d leads partitions %v, want 2 (leaders: %v)", id, leads[int32(id)], leads)
		}
	}
	if len(leads[ctlOnly]) > 0 {
		t.Errorf("controller-only node %d leads %v", ctlOnly, leads[ctlOnly])
	}
	if t.Failed() {
		t.FailNow()
	}

	// 100 keyed records produced through the broker-only node, read back
	// through a combined node.
	pcl := newClient(t, c.Addr(brokerOnly), kgo.RequiredAcks(kgo.AllISRAcks()), kgo.ProducerLinger(0))
	var recs []*kgo.Record
	for i := range 100 {
		recs = append(recs, &kgo.Record{Topic: topic, Key: fmt.Appendf(nil, "key-%03d", i), Value: fmt.Appendf(nil, "value-%03d", i)})
	}
	pctx, pcancel := context.WithTimeout(context.Background(), 15*time.Second)
	start = time.Now()
	if err := pcl.ProduceSync(pctx, recs...).FirstErr(); err != nil {
		pcancel()
		t.Fatalf("producing 100 records through node %d: %v", brokerOnly, err)
	}
	pcancel()
	pcl.Close()
	sent := map[string]produced{}
	perPartition := map[int32]int{}
	for _, r := range recs {
		sent[string(r.Key)] = produced{string(r.Key), string(r.Value), r.Partition, r.Offset}
		perPartition[r.Partition]++
	}
	t.Logf("produced 100 records through node %d in %v; per partition: %v", brokerOnly, time.Since(start).Round(time.Millisecond), perPartition)

	checkRecords := func(what string, got []*kgo.Record, want map[string]produced) {
		t.Helper()
		seen := map[string]bool{}
		for _, r := range got {
			k := string(r.Key)
			w, ok := want[k]
			switch {
			case !ok:
				t.Errorf("%s: unexpected record %s[%d]@%d key %q", what, r.Topic, r.Partition, r.Offset, k)
			case seen[k]:
				t.Errorf("%s: key %q read twice", what, k)
			case string(r.Value) != w.value || r.Partition != w.partition || r.Offset != w.offset:
				t.Errorf("%s: key %q read as %q at p%d@%d, produced %q at p%d@%d", what, k, r.Value, r.Partition, r.Offset, w.value, w.partition, w.offset)
			}
			seen[k] = true
		}
		if len(seen) != len(want) {
			t.Errorf("%s: read %d distinct of %d records", what, len(seen), len(want))
		}
	}
	start = time.Now()
	got := consumeAll(t, c.Addr(2), topic, len(recs), 15*time.Second)
	checkRecords("consuming through node 2", got, sent)
	t.Logf("consumed %d records through node 2 in %v", len(got), time.Since(start).Round(time.Millisecond))
	if t.Failed() {
		t.FailNow()
	}

	// SIGKILL the active controller, whichever kind of node it is.
	ctrl, _ = c.awaitActiveController(t, 10*time.Second)
	t.Logf("killing the active controller, node %d (%s)", ctrl, c.Roles(ctrl))
	killed := time.Now()
	c.Kill(ctrl)

	const during = "roles-failover"
	adm := c.Admin(brokerOnly)
	attempts := 0
	var lastErr error
	for {
		attempts++
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		resp, err := adm.CreateTopic(ctx, 3, 1, nil, during)
		cancel()
		if err == nil || (attempts > 1 && errors.Is(err, kerr.TopicAlreadyExists)) {
			break
		}
		lastErr = fmt.Errorf("%w (%s)", err, resp.ErrMessage)
		if time.Since(killed) > 15*time.Second {
			t.Fatalf("no CreateTopics through node %d succeeded within 15s of killing controller node %d; %d attempts, last: %v",
				brokerOnly, ctrl, attempts, lastErr)
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("failover: CreateTopics through node %d succeeded %v after SIGKILL of node %d (%d attempts, last error before: %v)",
		brokerOnly, time.Since(killed).Round(time.Millisecond), ctrl, attempts, lastErr)
	newCtrl, _ := c.awaitActiveController(t, 10*time.Second, ctrl)
	t.Logf("failover: node %d (%s) is the active controller %v after the kill", newCtrl, c.Roles(newCtrl), time.Since(killed).Round(time.Millisecond))
	c.awaitTopic(t, 10*time.Second, during, c.LiveBrokerIDs(), nil)

	// The killed node comes back and rejoins: it follows the current
	// leader again and, if it is a broker, is listed and leads its
	// partitions again.
	restarted := time.Now()
	c.Restart(ctrl)
	_, term := c.quorumLeader()
	c.Await(t, 10*time.Second, fmt.Sprintf("restarted node %d follows the quorum leader", ctrl), func() (bool, string) {
		var last []string
		for _, l := range logLines(c.logSinceStart(ctrl)) {
			if l.Component != "quorum" {
				continue
			}
			last = append(last, fmt.Sprintf("%s leader=%d term=%d", l.Message, l.Leader, l.Term))
			if l.Term >= term && (l.Message == "became leader" || (l.Message == "leader changed" && l.Leader != 0)) {
				return true, ""
			}
		}
		return false, fmt.Sprintf("term to reach %d; its quorum lines: %v", term, last)
	})
	c.waitBrokers(t, 15*time.Second, wantBrokers)
	final, _ := c.awaitActiveController(t, 10*time.Second)
	t.Logf("rejoin: node %d back in the quorum, brokers %v listed by all, %v after its restart; active controller node %d",
		ctrl, wantBrokers, time.Since(restarted).Round(time.Millisecond), final)
	sameLeaders := func(td kadm.TopicDetail) string {
		for _, p := range td.Partitions.Sorted() {
			o := layout.Partitions[p.Partition]
			if p.Leader != o.Leader || !slices.Equal(p.Replicas, o.Replicas) || p.Err != nil {
				return fmt.Sprintf("p%d leader %d replicas %v err %v, was leader %d replicas %v", p.Partition, p.Leader, p.Replicas, p.Err, o.Leader, o.Replicas)
			}
		}
		return ""
	}
	c.awaitTopic(t, 15*time.Second, topic, brokers, sameLeaders)
	c.awaitTopic(t, 10*time.Second, during, brokers, func(td kadm.TopicDetail) string {
		for _, p := range td.Partitions.Sorted() {
			if !slices.Contains(brokers, int(p.Leader)) {
				return fmt.Sprintf("p%d leader %d", p.Partition, p.Leader)
			}
		}
		return ""
	})
	c.createOn(t, brokerOnly, "roles-after-rejoin", 3, 1)
	c.awaitTopic(t, 10*time.Second, "roles-after-rejoin", brokers, replicasOn(brokers, 1))

	// Restart the broker-only node: it has nothing of the metadata log on
	// disk, so it fetches a snapshot of the image from a voter, then
	// serves its replicas again.
	mine := leads[brokerOnly]
	wantMine := map[string]produced{}
	for k, r := range sent {
		if slices.Contains(mine, r.partition) {
			wantMine[k] = r
		}
	}
	if len(wantMine) == 0 {
		t.Fatalf("no record went to node %d's partitions %v (per partition: %v)", brokerOnly, mine, perPartition)
	}
	m, err := c.Metadata(2)
	if err != nil {
		t.Fatalf("metadata from node 2: %v", err)
	}
	topicsBefore := m.Topics.Names()
	slices.Sort(topicsBefore)

	t.Logf("killing broker-only node %d (leads %v of %q, %d records)", brokerOnly, mine, topic, len(wantMine))
	c.Kill(brokerOnly)
	restarted = time.Now()
	c.Restart(brokerOnly)
	serving := time.Since(restarted)
	// Right when it serves again, does it already know the topics?
	if m, err := c.Metadata(brokerOnly); err != nil {
		t.Logf("node %d: metadata right after it answered again: %v", brokerOnly, err)
	} else if _, ok := m.Topics[topic]; !ok {
		t.Errorf("node %d serves (unfenced) without topic %q in its metadata: served before catching up on the metadata log", brokerOnly, topic)
	}
	var snap logLine
	c.Await(t, 5*time.Second, fmt.Sprintf("node %d logs \"metadata image from a snapshot\"", brokerOnly), func() (bool, string) {
		for _, l := range logLines(c.logSinceStart(brokerOnly)) {
			if l.Message == "metadata image from a snapshot" {
				snap = l
				return true, ""
			}
		}
		return false, "not logged since its restart"
	})
	if !slices.Contains(c.VoterIDs(), int(snap.Voter)) || snap.Version == 0 {
		t.Errorf("node %d: snapshot from voter %d at version %d", brokerOnly, snap.Voter, snap.Version)
	}
	_, took = c.awaitTopic(t, 10*time.Second, topic, brokers, sameLeaders)
	t.Logf("broker-only node %d serving %v after its restart (image from voter %d's snapshot at version %d); %q agreed with its old leaders %v later",
		brokerOnly, serving.Round(time.Millisecond), snap.Voter, snap.Version, topic, took.Round(time.Millisecond))
	c.Await(t, 10*time.Second, fmt.Sprintf("node %d lists the same topics as node 2", brokerOnly), func() (bool, string) {
		m, err := c.Metadata(brokerOnly)
		if err != nil {
			return false, err.Error()
		}
		names := m.Topics.Names()
		slices.Sort(names)
		return slices.Equal(names, topicsBefore), fmt.Sprintf("node %d lists %v, node 2 listed %v", brokerOnly, names, topicsBefore)
	})
	c.waitBrokers(t, 10*time.Second, wantBrokers)

	// Its replicas' records, read from it.
	offsets := map[int32]kgo.Offset{}
	for _, p := range mine {
		offsets[p] = kgo.NewOffset().AtStart()
	}
	ccl := newClient(t, c.Addr(brokerOnly), kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: offsets}))
	cctx, ccancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer ccancel()
	var mineGot []*kgo.Record
	for len(mineGot) < len(wantMine) {
		fs := ccl.PollFetches(cctx)
		if cctx.Err() != nil {
			t.Fatalf("reading node %d's partitions %v: %d of %d records before the timeout", brokerOnly, mine, len(mineGot), len(wantMine))
		}
		fs.EachError(func(tp string, p int32, err error) {
			t.Errorf("fetch %s[%d] from node %d: %v", tp, p, brokerOnly, err)
		})
		if t.Failed() {
			t.FailNow()
		}
		mineGot = append(mineGot, fs.Records()...)
	}
	checkRecords(fmt.Sprintf("reading partitions %v from restarted node %d", mine, brokerOnly), mineGot, wantMine)
	t.Logf("read the %d records of partitions %v back from restarted node %d; test took %v", len(mineGot), mine, brokerOnly, time.Since(testStart).Round(time.Millisecond))
}
