package compattests

// Partition reassignment (KIP-455) with real admin clients: kadm and
// sarama's ClusterAdmin move a partition's replicas between brokers of a
// four-node cluster, list the move while a replication throttle keeps it
// going, cancel one, and hit the error paths. The moved data is read back
// from the broker it moved to, and the broker it left deletes its copy.

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// reassignThrottle is the leader and follower replication rate of the
// reassignment tests' clusters, in bytes per second: slow enough that a
// move of a few MB is seen in progress, fast enough to finish in seconds.
const reassignThrottle = 512 << 10

// reassignValue is record i of a reassignment test: "<prefix>-<i>-" and
// pseudo-random bytes (seeded by i, so incompressible and reproducible) to
// size bytes.
func reassignValue(prefix string, i, size int) string {
	v := []byte(fmt.Sprintf("%s-%d-", prefix, i))
	r := rand.New(rand.NewPCG(uint64(i), 7))
	for len(v) < size {
		v = append(v, byte(r.Uint32()))
	}
	return string(v)
}

// produceValues writes n records of size bytes to partition 0 of topic,
// acks=all, and fails unless every one is acknowledged.
func produceValues(t testing.TB, addrs []string, topic, prefix string, from, n, size int) {
	t.Helper()
	cl := newClient(t, addrs[0], kgo.SeedBrokers(addrs...), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerBatchMaxBytes(1<<20))
	defer cl.Close()
	ctx := testCtx(t, 60*time.Second)
	recs := make([]*kgo.Record, n)
	for i := range recs {
		recs[i] = &kgo.Record{Topic: topic, Partition: 0, Value: []byte(reassignValue(prefix, from+i, size))}
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatalf("producing %d records to %s: %v", n, topic, err)
	}
}

// checkValues reads partition 0 of topic from the start through addrs and
// fails unless it holds exactly the values prefix 0..n-1, in order.
func checkValues(t testing.TB, addrs []string, topic, prefix string, n, size int) {
	t.Helper()
	recs := consumeAll(t, addrs[0], topic, n, 30*time.Second, kgo.SeedBrokers(addrs...))
	if len(recs) != n {
		t.Fatalf("%s: read %d records, want %d", topic, len(recs), n)
	}
	for i, r := range recs {
		if want := reassignValue(prefix, i, size); string(r.Value) != want || r.Partition != 0 {
			t.Fatalf("%s: record %d is p%d %.20q..., want %.20q...", topic, i, r.Partition, r.Value, want)
		}
	}
}

// createRF3 creates topic with one partition on three brokers.
func createRF3(t testing.TB, adm *kadm.Client, topic string, configs map[string]*string) {
	t.Helper()
	resp, err := adm.CreateTopic(testCtx(t, 15*time.Second), 1, 3, configs, topic)
	if err != nil {
		t.Fatalf("create topic %q: %v (%s)", topic, err, resp.ErrMessage)
	}
}

// partitionState is partition 0 of topic as node id's metadata shows it.
func partitionState(c *Cluster, id int, topic string) (kadm.PartitionDetail, bool) {
	m, err := c.Metadata(id, topic)
	if err != nil {
		return kadm.PartitionDetail{}, false
	}
	td, ok := m.Topics[topic]
	if !ok || td.Err != nil {
		return kadm.PartitionDetail{}, false
	}
	p, ok := td.Partitions[0]
	return p, ok && p.Err == nil
}

func sameMembers(a, b []int32) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}

// spareOf returns the first of ids not in replicas.
func spareOf(ids []int, replicas []int32) int32 {
	for _, id := range ids {
		if !slices.Contains(replicas, int32(id)) {
			return int32(id)
		}
	}
	return -1
}

// alterErr runs one kadm reassignment and returns its partition's error.
func alterErr(t testing.TB, adm *kadm.Client, topic string, p int32, target []int32) error {
	t.Helper()
	var req kadm.AlterPartitionAssignmentsReq
	req.Assign(topic, p, target)
	resps, err := adm.AlterPartitionAssignments(testCtx(t, 30*time.Second), req)
	if err != nil {
		t.Fatalf("AlterPartitionAssignments %s-%d %v: %v", topic, p, target, err)
	}
	r, ok := resps[topic][p]
	if !ok {
		t.Fatalf("AlterPartitionAssignments %s-%d: no answer for the partition: %+v", topic, p, resps)
	}
	return r.Err
}

// listMoves lists topic's reassignments with kadm.
func listMoves(t testing.TB, adm *kadm.Client, topic string) map[int32]kadm.ListPartitionReassignmentsResponse {
	t.Helper()
	s := make(kadm.TopicsSet)
	s.Add(topic, 0)
	resps, err := adm.ListPartitionReassignments(testCtx(t, 10*time.Second), s)
	if err != nil {
		t.Fatalf("ListPartitionReassignments %s: %v", topic, err)
	}
	return resps[topic]
}

// listAllRaw lists every reassignment (null topics, which kadm cannot
// send) from node id.
func listAllRaw(t testing.TB, c *Cluster, id int) *kmsg.ListPartitionReassignmentsResponse {
	t.Helper()
	req := kmsg.NewPtrListPartitionReassignmentsRequest()
	resp, err := req.RequestWith(testCtx(t, 10*time.Second), c.Client(id))
	if err != nil {
		t.Fatalf("ListPartitionReassignments (all): %v", err)
	}
	if resp.ErrorCode != 0 {
		t.Fatalf("ListPartitionReassignments (all): %v", kerr.ErrorForCode(resp.ErrorCode))
	}
	return resp
}

// awaitGone waits until node id holds no directory for topic-0.
func awaitGone(t testing.TB, c *Cluster, id int32, topic string) {
	t.Helper()
	dir := filepath.Join(c.Node(int(id)).DataDir, topic+"-0")
	c.Await(t, 30*time.Second, fmt.Sprintf("node %d deletes %s", id, dir), func() (bool, string) {
		_, err := os.Stat(dir)
		return errors.Is(err, os.ErrNotExist), fmt.Sprintf("stat: %v", err)
	})
}

func TestReassign(t *testing.T) {
	rate := fmt.Sprint(reassignThrottle)
	c := startCluster(t, 4, "leader.replication.throttled.rate="+rate, "follower.replication.throttled.rate="+rate,
		"auto.leader.rebalance.enable=false", "min.insync.replicas=2")
	adm := c.Admin(1)
	throttled := func() map[string]*string {
		all := "*"
		return map[string]*string{"leader.replication.throttled.replicas": &all, "follower.replication.throttled.replicas": &all}
	}

	// kadm: move [a b c] led by a to [b c s]; the leadership leaves a.
	t.Run("move", func(t *testing.T) {
		const topic, n, size = "reassign-move", 300, 8 << 10 // ~2.4 MB: ~5 s at the throttle
		createRF3(t, adm, topic, throttled())
		c.Await(t, 20*time.Second, "full ISR", func() (bool, string) {
			p, ok := partitionState(c, 1, topic)
			return ok && len(p.Replicas) == 3 && len(p.ISR) == 3, fmt.Sprintf("%+v", p)
		})
		produceValues(t, c.Addrs(), topic, "m", 0, n, size)
		before, _ := partitionState(c, 1, topic)
		leader := before.Leader
		target := slices.DeleteFunc(slices.Clone(before.Replicas), func(id int32) bool { return id == leader })
		spare := spareOf(c.IDs(), before.Replicas)
		target = append(target, spare)
		t.Logf("moving %s-0 from %v (leader %d) to %v", topic, before.Replicas, leader, target)

		start := time.Now()
		if err := alterErr(t, adm, topic, 0, target); err != nil {
			t.Fatalf("reassign: %v", err)
		}
		got := listMoves(t, adm, topic)
		mv, ok := got[0]
		if !ok || !slices.Equal(mv.AddingReplicas, []int32{spare}) || !slices.Equal(mv.RemovingReplicas, []int32{leader}) ||
			!slices.Equal(mv.Replicas, append(slices.Clone(target), leader)) {
			t.Fatalf("listed during the move: %+v (ok %t); want replicas %v adding [%d] removing [%d]", mv, ok, append(slices.Clone(target), leader), spare, leader)
		}
		all := listAllRaw(t, c, 2)
		if len(all.Topics) != 1 || all.Topics[0].Topic != topic || len(all.Topics[0].Partitions) != 1 {
			t.Fatalf("listing all during the move: %+v", all.Topics)
		}
		// Produce during the move: acks=all goes on working.
		produceValues(t, c.Addrs(), topic, "m", n, 50, size)
		c.Await(t, 90*time.Second, "the move completes", func() (bool, string) {
			got := listMoves(t, adm, topic)
			return len(got) == 0, fmt.Sprintf("%+v", got)
		})
		t.Logf("moved ~%d MB through a %d KB/s throttle in %v", (n+50)*size>>20, reassignThrottle>>10, (time.Since(start)).Round(100*time.Millisecond))
		c.Await(t, 10*time.Second, "the metadata shows the target", func() (bool, string) {
			p, ok := partitionState(c, 3, topic)
			return ok && slices.Equal(p.Replicas, target) && sameMembers(p.ISR, target) && p.Leader == target[0], fmt.Sprintf("%+v", p)
		})
		if all := listAllRaw(t, c, 1); len(all.Topics) != 0 {
			t.Fatalf("listing all after the move: %+v", all.Topics)
		}
		awaitGone(t, c, leader, topic)
		produceValues(t, c.Addrs(), topic, "m", n+50, 50, size)

		// The new replica holds everything: make it the preferred leader
		// (a reorder, which completes at once) and read from it.
		reordered := append([]int32{spare}, slices.DeleteFunc(slices.Clone(target), func(id int32) bool { return id == spare })...)
		if err := alterErr(t, adm, topic, 0, reordered); err != nil {
			t.Fatalf("reorder: %v", err)
		}
		if got := listMoves(t, adm, topic); len(got) != 0 {
			t.Fatalf("a reorder left a move in progress: %+v", got)
		}
		c.Await(t, 30*time.Second, fmt.Sprintf("node %d leads", spare), func() (bool, string) {
			res, err := adm.ElectLeaders(testCtx(t, 10*time.Second), kadm.ElectPreferredReplica, kadm.TopicsSet{topic: {0: {}}})
			p, _ := partitionState(c, 1, topic)
			return p.Leader == spare, fmt.Sprintf("%+v %v %+v", res, err, p)
		})
		checkValues(t, c.Addrs(), topic, "m", n+100, size)
	})

	// kadm: cancel a move half way; the original replicas stay, the added
	// one deletes what it had copied.
	t.Run("cancel", func(t *testing.T) {
		const topic, n, size = "reassign-cancel", 800, 8 << 10 // ~6.4 MB: the move cannot finish before the cancel
		createRF3(t, adm, topic, throttled())
		produceValues(t, c.Addrs(), topic, "c", 0, n, size)
		before, _ := partitionState(c, 1, topic)
		spare := spareOf(c.IDs(), before.Replicas)
		target := append(slices.Clone(before.Replicas[1:]), spare)
		if err := alterErr(t, adm, topic, 0, target); err != nil {
			t.Fatalf("reassign: %v", err)
		}
		if got := listMoves(t, adm, topic); len(got) != 1 {
			t.Fatalf("listed during the move: %+v", got)
		}
		if err := alterErr(t, adm, topic, 0, nil); err != nil {
			t.Fatalf("cancel: %v", err)
		}
		if got := listMoves(t, adm, topic); len(got) != 0 {
			t.Fatalf("listed after the cancel: %+v", got)
		}
		if err := alterErr(t, adm, topic, 0, nil); !errors.Is(err, kerr.NoReassignmentInProgress) {
			t.Fatalf("second cancel: %v, want NO_REASSIGNMENT_IN_PROGRESS", err)
		}
		// Node 1 answered once its own image showed the cancel; node 2
		// follows the same log.
		c.Await(t, 10*time.Second, "the original replicas back", func() (bool, string) {
			p, ok := partitionState(c, 2, topic)
			return ok && sameMembers(p.Replicas, before.Replicas) && sameMembers(p.ISR, before.Replicas) && p.Leader == before.Leader,
				fmt.Sprintf("%+v, want replicas and ISR %v led by %d", p, before.Replicas, before.Leader)
		})
		awaitGone(t, c, spare, topic)
		checkValues(t, c.Addrs(), topic, "c", n, size)
	})

	// A replica moved away while its broker is down is removed when the
	// broker comes back: replaying its metadata log unassigns it, or, if it
	// caught up from a snapshot that never placed it, the stray-replica
	// check does (broker/replicamgr/stray.go, unit-tested there).
	t.Run("removed while down", func(t *testing.T) {
		const topic, n, size = "reassign-down", 100, 8 << 10
		createRF3(t, adm, topic, nil)
		produceValues(t, c.Addrs(), topic, "d", 0, n, size)
		before, _ := partitionState(c, 1, topic)
		// The last replica that is not node 1, whose admin client the
		// later subtests use: a client of a node killed and restarted
		// fails its next request.
		gone := before.Replicas[len(before.Replicas)-1]
		if gone == 1 {
			gone = before.Replicas[len(before.Replicas)-2]
		}
		spare := spareOf(c.IDs(), before.Replicas)
		target := append(slices.DeleteFunc(slices.Clone(before.Replicas), func(id int32) bool { return id == gone }), spare)
		dir := filepath.Join(c.Node(int(gone)).DataDir, topic+"-0")
		if _, err := os.Stat(dir); err != nil {
			t.Fatalf("node %d has no copy before the move: %v", gone, err)
		}
		c.Kill(int(gone))
		alive := int(target[0])
		phase := time.Now()
		c.Await(t, 20*time.Second, fmt.Sprintf("node %d leaves the ISR", gone), func() (bool, string) {
			p, ok := partitionState(c, alive, topic)
			return ok && !slices.Contains(p.ISR, gone) && p.Leader >= 0, fmt.Sprintf("%+v", p)
		})
		if err := alterErr(t, c.Admin(alive), topic, 0, target); err != nil {
			t.Fatalf("reassign: %v", err)
		}
		c.Await(t, 30*time.Second, "the move completes without the removed broker", func() (bool, string) {
			p, ok := partitionState(c, alive, topic)
			return ok && slices.Equal(p.Replicas, target) && sameMembers(p.ISR, target), fmt.Sprintf("%+v", p)
		})
		if _, err := os.Stat(dir); err != nil {
			t.Fatalf("node %d's copy went while it was down: %v", gone, err)
		}
		t.Logf("node %d killed, fenced and moved away from in %v", gone, time.Since(phase).Round(10*time.Millisecond))
		c.Restart(int(gone))
		awaitGone(t, c, gone, topic)
		checkValues(t, c.Addrs(), topic, "d", n, size)
	})

	t.Run("errors", func(t *testing.T) {
		const topic = "reassign-errors"
		createRF3(t, adm, topic, nil)
		for _, tc := range []struct {
			name   string
			topic  string
			p      int32
			target []int32
			want   error
		}{
			{"unknown topic", "reassign-nope", 0, []int32{1, 2, 3}, kerr.UnknownTopicOrPartition},
			{"unknown partition", topic, 5, []int32{1, 2, 3}, kerr.UnknownTopicOrPartition},
			{"duplicate broker", topic, 0, []int32{1, 2, 2}, kerr.InvalidReplicaAssignment},
			{"unregistered broker", topic, 0, []int32{1, 2, 99}, kerr.InvalidReplicaAssignment},
			{"empty target", topic, 0, []int32{}, kerr.InvalidReplicaAssignment},
			{"cancel nothing", topic, 0, nil, kerr.NoReassignmentInProgress},
		} {
			if err := alterErr(t, adm, tc.topic, tc.p, tc.target); !errors.Is(err, tc.want) {
				t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
			}
		}
		if got := listMoves(t, adm, "reassign-nope"); len(got) != 0 {
			t.Errorf("listing an unknown topic: %+v", got)
		}
	})

	t.Run("kafka-go", func(t *testing.T) { reassignKafkaGo(t, c, adm, throttled()) })

	// sarama's ClusterAdmin: the same move and listing, and an error.
	t.Run("sarama", func(t *testing.T) {
		const topic, n, size = "reassign-sarama", 200, 8 << 10
		createRF3(t, adm, topic, throttled())
		produceValues(t, c.Addrs(), topic, "s", 0, n, size)
		cfg := sarama.NewConfig()
		cfg.Version = sarama.V3_6_0_0
		ca, err := sarama.NewClusterAdmin(c.Addrs(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		defer ca.Close()
		before, _ := partitionState(c, 1, topic)
		spare := spareOf(c.IDs(), before.Replicas)
		target := append(slices.Clone(before.Replicas[1:]), spare)
		if err := ca.AlterPartitionReassignments(topic, [][]int32{target}); err != nil {
			t.Fatalf("sarama AlterPartitionReassignments: %v", err)
		}
		st, err := ca.ListPartitionReassignments(topic, []int32{0})
		if err != nil {
			t.Fatalf("sarama ListPartitionReassignments: %v", err)
		}
		if s := st[topic][0]; s == nil || !slices.Equal(s.AddingReplicas, []int32{spare}) || !slices.Equal(s.RemovingReplicas, before.Replicas[:1]) {
			t.Fatalf("sarama lists %+v, want adding [%d] removing %v", st[topic], spare, before.Replicas[:1])
		}
		c.Await(t, 60*time.Second, "the sarama move completes", func() (bool, string) {
			st, err := ca.ListPartitionReassignments(topic, []int32{0})
			return err == nil && len(st[topic]) == 0, fmt.Sprintf("%+v %v", st[topic], err)
		})
		c.Await(t, 10*time.Second, "the metadata shows the target", func() (bool, string) {
			p, ok := partitionState(c, 4, topic)
			return ok && slices.Equal(p.Replicas, target), fmt.Sprintf("%+v", p)
		})
		awaitGone(t, c, before.Replicas[0], topic)
		if err := ca.AlterPartitionReassignments(topic, [][]int32{{1, 1}}); !errors.Is(err, sarama.ErrInvalidReplicaAssignment) {
			t.Fatalf("sarama duplicate broker: %v, want INVALID_REPLICA_ASSIGNMENT", err)
		}
		checkValues(t, c.Addrs(), topic, "s", n, size)
	})
}

// reassignKafkaGo is the kafka-go part of TestReassign: its Client's
// AlterPartitionReassignments and ListPartitionReassignments.
func reassignKafkaGo(t *testing.T, c *Cluster, adm *kadm.Client, configs map[string]*string) {
	const topic, n, size = "reassign-kafkago", 200, 8 << 10
	createRF3(t, adm, topic, configs)
	produceValues(t, c.Addrs(), topic, "g", 0, n, size)
	before, _ := partitionState(c, 1, topic)
	spare := spareOf(c.IDs(), before.Replicas)
	target := append(slices.Clone(before.Replicas[1:]), spare)
	cl := &kafka.Client{Addr: kafka.TCP(c.Addrs()...), Timeout: 10 * time.Second}
	ctx := testCtx(t, 30*time.Second)
	ints := func(ids []int32) []int {
		out := make([]int, len(ids))
		for i, id := range ids {
			out[i] = int(id)
		}
		return out
	}
	resp, err := cl.AlterPartitionReassignments(ctx, &kafka.AlterPartitionReassignmentsRequest{Topic: topic,
		Assignments: []kafka.AlterPartitionReassignmentsRequestAssignment{{PartitionID: 0, BrokerIDs: ints(target)}}})
	if err != nil || resp.Error != nil || len(resp.PartitionResults) != 1 || resp.PartitionResults[0].Error != nil {
		t.Fatalf("kafka-go AlterPartitionReassignments: %v %+v", err, resp)
	}
	list := func() []kafka.ListPartitionReassignmentsResponsePartition {
		resp, err := cl.ListPartitionReassignments(ctx, &kafka.ListPartitionReassignmentsRequest{
			Topics: map[string]kafka.ListPartitionReassignmentsRequestTopic{topic: {PartitionIndexes: []int{0}}}})
		if err != nil || resp.Error != nil {
			t.Fatalf("kafka-go ListPartitionReassignments: %v %+v", err, resp)
		}
		return resp.Topics[topic].Partitions
	}
	if got := list(); len(got) != 1 || !slices.Equal(got[0].AddingReplicas, []int{int(spare)}) || !slices.Equal(got[0].RemovingReplicas, ints(before.Replicas[:1])) {
		t.Fatalf("kafka-go lists %+v, want adding [%d] removing %v", got, spare, before.Replicas[:1])
	}
	c.Await(t, 60*time.Second, "the kafka-go move completes", func() (bool, string) {
		got := list()
		return len(got) == 0, fmt.Sprintf("%+v", got)
	})
	resp, err = cl.AlterPartitionReassignments(ctx, &kafka.AlterPartitionReassignmentsRequest{Topic: topic,
		Assignments: []kafka.AlterPartitionReassignmentsRequestAssignment{{PartitionID: 0, BrokerIDs: []int{1, 99}}}})
	if err != nil || len(resp.PartitionResults) != 1 || !errors.Is(resp.PartitionResults[0].Error, kafka.InvalidReplicaAssignment) {
		t.Fatalf("kafka-go unregistered broker: %v %+v", err, resp)
	}
	awaitGone(t, c, before.Replicas[0], topic)
	checkValues(t, c.Addrs(), topic, "g", n, size)
}

// TestReassignSingleNode: on one node there is nowhere to move to; an
// unregistered broker is refused and the no-op target changes nothing.
func TestReassignSingleNode(t *testing.T) {
	b := startBroker(t, t.TempDir())
	adm := newAdmin(t, b.Addr)
	const topic = "reassign-one"
	createTopic(t, adm, topic, 1, nil)
	if err := alterErr(t, adm, topic, 0, []int32{2}); !errors.Is(err, kerr.InvalidReplicaAssignment) {
		t.Fatalf("move to an unregistered broker: %v", err)
	}
	if err := alterErr(t, adm, topic, 0, []int32{1}); err != nil {
		t.Fatalf("the current assignment as target: %v", err)
	}
	if got := listMoves(t, adm, topic); len(got) != 0 {
		t.Fatalf("listed: %+v", got)
	}

	// Every advertised version, over raw TCP, decoded exactly at its
	// version: v1's AllowReplicationFactorChange=false refuses a change of
	// size before anything else.
	c := dialRaw(t, b.Addr)
	for _, tc := range []struct {
		v       int16
		allowRF bool
		want    int16
	}{
		{0, true, kerr.InvalidReplicaAssignment.Code},
		{1, true, kerr.InvalidReplicaAssignment.Code},
		{1, false, kerr.InvalidReplicationFactor.Code},
	} {
		req := kmsg.NewPtrAlterPartitionAssignmentsRequest()
		req.Version, req.AllowReplicationFactorChange = tc.v, tc.allowRF
		rt := kmsg.NewAlterPartitionAssignmentsRequestTopic()
		rt.Topic = topic
		rp := kmsg.NewAlterPartitionAssignmentsRequestTopicPartition()
		rp.Partition, rp.Replicas = 0, []int32{1, 2}
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp := c.roundTripStrict(t, req).(*kmsg.AlterPartitionAssignmentsResponse)
		if resp.ErrorCode != 0 || len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 ||
			resp.Topics[0].Partitions[0].ErrorCode != tc.want || resp.Topics[0].Partitions[0].ErrorMessage == nil {
			t.Errorf("AlterPartitionReassignments v%d (allow rf change %t): %+v, want code %d with a message", tc.v, tc.allowRF, resp, tc.want)
		}
	}
	lreq := kmsg.NewPtrListPartitionReassignmentsRequest()
	if resp := c.roundTripStrict(t, lreq).(*kmsg.ListPartitionReassignmentsResponse); resp.ErrorCode != 0 || len(resp.Topics) != 0 {
		t.Errorf("ListPartitionReassignments v0: %+v", resp)
	}
}
