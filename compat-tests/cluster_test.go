package compattests

// Three-node clusters (every node broker and controller): metadata
// agreement, controller failover, broker loss and topic admin errors.
// Replication is not implemented yet, so nothing here produces to a topic
// with more than one replica: these tests are about metadata only.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// topicLayout renders a node's view of a topic so views can be compared.
func topicLayout(td kadm.TopicDetail) string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "id=%x partitions=%d", td.ID[:4], len(td.Partitions))
	for _, p := range td.Partitions.Sorted() {
		fmt.Fprintf(&sb, "\n  p%d leader=%d epoch=%d replicas=%v isr=%v offline=%v",
			p.Partition, p.Leader, p.LeaderEpoch, p.Replicas, p.ISR, p.OfflineReplicas)
		if p.Err != nil {
			fmt.Fprintf(&sb, " err=%v", p.Err)
		}
	}
	return sb.String()
}

// awaitTopic waits until every node in ids answers Metadata for topic
// with the same layout and check (run on that common view) returns "".
// It returns the agreed view and how long the wait took.
func (c *Cluster) awaitTopic(t testing.TB, timeout time.Duration, topic string, ids []int, check func(td kadm.TopicDetail) string) (kadm.TopicDetail, time.Duration) {
	t.Helper()
	var agreed kadm.TopicDetail
	took := c.Await(t, timeout, fmt.Sprintf("nodes %v agree on topic %q", ids, topic), func() (bool, string) {
		var views []string
		var first string
		same := true
		for i, id := range ids {
			m, err := c.Metadata(id, topic)
			if err != nil {
				return false, fmt.Sprintf("node %d: %v", id, err)
			}
			td, ok := m.Topics[topic]
			if !ok || td.Err != nil {
				return false, fmt.Sprintf("node %d: topic missing or in error (%v)", id, td.Err)
			}
			l := topicLayout(td)
			views = append(views, fmt.Sprintf("node %d: %s", id, l))
			if i == 0 {
				first, agreed = l, td
			} else if l != first {
				same = false
			}
		}
		if !same {
			return false, "views differ:\n" + strings.Join(views, "\n")
		}
		if check != nil {
			if why := check(agreed); why != "" {
				return false, why + "\n" + views[0]
			}
		}
		return true, ""
	})
	return agreed, took
}

// awaitTopicGone waits until no node in ids lists topic in its full
// metadata (asking by name could auto-create it).
func (c *Cluster) awaitTopicGone(t testing.TB, timeout time.Duration, topic string, ids []int) time.Duration {
	t.Helper()
	return c.Await(t, timeout, fmt.Sprintf("topic %q gone from nodes %v", topic, ids), func() (bool, string) {
		for _, id := range ids {
			m, err := c.Metadata(id)
			if err != nil {
				return false, fmt.Sprintf("node %d: %v", id, err)
			}
			if td, ok := m.Topics[topic]; ok {
				return false, fmt.Sprintf("node %d still lists it: %s", id, topicLayout(td))
			}
		}
		return true, ""
	})
}

// awaitController waits until every node in ids names the same active
// controller, one of ids, and returns it.
func (c *Cluster) awaitController(t testing.TB, timeout time.Duration, ids []int) (int, time.Duration) {
	t.Helper()
	var ctrl int
	took := c.Await(t, timeout, fmt.Sprintf("nodes %v agree on a live controller", ids), func() (bool, string) {
		var got []int32
		for _, id := range ids {
			m, err := c.Metadata(id)
			if err != nil {
				return false, fmt.Sprintf("node %d: %v", id, err)
			}
			got = append(got, m.Controller)
		}
		for _, g := range got {
			if g != got[0] {
				return false, fmt.Sprintf("controllers reported by %v: %v", ids, got)
			}
		}
		if !slices.Contains(ids, int(got[0])) {
			return false, fmt.Sprintf("controllers reported by %v: %v (not a live node)", ids, got)
		}
		ctrl = int(got[0])
		return true, ""
	})
	return ctrl, took
}

// createOn creates topic through node id (a pinned client: the node
// forwards to the active controller), failing the test on error.
func (c *Cluster) createOn(t testing.TB, id int, topic string, partitions int32, rf int16) kadm.CreateTopicResponse {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	resp, err := c.Admin(id).CreateTopic(ctx, partitions, rf, nil, topic)
	if err != nil && errors.Is(err, io.EOF) {
		// The connection dropped with the request's outcome unknown, which
		// a client retries; a retry that finds the topic created is the
		// first attempt's success. (Seen once in ~30 CI runs; not yet
		// explained — logged so it stays visible.)
		t.Logf("create %q through node %d: connection dropped (%v); retrying", topic, id, err)
		resp, err = c.Admin(id).CreateTopic(ctx, partitions, rf, nil, topic)
		if errors.Is(err, kerr.TopicAlreadyExists) {
			err = nil
		}
	}
	if err != nil {
		t.Fatalf("create %q (%d partitions, rf %d) through node %d: %v (%s)", topic, partitions, rf, id, err, resp.ErrMessage)
	}
	return resp
}

func others(ids []int, not ...int) []int {
	var out []int
	for _, id := range ids {
		if !slices.Contains(not, id) {
			out = append(out, id)
		}
	}
	return out
}

// replicasOn checks every partition's replicas are distinct members of on,
// rf of them, with the leader among them and the ISR full.
func replicasOn(on []int, rf int) func(kadm.TopicDetail) string { return placed(on, rf, true) }

// placedOn is replicasOn without the full ISR: for a topic created while a
// dead node may be fenced (and leave its ISRs) at any moment.
func placedOn(on []int, rf int) func(kadm.TopicDetail) string { return placed(on, rf, false) }

func placed(on []int, rf int, fullISR bool) func(kadm.TopicDetail) string {
	return func(td kadm.TopicDetail) string {
		for _, p := range td.Partitions.Sorted() {
			if len(p.Replicas) != rf {
				return fmt.Sprintf("p%d has %d replicas, want %d", p.Partition, len(p.Replicas), rf)
			}
			seen := map[int32]bool{}
			for _, r := range p.Replicas {
				if seen[r] || !slices.Contains(on, int(r)) {
					return fmt.Sprintf("p%d replicas %v: want %d distinct of %v", p.Partition, p.Replicas, rf, on)
				}
				seen[r] = true
			}
			if !slices.Contains(p.Replicas, p.Leader) {
				return fmt.Sprintf("p%d leader %d not among replicas %v", p.Partition, p.Leader, p.Replicas)
			}
			if fullISR && len(p.ISR) != rf {
				return fmt.Sprintf("p%d ISR %v, want all %d replicas", p.Partition, p.ISR, rf)
			}
		}
		return ""
	}
}

// kcatMetadata is the part of `kcat -L -J` output the tests read.
type kcatMetadata struct {
	Originating struct {
		ID   int32  `json:"id"`
		Name string `json:"name"`
	} `json:"originating_broker"`
	ControllerID int32 `json:"controllerid"`
	Brokers      []struct {
		ID   int32  `json:"id"`
		Name string `json:"name"`
	} `json:"brokers"`
	Topics []struct {
		Topic      string `json:"topic"`
		Error      string `json:"error"`
		Partitions []struct {
			Partition int32  `json:"partition"`
			Leader    int32  `json:"leader"`
			Error     string `json:"error"`
			Replicas  []struct {
				ID int32 `json:"id"`
			} `json:"replicas"`
			ISRs []struct {
				ID int32 `json:"id"`
			} `json:"isrs"`
		} `json:"partitions"`
	} `json:"topics"`
}

// TestClusterMetadataAgrees: a 6-partition RF=3 topic created through a
// non-controller node is described identically by every node (kadm, kcat,
// DescribeCluster), with replicas on all three brokers and two leaderships
// each.
func TestClusterMetadataAgrees(t *testing.T) {
	kcat := kcatPath(t)
	c := startCluster(t, 3)
	all := c.IDs()
	ctrl, _ := c.awaitController(t, 10*time.Second, all)
	via := others(all, ctrl)[0]
	t.Logf("active controller: node %d; creating through node %d", ctrl, via)

	const topic = "agree"
	start := time.Now()
	created := c.createOn(t, via, topic, 6, 3)
	createTook := time.Since(start)
	if created.NumPartitions != 6 || created.ReplicationFactor != 3 {
		t.Errorf("CreateTopics answered %d partitions rf %d, want 6 and 3", created.NumPartitions, created.ReplicationFactor)
	}
	td, propagated := c.awaitTopic(t, 10*time.Second, topic, all, replicasOn(all, 3))
	t.Logf("CreateTopics through node %d took %v; all 3 nodes agreed %v later", via, createTook.Round(time.Millisecond), propagated.Round(time.Millisecond))
	t.Logf("agreed layout: %s", topicLayout(td))
	if td.ID != created.ID {
		t.Errorf("metadata topic id %v, CreateTopics answered %v", td.ID, created.ID)
	}
	leads := map[int32]int{}
	for _, p := range td.Partitions.Sorted() {
		if p.Replicas[0] != p.Leader {
			t.Errorf("p%d: leader %d is not the preferred (first) replica of %v", p.Partition, p.Leader, p.Replicas)
		}
		leads[p.Leader]++
	}
	for _, id := range all {
		if leads[int32(id)] != 2 {
			t.Errorf("broker %d leads %d partitions, want 2 (leaders per broker: %v)", id, leads[int32(id)], leads)
		}
	}

	// Every node: the same brokers, controller and cluster id.
	var clusterID string
	for _, id := range all {
		m, err := c.Metadata(id)
		if err != nil {
			t.Fatalf("metadata from node %d: %v", id, err)
		}
		if got := brokerIDs(m); !slices.Equal(got, []int32{1, 2, 3}) {
			t.Errorf("node %d lists brokers %v, want [1 2 3]", id, got)
		}
		for _, b := range m.Brokers {
			if want := c.Addr(int(b.NodeID)); fmt.Sprintf("%s:%d", b.Host, b.Port) != want {
				t.Errorf("node %d lists broker %d at %s:%d, want %s", id, b.NodeID, b.Host, b.Port, want)
			}
		}
		if int(m.Controller) != ctrl {
			t.Errorf("node %d names controller %d, want %d", id, m.Controller, ctrl)
		}
		if id == 1 {
			clusterID = m.Cluster
		} else if m.Cluster != clusterID {
			t.Errorf("node %d cluster id %q, node 1 says %q", id, m.Cluster, clusterID)
		}
	}
	if clusterID == "" {
		t.Errorf("empty cluster id")
	}

	// DescribeCluster from every node.
	for _, id := range all {
		req := kmsg.NewPtrDescribeClusterRequest()
		req.IncludeFencedBrokers = true
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		resp, err := req.RequestWith(ctx, c.Client(id))
		cancel()
		if err != nil {
			t.Fatalf("DescribeCluster from node %d: %v", id, err)
		}
		if resp.ErrorCode != 0 {
			t.Errorf("DescribeCluster from node %d: %v", id, kerr.ErrorForCode(resp.ErrorCode))
		}
		if int(resp.ControllerID) != ctrl {
			t.Errorf("DescribeCluster from node %d: controller %d, want %d", id, resp.ControllerID, ctrl)
		}
		if resp.ClusterID != clusterID {
			t.Errorf("DescribeCluster from node %d: cluster id %q, Metadata says %q", id, resp.ClusterID, clusterID)
		}
		var ids []int32
		for _, b := range resp.Brokers {
			ids = append(ids, b.NodeID)
			if b.IsFenced {
				t.Errorf("DescribeCluster from node %d: broker %d fenced", id, b.NodeID)
			}
		}
		slices.Sort(ids)
		if !slices.Equal(ids, []int32{1, 2, 3}) {
			t.Errorf("DescribeCluster from node %d: brokers %v, want [1 2 3]", id, ids)
		}
	}

	// kcat (librdkafka) from every node.
	for _, id := range all {
		out := runKcat(t, kcat, "", "-L", "-J", "-b", c.Addr(id), "-t", topic, "-m", "10")
		var km kcatMetadata
		if err := json.Unmarshal([]byte(out), &km); err != nil {
			t.Fatalf("kcat -L -J via node %d: %v\n%s", id, err, out)
		}
		if km.Originating.ID != int32(id) {
			t.Logf("kcat via node %d: metadata came from broker %d (%s)", id, km.Originating.ID, km.Originating.Name)
		}
		var bids []int32
		for _, b := range km.Brokers {
			bids = append(bids, b.ID)
			if b.Name != c.Addr(int(b.ID)) {
				t.Errorf("kcat via node %d: broker %d at %s, want %s", id, b.ID, b.Name, c.Addr(int(b.ID)))
			}
		}
		slices.Sort(bids)
		if !slices.Equal(bids, []int32{1, 2, 3}) {
			t.Errorf("kcat via node %d: brokers %v, want [1 2 3]", id, bids)
		}
		if int(km.ControllerID) != ctrl {
			t.Errorf("kcat via node %d: controller %d, want %d", id, km.ControllerID, ctrl)
		}
		if len(km.Topics) != 1 || km.Topics[0].Topic != topic || km.Topics[0].Error != "" {
			t.Fatalf("kcat via node %d: topics %+v, want just %q without error", id, km.Topics, topic)
		}
		kt := km.Topics[0]
		if len(kt.Partitions) != 6 {
			t.Errorf("kcat via node %d: %d partitions, want 6", id, len(kt.Partitions))
		}
		for _, kp := range kt.Partitions {
			p, ok := td.Partitions[kp.Partition]
			if !ok {
				t.Errorf("kcat via node %d: unexpected partition %d", id, kp.Partition)
				continue
			}
			if kp.Error != "" || kp.Leader != p.Leader {
				t.Errorf("kcat via node %d: p%d leader %d (error %q), kadm says %d", id, kp.Partition, kp.Leader, kp.Error, p.Leader)
			}
			var reps, isr []int32
			for _, r := range kp.Replicas {
				reps = append(reps, r.ID)
			}
			for _, r := range kp.ISRs {
				isr = append(isr, r.ID)
			}
			if !slices.Equal(reps, p.Replicas) || !slices.Equal(isr, p.ISR) {
				t.Errorf("kcat via node %d: p%d replicas %v isr %v, kadm says %v and %v", id, kp.Partition, reps, isr, p.Replicas, p.ISR)
			}
		}
	}
}

// TestClusterControllerFailover: SIGKILL the active controller; the
// survivors elect a new one and keep creating topics; once the dead node is
// fenced RF=3 is refused and RF=2 works; the node comes back and catches
// up on everything created while it was down.
func TestClusterControllerFailover(t *testing.T) {
	c := startCluster(t, 3)
	all := c.IDs()
	ctrl, _ := c.awaitController(t, 10*time.Second, all)
	survivors := others(all, ctrl)

	c.createOn(t, survivors[0], "before", 3, 3)
	c.awaitTopic(t, 10*time.Second, "before", all, replicasOn(all, 3))

	t.Logf("killing the active controller, node %d", ctrl)
	killed := time.Now()
	c.Kill(ctrl)

	// CreateTopics through a survivor, retried until the quorum has a new
	// leader. A retry after a timed-out attempt may find the topic made.
	const during = "during-failover"
	adm := c.Admin(survivors[0])
	attempts := 0
	var lastErr error
	for {
		attempts++
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		resp, err := adm.CreateTopic(ctx, 3, 2, nil, during)
		cancel()
		if err == nil || (attempts > 1 && errors.Is(err, kerr.TopicAlreadyExists)) {
			break
		}
		lastErr = fmt.Errorf("%w (%s)", err, resp.ErrMessage)
		if time.Since(killed) > 20*time.Second {
			t.Fatalf("no CreateTopics through node %d succeeded within 20s of killing the controller; %d attempts, last: %v", survivors[0], attempts, lastErr)
		}
		time.Sleep(100 * time.Millisecond)
	}
	createdAfter := time.Since(killed)
	t.Logf("failover: CreateTopics through node %d succeeded %v after SIGKILL of the controller (%d attempts, last error before success: %v)",
		survivors[0], createdAfter.Round(time.Millisecond), attempts, lastErr)

	newCtrl, _ := c.awaitController(t, 10*time.Second, survivors)
	t.Logf("failover: survivors agree on node %d as controller %v after the kill", newCtrl, time.Since(killed).Round(time.Millisecond))
	// Placed while the dead node was not yet fenced, it may hold replicas
	// there, out of their ISRs once the fencing lands (fast fencing).
	_, took := c.awaitTopic(t, 10*time.Second, during, survivors, placedOn(all, 2))
	t.Logf("failover: %q seen alike by both survivors %v after its CreateTopics returned", during, took.Round(time.Millisecond))

	// RF=3 fails once the dead node is fenced. Probe with validate-only
	// requests so nothing is created while it is still counted live.
	c.Await(t, 15*time.Second, "validate-only RF=3 refused with INVALID_REPLICATION_FACTOR", func() (bool, string) {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		rs, err := adm.ValidateCreateTopics(ctx, 1, 3, nil, "rf3-probe")
		if err != nil {
			return false, err.Error()
		}
		r := rs["rf3-probe"]
		return errors.Is(r.Err, kerr.InvalidReplicationFactor), fmt.Sprintf("%v (%s)", r.Err, r.ErrMessage)
	})
	fencedAfter := time.Since(killed)
	t.Logf("failover: dead controller node %d fenced (RF=3 refused) %v after the kill (session timeout %v)", ctrl, fencedAfter.Round(time.Millisecond), clusterSessionTimeout)
	c.waitBrokers(t, 5*time.Second, toInt32s(survivors))

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := c.Admin(survivors[1]).CreateTopic(ctx, 2, 3, nil, "rf3-after-fence")
	if !errors.Is(err, kerr.InvalidReplicationFactor) {
		t.Errorf("RF=3 with one of three brokers fenced: got %v (%s), want INVALID_REPLICATION_FACTOR", err, resp.ErrMessage)
	}
	c.createOn(t, survivors[1], "rf2-after-fence", 4, 2)
	c.awaitTopic(t, 10*time.Second, "rf2-after-fence", survivors, replicasOn(survivors, 2))

	// The partitions of the topic made during failover have live leaders.
	c.awaitTopic(t, 10*time.Second, during, survivors, func(td kadm.TopicDetail) string {
		for _, p := range td.Partitions.Sorted() {
			if !slices.Contains(survivors, int(p.Leader)) {
				return fmt.Sprintf("p%d leader %d is not a survivor", p.Partition, p.Leader)
			}
		}
		return ""
	})

	// The old controller comes back and catches up.
	restarted := time.Now()
	c.Restart(ctrl)
	t.Logf("node %d restarted and serving after %v", ctrl, time.Since(restarted).Round(time.Millisecond))
	listed := c.waitBrokers(t, 15*time.Second, toInt32s(all))
	t.Logf("rejoin: all three nodes list 3 brokers %v after the restart", (time.Since(restarted)).Round(time.Millisecond))
	_ = listed
	for _, topic := range []string{"before", during, "rf2-after-fence"} {
		td, _ := c.awaitTopic(t, 10*time.Second, topic, all, nil)
		t.Logf("after rejoin %q: %s", topic, topicLayout(td))
	}
	c.awaitTopicGone(t, 5*time.Second, "rf3-after-fence", all)
	c.awaitTopicGone(t, 5*time.Second, "rf3-probe", all)
	final, _ := c.awaitController(t, 10*time.Second, all)
	t.Logf("controller after rejoin: node %d", final)
}

// TestClusterBrokerLoss: SIGKILL a node that is not the controller; its
// leaderships move to the other ISR members with a higher leader epoch
// (fast fencing: the controller sees its listeners refuse connections,
// TestFastFencing; without it, after the session timeout); creation keeps
// working; the node comes back unfenced.
func TestClusterBrokerLoss(t *testing.T) {
	c := startCluster(t, 3)
	all := c.IDs()
	ctrl, _ := c.awaitController(t, 10*time.Second, all)
	victim := others(all, ctrl)[0]
	survivors := others(all, victim)

	const topic = "loss"
	c.createOn(t, ctrl, topic, 6, 3)
	before, _ := c.awaitTopic(t, 10*time.Second, topic, all, replicasOn(all, 3))
	// RF=1: one partition per node; the victim's has no other ISR member.
	const single = "loss-rf1"
	c.createOn(t, ctrl, single, 3, 1)
	singleBefore, _ := c.awaitTopic(t, 10*time.Second, single, all, replicasOn(all, 1))
	orphan := int32(-1)
	for _, p := range singleBefore.Partitions.Sorted() {
		if int(p.Leader) == victim {
			orphan = p.Partition
		}
	}
	if orphan < 0 {
		t.Fatalf("no partition of %s on node %d: %s", single, victim, topicLayout(singleBefore))
	}
	var led []int32
	for _, p := range before.Partitions.Sorted() {
		if int(p.Leader) == victim {
			led = append(led, p.Partition)
		}
	}
	if len(led) == 0 {
		t.Fatalf("victim node %d leads nothing of %s", victim, topicLayout(before))
	}

	t.Logf("killing node %d (controller is node %d); it leads partitions %v", victim, ctrl, led)
	killed := time.Now()
	c.Kill(victim)

	after, _ := c.awaitTopic(t, 15*time.Second, topic, survivors, func(td kadm.TopicDetail) string {
		for _, p := range td.Partitions.Sorted() {
			old := before.Partitions[p.Partition]
			switch {
			case slices.Contains(p.ISR, int32(victim)):
				return fmt.Sprintf("p%d ISR %v still holds the dead node", p.Partition, p.ISR)
			case int(p.Leader) == victim || p.Leader == -1:
				return fmt.Sprintf("p%d leader %d", p.Partition, p.Leader)
			case old.Leader != int32(victim) && p.Leader != old.Leader:
				return fmt.Sprintf("p%d leader moved from %d to %d though its leader lived", p.Partition, old.Leader, p.Leader)
			case old.Leader == int32(victim) && p.LeaderEpoch <= old.LeaderEpoch:
				return fmt.Sprintf("p%d leader epoch %d, was %d", p.Partition, p.LeaderEpoch, old.LeaderEpoch)
			case !slices.Contains(p.OfflineReplicas, int32(victim)):
				return fmt.Sprintf("p%d offline replicas %v lack the dead node", p.Partition, p.OfflineReplicas)
			case !slices.Equal(p.Replicas, old.Replicas):
				return fmt.Sprintf("p%d replicas changed from %v to %v", p.Partition, old.Replicas, p.Replicas)
			}
		}
		return ""
	})
	moved := time.Since(killed)
	t.Logf("broker loss: leaderships of node %d moved %v after SIGKILL (session timeout %v)", victim, moved.Round(time.Millisecond), clusterSessionTimeout)
	t.Logf("layout after the move: %s", topicLayout(after))
	c.waitBrokers(t, 5*time.Second, toInt32s(survivors))

	// The RF=1 partition on the dead node has no leader (no unclean
	// election) and keeps its ISR; the others are untouched.
	c.awaitTopic(t, 5*time.Second, single, survivors, func(td kadm.TopicDetail) string {
		for _, p := range td.Partitions.Sorted() {
			old := singleBefore.Partitions[p.Partition]
			if p.Partition != orphan {
				if p.Leader != old.Leader || p.LeaderEpoch != old.LeaderEpoch || p.Err != nil {
					return fmt.Sprintf("p%d changed: leader %d epoch %d err %v", p.Partition, p.Leader, p.LeaderEpoch, p.Err)
				}
				continue
			}
			if p.Leader != -1 || !errors.Is(p.Err, kerr.LeaderNotAvailable) {
				return fmt.Sprintf("p%d (only on the dead node): leader %d err %v, want -1 and LEADER_NOT_AVAILABLE", p.Partition, p.Leader, p.Err)
			}
			if !slices.Equal(p.ISR, []int32{int32(victim)}) || !slices.Equal(p.OfflineReplicas, []int32{int32(victim)}) {
				return fmt.Sprintf("p%d (only on the dead node): isr %v offline %v, want both [%d]", p.Partition, p.ISR, p.OfflineReplicas, victim)
			}
		}
		return ""
	})

	// DescribeCluster asked for fenced brokers lists the dead one as such.
	for _, id := range survivors {
		req := kmsg.NewPtrDescribeClusterRequest()
		req.IncludeFencedBrokers = true
		dctx, dcancel := context.WithTimeout(context.Background(), 5*time.Second)
		dresp, err := req.RequestWith(dctx, c.Client(id))
		dcancel()
		if err != nil {
			t.Fatalf("DescribeCluster from node %d: %v", id, err)
		}
		fenced := map[int32]bool{}
		for _, b := range dresp.Brokers {
			fenced[b.NodeID] = b.IsFenced
		}
		if len(fenced) != 3 || !fenced[int32(victim)] || fenced[int32(survivors[0])] || fenced[int32(survivors[1])] {
			t.Errorf("DescribeCluster(include fenced) from node %d: fenced flags %v, want 3 brokers with only %d fenced", id, fenced, victim)
		}
	}

	// Creation keeps working, through either survivor.
	for i, id := range survivors {
		name := fmt.Sprintf("loss-after-%d", i)
		c.createOn(t, id, name, 4, 2)
		c.awaitTopic(t, 10*time.Second, name, survivors, replicasOn(survivors, 2))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	rs, err := c.Admin(survivors[0]).ValidateCreateTopics(ctx, 1, 3, nil, "loss-rf3")
	if err != nil {
		t.Fatalf("validate-only create: %v", err)
	}
	if r := rs["loss-rf3"]; !errors.Is(r.Err, kerr.InvalidReplicationFactor) {
		t.Errorf("RF=3 with a broker fenced: %v (%s), want INVALID_REPLICATION_FACTOR", r.Err, r.ErrMessage)
	}

	restarted := time.Now()
	c.Restart(victim)
	took := c.waitBrokers(t, 15*time.Second, toInt32s(all))
	t.Logf("node %d restarted; listed by all three nodes %v after the restart (%v of it waiting on the others)",
		victim, time.Since(restarted).Round(time.Millisecond), took.Round(time.Millisecond))
	for _, name := range []string{topic, single, "loss-after-0", "loss-after-1"} {
		td, _ := c.awaitTopic(t, 10*time.Second, name, all, nil)
		t.Logf("after rejoin %q: %s", name, topicLayout(td))
	}
	// Back, the node leads its RF=1 partition again, at a new epoch.
	c.awaitTopic(t, 10*time.Second, single, all, func(td kadm.TopicDetail) string {
		p, old := td.Partitions[orphan], singleBefore.Partitions[orphan]
		if int(p.Leader) != victim || p.LeaderEpoch <= old.LeaderEpoch || p.Err != nil {
			return fmt.Sprintf("p%d: leader %d epoch %d err %v, want leader %d at an epoch above %d", orphan, p.Leader, p.LeaderEpoch, p.Err, victim, old.LeaderEpoch)
		}
		return ""
	})
	req := kmsg.NewPtrDescribeClusterRequest()
	req.IncludeFencedBrokers = true
	dresp, err := req.RequestWith(ctx, c.Client(victim))
	if err != nil {
		t.Fatalf("DescribeCluster from node %d: %v", victim, err)
	}
	for _, b := range dresp.Brokers {
		if b.IsFenced {
			t.Errorf("DescribeCluster from node %d after rejoin: broker %d still fenced", victim, b.NodeID)
		}
	}
}

// TestClusterTopicErrors: TOPIC_ALREADY_EXISTS whatever the partition
// count, CreatePartitions seen by every node, DeleteTopics from a
// non-controller node removing the topic everywhere.
func TestClusterTopicErrors(t *testing.T) {
	c := startCluster(t, 3)
	all := c.IDs()
	ctrl, _ := c.awaitController(t, 10*time.Second, all)
	nonCtrl := others(all, ctrl)

	const topic = "errs-topic"
	created := c.createOn(t, nonCtrl[0], topic, 3, 3)
	orig, _ := c.awaitTopic(t, 10*time.Second, topic, all, replicasOn(all, 3))

	// Existing name: refused through every node, whatever the count.
	for i, id := range []int{nonCtrl[1], ctrl, nonCtrl[0]} {
		parts := []int32{5, 3, 1}[i]
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		resp, err := c.Admin(id).CreateTopic(ctx, parts, 3, nil, topic)
		cancel()
		if !errors.Is(err, kerr.TopicAlreadyExists) {
			t.Errorf("re-creating %q with %d partitions through node %d: %v (%s), want TOPIC_ALREADY_EXISTS", topic, parts, id, err, resp.ErrMessage)
		}
	}
	now, _ := c.awaitTopic(t, 5*time.Second, topic, all, nil)
	if topicLayout(now) != topicLayout(orig) {
		t.Errorf("a refused CreateTopics changed the topic:\nbefore %s\nafter  %s", topicLayout(orig), topicLayout(now))
	}
	if now.ID != created.ID {
		t.Errorf("topic id %v, created as %v", now.ID, created.ID)
	}

	// Grow it through a non-controller node.
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	start := time.Now()
	cps, err := c.Admin(nonCtrl[1]).CreatePartitions(kadm.WithAuthorizedOps(ctx), 3, topic)
	if err != nil {
		t.Fatalf("CreatePartitions: %v", err)
	}
	if r := cps[topic]; r.Err != nil {
		t.Fatalf("CreatePartitions %q +3: %v (%s)", topic, r.Err, r.ErrMessage)
	}
	answered := time.Since(start)
	grown, took := c.awaitTopic(t, 10*time.Second, topic, all, func(td kadm.TopicDetail) string {
		if len(td.Partitions) != 6 {
			return fmt.Sprintf("%d partitions, want 6", len(td.Partitions))
		}
		return replicasOn(all, 3)(td)
	})
	t.Logf("CreatePartitions 3 -> 6 through node %d answered in %v; every node had 6 partitions %v later", nonCtrl[1], answered.Round(time.Millisecond), took.Round(time.Millisecond))
	for p := int32(0); p < 3; p++ {
		if o, g := orig.Partitions[p], grown.Partitions[p]; o.Leader != g.Leader || !slices.Equal(o.Replicas, g.Replicas) {
			t.Errorf("growing moved p%d: leader %d replicas %v, was %d %v", p, g.Leader, g.Replicas, o.Leader, o.Replicas)
		}
	}
	// Shrinking is INVALID_PARTITIONS.
	ups, err := c.Admin(ctrl).UpdatePartitions(ctx, 4, topic)
	if err != nil {
		t.Fatalf("UpdatePartitions: %v", err)
	}
	if r := ups[topic]; !errors.Is(r.Err, kerr.InvalidPartitions) {
		t.Errorf("shrinking %q to 4 partitions: %v (%s), want INVALID_PARTITIONS", topic, r.Err, r.ErrMessage)
	}

	// Delete through a non-controller node.
	start = time.Now()
	drs, err := c.Admin(nonCtrl[0]).DeleteTopics(ctx, topic)
	if err != nil {
		t.Fatalf("DeleteTopics: %v", err)
	}
	if r := drs[topic]; r.Err != nil {
		t.Fatalf("DeleteTopics %q through node %d: %v (%s)", topic, nonCtrl[0], r.Err, r.ErrMessage)
	}
	answered = time.Since(start)
	took = c.awaitTopicGone(t, 10*time.Second, topic, all)
	t.Logf("DeleteTopics through node %d answered in %v; gone from every node's Metadata %v later", nonCtrl[0], answered.Round(time.Millisecond), took.Round(time.Millisecond))
	c.Await(t, 10*time.Second, "every node removed the deleted topic's partition directories", func() (bool, string) {
		for _, id := range all {
			dirs, _ := filepath.Glob(filepath.Join(c.Node(id).DataDir, topic+"-*"))
			if len(dirs) > 0 {
				return false, fmt.Sprintf("node %d still has %v", id, dirs)
			}
		}
		return true, ""
	})
	drs, err = c.Admin(ctrl).DeleteTopics(ctx, topic)
	if err != nil {
		t.Fatalf("DeleteTopics again: %v", err)
	}
	if r := drs[topic]; !errors.Is(r.Err, kerr.UnknownTopicOrPartition) {
		t.Errorf("deleting %q twice: %v, want UNKNOWN_TOPIC_OR_PARTITION", topic, r.Err)
	}

	// The name is free again: a new topic, not the old one merged back.
	again := c.createOn(t, nonCtrl[1], topic, 2, 3)
	td, _ := c.awaitTopic(t, 10*time.Second, topic, all, func(td kadm.TopicDetail) string {
		if len(td.Partitions) != 2 {
			return fmt.Sprintf("%d partitions, want 2", len(td.Partitions))
		}
		return replicasOn(all, 3)(td)
	})
	if td.ID == created.ID || td.ID != again.ID {
		t.Errorf("re-created topic id %v: old id %v, CreateTopics answered %v", td.ID, created.ID, again.ID)
	}
	for _, id := range all {
		for p := 2; p < 6; p++ {
			if _, err := os.Stat(filepath.Join(c.Node(id).DataDir, fmt.Sprintf("%s-%d", topic, p))); err == nil {
				t.Errorf("node %d has a directory for partition %d of the re-created 2-partition topic", id, p)
			}
		}
	}
}

func toInt32s(ids []int) []int32 {
	out := make([]int32, len(ids))
	for i, id := range ids {
		out[i] = int32(id)
	}
	return out
}
