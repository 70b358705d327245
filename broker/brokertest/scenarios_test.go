package brokertest

// T0 of the reliability plan: deterministic replication scenarios from
// Kafka's history (KIP-101, KIP-279, Jepsen 2013, KIP-966, KIP-320), each
// driven step by step with the fault hooks and checked at the end against
// the exact log every replica must hold: the committed history, in order,
// with every acknowledged record and without the diverged suffixes.
//
// Writes go as raw Produce requests (one batch each, to one chosen node,
// with the acks the step needs), so which node appends what is part of the
// script rather than up to a client's metadata and retries.
//
// A failed scenario prints the brokers' log lines about its topic, fencing
// and the controller; FJORD_SCENARIO_LOGS=1 prints them always, =all
// prints every line.

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/fjordlog/fjord/broker"
	"github.com/fjordlog/fjord/broker/config"
)

// logBuf collects the brokers' logs, each line stamped with the time.
type logBuf struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf.WriteString(time.Now().Format("15:04:05.000 "))
	return l.buf.Write(p)
}

// count returns how many lines contain sub.
func (l *logBuf) count(sub string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Count(l.buf.String(), sub)
}

func (l *logBuf) lines(topic string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, line := range strings.Split(l.buf.String(), "\n") {
		if os.Getenv("FJORD_SCENARIO_LOGS") == "all" || strings.Contains(line, `"topic":"`+topic+`"`) ||
			strings.Contains(line, "fenc") || strings.Contains(line, "controller") {
			out = append(out, line)
		}
	}
	return out
}

// scenarioCluster starts three combined nodes with the given
// replica.lag.time.max.ms and min.insync.replicas (and any more settings)
// and creates topic: one partition, replication factor 3, full ISR on every
// node.
func scenarioCluster(t *testing.T, topic string, lagMs int64, minISR int32, more ...func(*config.Config)) *Cluster {
	t.Helper()
	c, _ := scenarioClusterLogs(t, topic, lagMs, minISR, more...)
	return c
}

// scenarioClusterLogs is scenarioCluster that also returns the nodes' logs.
func scenarioClusterLogs(t *testing.T, topic string, lagMs int64, minISR int32, more ...func(*config.Config)) (*Cluster, *logBuf) {
	t.Helper()
	logs := &logBuf{}
	t.Cleanup(func() { // runs after the cluster's Close, registered below
		if t.Failed() || os.Getenv("FJORD_SCENARIO_LOGS") != "" {
			for _, line := range logs.lines(topic) {
				t.Log(line)
			}
		}
	})
	var c *Cluster
	var err error
	for try := 0; ; try++ {
		c, err = Start(Options{Nodes: 3, Dir: t.TempDir(), Logger: zerolog.New(logs).Level(zerolog.InfoLevel),
			Configure: func(_ int32, cfg *config.Config) {
				cfg.ReplicaLagTimeMaxMs = lagMs
				cfg.MinInsyncReplicas = minISR
				for _, f := range more {
					f(cfg)
				}
			}})
		// Start picks free ports by binding and closing them, so another
		// listener may take one before its node binds it: try again.
		if err == nil || try == 2 || !strings.Contains(err.Error(), "address already in use") {
			break
		}
		t.Logf("starting the cluster: %v; again", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		start := time.Now()
		c.Close()
		t.Logf("cluster closed in %v", time.Since(start))
	})
	if code := createTopic(t, c.Addr(1), topic, 1, 3); code != 0 {
		t.Fatalf("create %s: %v", topic, kerr.ErrorForCode(code))
	}
	for id := int32(1); id <= 3; id++ {
		eventually(t, 10*time.Second, fmt.Sprintf("node %d sees %s with a leader and the full ISR", id, topic), func() bool {
			ps := isrOf(t, c, c.Addr(id), topic)
			return len(ps) == 1 && ps[0].Leader > 0 && len(ps[0].ISR) == 3
		})
	}
	p := partitionVia(t, c, 1, topic)
	eventually(t, 10*time.Second, "the leader applies its leadership", func() bool {
		rs, err := c.Broker(p.Leader).Replica(topic, 0)
		return err == nil && rs.Leader && rs.LeaderEpoch == p.LeaderEpoch
	})
	return c, logs
}

// partitionVia is partition 0 of topic as node via's Metadata shows it.
func partitionVia(t *testing.T, c *Cluster, via int32, topic string) kmsg.MetadataResponseTopicPartition {
	t.Helper()
	ps := isrOf(t, c, c.Addr(via), topic)
	if len(ps) != 1 {
		t.Fatalf("node %d does not show %s-0", via, topic)
	}
	return ps[0]
}

// waitPartition waits until node via's Metadata shows partition 0 of topic
// satisfying cond, and returns it.
func waitPartition(t *testing.T, c *Cluster, via int32, topic string, d time.Duration, what string,
	cond func(kmsg.MetadataResponseTopicPartition) bool) kmsg.MetadataResponseTopicPartition {
	t.Helper()
	var p kmsg.MetadataResponseTopicPartition
	eventually(t, d, what, func() bool {
		ps := isrOf(t, c, c.Addr(via), topic)
		if len(ps) != 1 {
			return false
		}
		p = ps[0]
		return cond(p)
	})
	return p
}

// waitLeads waits until node id has applied its leadership of topic-0 at
// epoch (the image reached it; it takes writes).
func waitLeads(t *testing.T, c *Cluster, id int32, topic string, epoch int32) {
	t.Helper()
	eventually(t, 10*time.Second, fmt.Sprintf("node %d leads %s-0 at epoch %d", id, topic, epoch), func() bool {
		b := c.Broker(id)
		if b == nil {
			return false
		}
		rs, err := b.Replica(topic, 0)
		return err == nil && rs.Leader && rs.LeaderEpoch == epoch
	})
}

// otherNodes returns the node ids of a three-node cluster other than ids.
func otherNodes(ids ...int32) []int32 {
	var out []int32
	for id := int32(1); id <= 3; id++ {
		if !slices.Contains(ids, id) {
			out = append(out, id)
		}
	}
	return out
}

// vals returns n distinct values prefix0..prefix<n-1>.
func vals(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s%d", prefix, i)
	}
	return out
}

func concat(parts ...[]string) []string {
	var out []string
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

// rawBatch builds one magic-2 record batch holding values: keyless,
// uncompressed, not idempotent.
func rawBatch(values ...string) []byte {
	now := time.Now().UnixMilli()
	var recs []byte
	for i, v := range values {
		var r []byte
		r = append(r, 0)                     // attributes
		r = binary.AppendVarint(r, 0)        // timestamp delta
		r = binary.AppendVarint(r, int64(i)) // offset delta
		r = binary.AppendVarint(r, -1)       // null key
		r = binary.AppendVarint(r, int64(len(v)))
		r = append(r, v...)
		r = binary.AppendVarint(r, 0) // no headers
		recs = binary.AppendVarint(recs, int64(len(r)))
		recs = append(recs, r...)
	}
	b := make([]byte, 61, 61+len(recs))
	b = append(b, recs...)
	binary.BigEndian.PutUint32(b[8:], uint32(len(b)-12)) // batch length
	b[16] = 2                                            // magic
	binary.BigEndian.PutUint32(b[23:], uint32(len(values)-1))
	binary.BigEndian.PutUint64(b[27:], uint64(now))
	binary.BigEndian.PutUint64(b[35:], uint64(now))
	binary.BigEndian.PutUint64(b[43:], ^uint64(0)) // producer id -1
	binary.BigEndian.PutUint16(b[51:], ^uint16(0)) // producer epoch -1
	binary.BigEndian.PutUint32(b[53:], ^uint32(0)) // base sequence -1
	binary.BigEndian.PutUint32(b[57:], uint32(len(values)))
	binary.BigEndian.PutUint32(b[17:], crc32.Checksum(b[21:], crc32.MakeTable(crc32.Castagnoli)))
	return b
}

// produceTo produces values as one batch to node id's topic-0 with acks and the
// request timeout given, and returns the partition's error code (-1 when
// the request itself failed: no answer at all).
func produceTo(t *testing.T, c *Cluster, id int32, topic string, acks int16, timeoutMs int32, values ...string) int16 {
	t.Helper()
	req := kmsg.NewPtrProduceRequest()
	req.Acks, req.TimeoutMillis = acks, timeoutMs
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition, rp.Records = 0, rawBatch(values...)
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	// A client rewrites a raw Produce's acks to its own RequiredAcks:
	// configure it with the acks wanted.
	// The request names its topic, so it must not go out as Produce v13,
	// which names topics by id (KIP-516): cap the client at v12.
	versions := kversion.Stable()
	versions.SetMaxKeyVersion(int16(kmsg.Produce), 12)
	opts := []kgo.Opt{kgo.SeedBrokers(c.Addr(id)), kgo.RequestRetries(0), kgo.MaxVersions(versions)}
	switch acks {
	case 1:
		opts = append(opts, kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite())
	case -1:
		opts = append(opts, kgo.RequiredAcks(kgo.AllISRAcks()))
	default:
		t.Fatalf("produceTo: acks=%d not supported", acks)
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(timeoutMs)*time.Millisecond+5*time.Second)
	defer cancel()
	resp, err := cl.SeedBrokers()[0].Request(ctx, req)
	if err != nil {
		t.Logf("produce to node %d: %v", id, err)
		return -1
	}
	r := resp.(*kmsg.ProduceResponse)
	if len(r.Topics) != 1 || len(r.Topics[0].Partitions) != 1 {
		t.Fatalf("produce to node %d: malformed response %+v", id, r)
	}
	return r.Topics[0].Partitions[0].ErrorCode
}

// mustSend is produceTo that must be acknowledged.
func mustSend(t *testing.T, c *Cluster, id int32, topic string, acks int16, values ...string) {
	t.Helper()
	if code := produceTo(t, c, id, topic, acks, 8000, values...); code != 0 {
		t.Fatalf("produce %v with acks=%d to node %d: %v", values, acks, id, kerr.ErrorForCode(code))
	}
}

// replicaLog is node id's replica of topic-0: its state and its values.
func replicaLog(c *Cluster, id int32, topic string) (broker.ReplicaState, []string, error) {
	b := c.Broker(id)
	if b == nil {
		return broker.ReplicaState{}, nil, fmt.Errorf("node %d is stopped", id)
	}
	rs, err := b.Replica(topic, 0)
	if err != nil {
		return rs, nil, err
	}
	out := make([]string, len(rs.Values))
	for i, v := range rs.Values {
		if v == nil {
			out[i] = "<nil>"
		} else {
			out[i] = string(v)
		}
	}
	return rs, out, nil
}

// describeLogs shows every running replica of topic-0.
func describeLogs(c *Cluster, topic string) string {
	var sb strings.Builder
	for id := int32(1); id <= 3; id++ {
		rs, vs, err := replicaLog(c, id, topic)
		if err != nil {
			fmt.Fprintf(&sb, "\n  node %d: %v", id, err)
			continue
		}
		fmt.Fprintf(&sb, "\n  node %d: leader=%v epoch=%d isr=%v start=%d end=%d hw=%d values=%v",
			id, rs.Leader, rs.LeaderEpoch, rs.ISR, rs.LogStart, rs.LogEnd, rs.HighWater, vs)
	}
	return sb.String()
}

// checkLog asserts node id's log of topic-0 is exactly want, now.
func checkLog(t *testing.T, c *Cluster, id int32, topic string, want []string) {
	t.Helper()
	_, got, err := replicaLog(c, id, topic)
	if err != nil || !slices.Equal(got, want) {
		t.Fatalf("node %d log: want %v; replicas:%s", id, want, describeLogs(c, topic))
	}
}

// waitLogs waits until every node's replica of topic-0 holds exactly want,
// all of it committed (high watermark at the log end), and the ISR as the
// metadata shows it has all three replicas.
func waitLogs(t *testing.T, c *Cluster, topic string, want []string, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		ok := true
		for id := int32(1); id <= 3 && ok; id++ {
			rs, got, err := replicaLog(c, id, topic)
			ok = err == nil && slices.Equal(got, want) && rs.LogStart == 0 && rs.HighWater == rs.LogEnd
		}
		if ok {
			p := partitionVia(t, c, 1, topic)
			ok = len(p.ISR) == 3
		}
		if ok {
			return
		}
		if time.Now().After(deadline) {
			p := partitionVia(t, c, 1, topic)
			t.Fatalf("after %v: want every replica = %v, committed, ISR of 3; metadata %s; replicas:%s",
				d, want, describe([]kmsg.MetadataResponseTopicPartition{p}), describeLogs(c, topic))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// stopNode stops node id, noting a slow shutdown.
func stopNode(t *testing.T, c *Cluster, id int32) {
	t.Helper()
	start := time.Now()
	if err := c.Stop(id); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > time.Second {
		t.Logf("stopping node %d took %v", id, d)
	}
}

// restartNode restarts node id on its data and ports. A port it had may have
// been taken meanwhile (Start picks free ports by binding and closing
// them; an outgoing connection can land on one): try again shortly.
func restartNode(t *testing.T, c *Cluster, id int32) {
	t.Helper()
	for try := 0; ; try++ {
		err := c.Restart(id)
		if err == nil {
			return
		}
		if try == 4 || !strings.Contains(err.Error(), "address already in use") {
			t.Fatal(err)
		}
		t.Logf("restarting node %d: %v; again", id, err)
		time.Sleep(500 * time.Millisecond)
	}
}

// stepper logs each step of a scenario with the time since the previous.
func stepper(t *testing.T) func(format string, args ...any) {
	last := time.Now()
	return func(format string, args ...any) {
		t.Helper()
		now := time.Now()
		t.Logf("[+%5.2fs] %s", now.Sub(last).Seconds(), fmt.Sprintf(format, args...))
		last = now
	}
}

// consistently asserts cond holds throughout d.
func consistently(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if !cond() {
			t.Fatalf("%s: no longer holds", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// KIP-101: a leader appends records its followers never get (acks=1, its
// replication cut), then fails; a follower takes over at a higher epoch
// and commits other records at the same offsets. When the old leader
// returns it must truncate its uncommitted suffix at the divergence point
// (OffsetForLeaderEpoch), not keep it, and copy the new leader's.
func TestScenarioKIP101Divergence(t *testing.T) {
	const topic = "kip101"
	step := stepper(t)
	c := scenarioCluster(t, topic, 10000, 1)
	step("cluster up, %s created", topic)
	p := partitionVia(t, c, 1, topic)
	l, e0 := p.Leader, p.LeaderEpoch
	a, b, cc := vals("a", 5), vals("b", 3), vals("c", 4)

	mustSend(t, c, l, topic, -1, a...)
	for id := int32(1); id <= 3; id++ {
		checkLog(t, c, id, topic, a) // acks=all: on every replica
	}

	c.CutReplication(l)
	mustSend(t, c, l, topic, 1, b...) // only the leader has these
	checkLog(t, c, l, topic, concat(a, b))
	for _, f := range otherNodes(l) {
		checkLog(t, c, f, topic, a)
	}

	step("A on every replica; B on leader %d only", l)
	stopNode(t, c, l)
	fs := otherNodes(l)
	np := waitPartition(t, c, fs[0], topic, 15*time.Second, "a follower leads at a higher epoch",
		func(p kmsg.MetadataResponseTopicPartition) bool {
			return p.Leader > 0 && p.Leader != l && p.LeaderEpoch > e0 && !slices.Contains(p.ISR, l)
		})
	waitLeads(t, c, np.Leader, topic, np.LeaderEpoch)
	step("leader %d (epoch %d) stopped; node %d leads at epoch %d, ISR %v", l, e0, np.Leader, np.LeaderEpoch, np.ISR)
	mustSend(t, c, np.Leader, topic, -1, cc...)
	for _, f := range fs {
		checkLog(t, c, f, topic, concat(a, cc))
	}

	step("C committed by the new leader")
	c.Heal(l)
	restartNode(t, c, l)
	step("node %d restarted", l)
	waitLogs(t, c, topic, concat(a, cc), 15*time.Second)
	step("every replica holds A C, committed; ISR of 3")
}

// KIP-279: two fast leader changes, each leaving a different uncommitted
// suffix behind, so a returning replica's latest epoch is one the final
// leader never saw and the leader's answer for it (the end of an older
// epoch) lies beyond where the replica's own log of that older epoch
// ends: truncating at the leader's offset alone would keep part of the
// replica's suffix. Replicas r1 (first leader), r2, r3 in preference order:
//
//	r1: A B1 B2   (epoch e0; B1 reaches r3 only, B2 nobody)   then fails
//	r2: A C       (C at e1, reaching nobody)                   then fails
//	r3: A B1 D    (leads at e2; B1 committed with D)
//
// Every replica must end with A B1 D: r1 truncates B2, r2 truncates C
// across its two epochs (it asks for e1, the leader answers e0).
func TestScenarioKIP279DoubleFailover(t *testing.T) {
	const topic = "kip279"
	step := stepper(t)
	c := scenarioCluster(t, topic, 15000, 1)
	step("cluster up, %s created", topic)
	p := partitionVia(t, c, 1, topic)
	r1, r2, r3 := p.Replicas[0], p.Replicas[1], p.Replicas[2]
	if p.Leader != r1 {
		t.Fatalf("leader %d is not the preferred replica: %s", p.Leader, describe([]kmsg.MetadataResponseTopicPartition{p}))
	}
	e0 := p.LeaderEpoch
	a, b1, b2, cc, d := vals("a", 4), vals("b1-", 2), vals("b2-", 3), vals("c", 6), vals("d", 2)

	mustSend(t, c, r1, topic, -1, a...)

	// B1 reaches r3, not r2; then B2 reaches nobody.
	c.CutReplication(r2)
	mustSend(t, c, r1, topic, 1, b1...)
	eventually(t, 10*time.Second, "r3 copies B1", func() bool {
		_, got, err := replicaLog(c, r3, topic)
		return err == nil && slices.Equal(got, concat(a, b1))
	})
	c.CutReplication(r3)
	mustSend(t, c, r1, topic, 1, b2...)
	checkLog(t, c, r1, topic, concat(a, b1, b2))
	checkLog(t, c, r2, topic, a)
	checkLog(t, c, r3, topic, concat(a, b1))
	step("r1=%d: A B1 B2; r2=%d: A; r3=%d: A B1", r1, r2, r3)

	// r1 fails: r2, first in preference order among the rest of the
	// ISR, leads at e1 and appends C, which nobody can copy.
	stopNode(t, c, r1)
	p1 := waitPartition(t, c, r3, topic, 15*time.Second, "r2 leads after r1 stops", func(p kmsg.MetadataResponseTopicPartition) bool {
		return p.Leader == r2 && p.LeaderEpoch > e0 && slices.Equal(sorted(p.ISR), sorted([]int32{r2, r3}))
	})
	waitLeads(t, c, r2, topic, p1.LeaderEpoch)
	step("r1 stopped; r2 leads at epoch %d", p1.LeaderEpoch)
	mustSend(t, c, r2, topic, 1, cc...)
	checkLog(t, c, r2, topic, concat(a, cc))

	// r1 returns (its links to r2 and r3 are still cut: it stays out of
	// the ISR) so the quorum survives r2's failure; r3 then leads at e2.
	restartNode(t, c, r1)
	eventually(t, 10*time.Second, "r1 unfenced again", func() bool {
		_, brokers := layout(t, c.Addr(r3), topic)
		return slices.Contains(brokers, r1)
	})
	step("r1 restarted and unfenced, still cut off")
	stopNode(t, c, r2)
	p2 := waitPartition(t, c, r3, topic, 15*time.Second, "r3 leads after r2 stops", func(p kmsg.MetadataResponseTopicPartition) bool {
		return p.Leader == r3 && p.LeaderEpoch > p1.LeaderEpoch
	})
	if !slices.Equal(p2.ISR, []int32{r3}) {
		t.Fatalf("ISR %v when r3 took over, want [%d]", p2.ISR, r3)
	}
	waitLeads(t, c, r3, topic, p2.LeaderEpoch)
	step("r2 stopped; r3 leads at epoch %d (r1 led at %d, r2 at %d)", p2.LeaderEpoch, e0, p1.LeaderEpoch)
	mustSend(t, c, r3, topic, -1, d...)
	checkLog(t, c, r3, topic, concat(a, b1, d))

	c.Heal(r1)
	c.Heal(r2)
	c.Heal(r3)
	restartNode(t, c, r2)
	step("healed, r2 restarted")
	waitLogs(t, c, topic, concat(a, b1, d), 15*time.Second)
	step("every replica holds A B1 D, committed; ISR of 3")
}

func sorted(s []int32) []int32 {
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}

// Jepsen 2013: a leader cut off from everything (quorum and replicas)
// still believes it leads. With min.insync.replicas=2 its acks=all writes
// are never acknowledged; the others elect a leader that takes writes;
// once healed, the old leader drops what it appended alone. Then, with the
// ISR shrunk to the leader alone, acks=all is refused up front with
// NOT_ENOUGH_REPLICAS and nothing is appended.
func TestScenarioIsolatedLeader(t *testing.T) {
	const topic = "isolated"
	step := stepper(t)
	c := scenarioCluster(t, topic, 1500, 2)
	step("cluster up, %s created", topic)
	p := partitionVia(t, c, 1, topic)
	l, e0 := p.Leader, p.LeaderEpoch
	fs := otherNodes(l)
	a, b, b2, cc, d := vals("a", 5), vals("b", 2), vals("bb", 2), vals("c", 3), vals("d", 2)

	mustSend(t, c, l, topic, -1, a...)

	c.Cut(l)
	if code := produceTo(t, c, l, topic, -1, 2000, b...); code == 0 {
		t.Fatalf("isolated leader %d acknowledged an acks=all write; replicas:%s", l, describeLogs(c, topic))
	} else {
		t.Logf("isolated leader answered acks=all with %v", kerr.ErrorForCode(code))
	}
	_, onL, _ := replicaLog(c, l, topic)
	step("isolated leader %d did not acknowledge B; its log: %v", l, onL)

	np := waitPartition(t, c, fs[0], topic, 15*time.Second, "the majority elects a new leader", func(p kmsg.MetadataResponseTopicPartition) bool {
		return p.Leader > 0 && p.Leader != l && p.LeaderEpoch > e0 && !slices.Contains(p.ISR, l)
	})
	waitLeads(t, c, np.Leader, topic, np.LeaderEpoch)
	step("node %d leads at epoch %d, ISR %v", np.Leader, np.LeaderEpoch, np.ISR)
	mustSend(t, c, np.Leader, topic, -1, cc...)
	// The deposed leader, still cut off, still takes writes it cannot
	// commit.
	if code := produceTo(t, c, l, topic, -1, 1000, b2...); code == 0 {
		t.Fatalf("deposed leader %d acknowledged an acks=all write; replicas:%s", l, describeLogs(c, topic))
	}

	c.Heal(l)
	waitLogs(t, c, topic, concat(a, cc), 15*time.Second)
	step("healed: every replica holds A C, committed; ISR of 3")

	// ISR {leader}: both followers stop fetching until the leader drops
	// them; acks=all is then refused before anything is appended.
	n := np.Leader
	for _, f := range otherNodes(n) {
		c.CutReplication(f)
	}
	waitPartition(t, c, fs[0], topic, 10*time.Second, "the ISR shrinks to the leader", func(p kmsg.MetadataResponseTopicPartition) bool {
		return p.Leader == n && slices.Equal(p.ISR, []int32{n})
	})
	eventually(t, 5*time.Second, "the leader applies its ISR of one", func() bool {
		rs, _, err := replicaLog(c, n, topic)
		return err == nil && slices.Equal(rs.ISR, []int32{n})
	})
	step("ISR shrunk to [%d]", n)
	before, _, _ := replicaLog(c, n, topic)
	if code := produceTo(t, c, n, topic, -1, 2000, vals("x", 2)...); code != kerr.NotEnoughReplicas.Code {
		t.Fatalf("acks=all with ISR [%d] and min.insync.replicas=2: got %v, want NOT_ENOUGH_REPLICAS", n, kerr.ErrorForCode(code))
	}
	checkLog(t, c, n, topic, concat(a, cc))
	if after, _, _ := replicaLog(c, n, topic); after.LogEnd != before.LogEnd {
		t.Fatalf("log end moved from %d to %d on a refused write", before.LogEnd, after.LogEnd)
	}

	for _, f := range otherNodes(n) {
		c.Heal(f)
	}
	waitPartition(t, c, n, topic, 15*time.Second, "the followers rejoin the ISR", func(p kmsg.MetadataResponseTopicPartition) bool {
		return len(p.ISR) == 3
	})
	step("followers back in the ISR")
	mustSend(t, c, n, topic, -1, d...)
	waitLogs(t, c, topic, concat(a, cc, d), 15*time.Second)
	step("every replica holds A C D, committed")
}

// KIP-966's "last replica standing": the ISR shrinks to the leader, which
// keeps acknowledging (min.insync.replicas=1), then stops. The partition
// must go leaderless (never to an out-of-sync follower, which would lose
// the records only the leader has) until that replica returns and leads
// again; the followers then copy it.
func TestScenarioLastReplicaStanding(t *testing.T) {
	const topic = "laststanding"
	step := stepper(t)
	c := scenarioCluster(t, topic, 1500, 1)
	step("cluster up, %s created", topic)
	p := partitionVia(t, c, 1, topic)
	l := p.Leader
	fs := otherNodes(l)
	a, b, cc := vals("a", 4), vals("b", 3), vals("c", 2)

	mustSend(t, c, l, topic, -1, a...)
	for _, f := range fs {
		c.CutReplication(f)
	}
	ps := waitPartition(t, c, fs[0], topic, 10*time.Second, "the ISR shrinks to the leader", func(p kmsg.MetadataResponseTopicPartition) bool {
		return p.Leader == l && slices.Equal(p.ISR, []int32{l})
	})
	eventually(t, 5*time.Second, "the leader applies its ISR of one", func() bool {
		rs, _, err := replicaLog(c, l, topic)
		return err == nil && slices.Equal(rs.ISR, []int32{l})
	})
	step("ISR shrunk to [%d]", l)
	mustSend(t, c, l, topic, -1, b...) // committed on the leader alone
	for _, f := range fs {
		checkLog(t, c, f, topic, a)
	}

	stopNode(t, c, l)
	leaderless := func(p kmsg.MetadataResponseTopicPartition) bool {
		return p.Leader == -1 && p.ErrorCode == kerr.LeaderNotAvailable.Code && slices.Equal(p.ISR, []int32{l})
	}
	lp := waitPartition(t, c, fs[0], topic, 15*time.Second, "the partition goes leaderless", leaderless)
	step("last in-sync replica stopped: %s", describe([]kmsg.MetadataResponseTopicPartition{lp}))
	// The followers are live brokers; with their replication back they
	// still must not be elected.
	for _, f := range fs {
		c.Heal(f)
	}
	for _, f := range fs {
		consistently(t, time.Second, fmt.Sprintf("node %d shows no leader", f), func() bool {
			return leaderless(partitionVia(t, c, f, topic))
		})
	}

	step("still leaderless with the followers healed")
	restartNode(t, c, l)
	step("node %d restarted", l)
	rp := waitPartition(t, c, fs[0], topic, 15*time.Second, "the last in-sync replica leads again", func(p kmsg.MetadataResponseTopicPartition) bool {
		return p.Leader == l && p.LeaderEpoch > ps.LeaderEpoch
	})
	waitLeads(t, c, l, topic, rp.LeaderEpoch)
	step("node %d leads again at epoch %d", l, rp.LeaderEpoch)
	mustSend(t, c, l, topic, -1, cc...)
	waitLogs(t, c, topic, concat(a, b, cc), 15*time.Second)
	step("every replica holds A B C, committed; ISR of 3")
}

// KIP-320: after a leader change, requests carrying the old leader epoch
// are fenced by the new leader (FENCED_LEADER_EPOCH), ones from the future
// are UNKNOWN_LEADER_EPOCH, and the old leader, now a follower, refuses
// produces with NOT_LEADER_OR_FOLLOWER.
func TestScenarioZombieLeaderFenced(t *testing.T) {
	const topic = "zombie"
	step := stepper(t)
	c := scenarioCluster(t, topic, 10000, 1)
	step("cluster up, %s created", topic)
	p := partitionVia(t, c, 1, topic)
	l, e0 := p.Leader, p.LeaderEpoch
	a := vals("a", 3)
	mustSend(t, c, l, topic, -1, a...)

	c.Cut(l)
	fs := otherNodes(l)
	np := waitPartition(t, c, fs[0], topic, 15*time.Second, "a new leader", func(p kmsg.MetadataResponseTopicPartition) bool {
		return p.Leader > 0 && p.Leader != l && p.LeaderEpoch > e0
	})
	n, e1 := np.Leader, np.LeaderEpoch
	waitLeads(t, c, n, topic, e1)
	step("node %d (epoch %d) cut off; node %d leads at epoch %d", l, e0, n, e1)
	id := topicID(t, c, n, topic)

	for _, tc := range []struct {
		epoch int32
		want  int16
	}{
		{e0, kerr.FencedLeaderEpoch.Code},
		{e1 + 1, kerr.UnknownLeaderEpoch.Code},
		{e1, 0},
	} {
		if got := fetchCode(t, c, n, topic, id, tc.epoch, -1); got != tc.want {
			t.Errorf("Fetch with current leader epoch %d to the leader (epoch %d): %v, want %v", tc.epoch, e1, kerr.ErrorForCode(got), kerr.ErrorForCode(tc.want))
		}
		// The old leader fetching as a replica with a stale epoch (a
		// zombie fetcher, KAFKA-6880) is refused before it counts.
		if got := fetchCode(t, c, n, topic, id, tc.epoch, l); tc.want != 0 && got != tc.want {
			t.Errorf("replica Fetch from %d with current leader epoch %d: %v, want %v", l, tc.epoch, kerr.ErrorForCode(got), kerr.ErrorForCode(tc.want))
		}
		// A new leader answers ListOffsets OFFSET_NOT_AVAILABLE (as
		// Kafka) until its high watermark reaches its epoch's start, which
		// takes the other follower's first fetch at the new epoch.
		got := listOffsetsCode(t, c, n, topic, tc.epoch)
		for deadline := time.Now().Add(10 * time.Second); got == kerr.OffsetNotAvailable.Code && time.Now().Before(deadline); {
			time.Sleep(50 * time.Millisecond)
			got = listOffsetsCode(t, c, n, topic, tc.epoch)
		}
		if got != tc.want {
			t.Errorf("ListOffsets with current leader epoch %d: %v, want %v", tc.epoch, kerr.ErrorForCode(got), kerr.ErrorForCode(tc.want))
		}
		if got := offsetForEpochCode(t, c, n, topic, tc.epoch); got != tc.want {
			t.Errorf("OffsetForLeaderEpoch with current leader epoch %d: %v, want %v", tc.epoch, kerr.ErrorForCode(got), kerr.ErrorForCode(tc.want))
		}
	}
	step("requests with stale and future epochs checked")

	c.Heal(l)
	eventually(t, 15*time.Second, "the old leader follows at the new epoch", func() bool {
		rs, _, err := replicaLog(c, l, topic)
		return err == nil && !rs.Leader && rs.LeaderEpoch == e1
	})
	step("healed: node %d follows at epoch %d", l, e1)
	for _, acks := range []int16{-1, 1} {
		if got := produceTo(t, c, l, topic, acks, 2000, "zombie"); got != kerr.NotLeaderForPartition.Code {
			t.Errorf("produce acks=%d to the old leader: %v, want NOT_LEADER_OR_FOLLOWER", acks, kerr.ErrorForCode(got))
		}
	}
	waitLogs(t, c, topic, a, 15*time.Second)
	step("produces refused; every replica holds A")
}

// topicID is topic's id as node via's Metadata shows it.
func topicID(t *testing.T, c *Cluster, via int32, topic string) [16]byte {
	t.Helper()
	req := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(topic)
	req.Topics = append(req.Topics, rt)
	resp, err := request(t, c.Addr(via), req)
	if err != nil {
		t.Fatal(err)
	}
	m := resp.(*kmsg.MetadataResponse)
	if len(m.Topics) != 1 || m.Topics[0].ErrorCode != 0 {
		t.Fatalf("metadata for %s: %+v", topic, m.Topics)
	}
	return m.Topics[0].TopicID
}

// fetchCode sends a Fetch of topic-0 from offset 0 carrying
// currentEpoch to node id, as a consumer (replica -1) or as replica
// replica, and returns the partition's error code.
func fetchCode(t *testing.T, c *Cluster, id int32, topic string, tid [16]byte, currentEpoch, replica int32) int16 {
	t.Helper()
	req := kmsg.NewPtrFetchRequest()
	req.ReplicaID, req.ReplicaState.ID = replica, replica
	req.ReplicaState.Epoch = -1
	if replica >= 0 {
		req.ReplicaState.Epoch = 0
	}
	req.MaxWaitMillis, req.MinBytes, req.MaxBytes = 0, 1, 1<<20
	req.SessionID, req.SessionEpoch = 0, -1
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic, rt.TopicID = topic, tid
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes = 0, 0, 1<<20
	rp.CurrentLeaderEpoch, rp.LastFetchedEpoch, rp.LogStartOffset = currentEpoch, -1, -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := request(t, c.Addr(id), req)
	if err != nil {
		t.Fatalf("fetch from node %d: %v", id, err)
	}
	r := resp.(*kmsg.FetchResponse)
	if r.ErrorCode != 0 {
		return r.ErrorCode
	}
	if len(r.Topics) != 1 || len(r.Topics[0].Partitions) != 1 {
		t.Fatalf("fetch from node %d: malformed response", id)
	}
	return r.Topics[0].Partitions[0].ErrorCode
}

// listOffsetsCode asks node id for topic-0's latest offset carrying
// currentEpoch.
func listOffsetsCode(t *testing.T, c *Cluster, id int32, topic string, currentEpoch int32) int16 {
	t.Helper()
	req := kmsg.NewPtrListOffsetsRequest()
	req.ReplicaID = -1
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewListOffsetsRequestTopicPartition()
	rp.Partition, rp.CurrentLeaderEpoch, rp.Timestamp = 0, currentEpoch, -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := request(t, c.Addr(id), req)
	if err != nil {
		t.Fatalf("list offsets from node %d: %v", id, err)
	}
	r := resp.(*kmsg.ListOffsetsResponse)
	if len(r.Topics) != 1 || len(r.Topics[0].Partitions) != 1 {
		t.Fatalf("list offsets from node %d: malformed response", id)
	}
	return r.Topics[0].Partitions[0].ErrorCode
}

// offsetForEpochCode asks node id where topic-0's epoch currentEpoch ends,
// carrying currentEpoch as the current leader epoch too.
func offsetForEpochCode(t *testing.T, c *Cluster, id int32, topic string, currentEpoch int32) int16 {
	t.Helper()
	req := kmsg.NewPtrOffsetForLeaderEpochRequest()
	req.ReplicaID = -1
	rt := kmsg.NewOffsetForLeaderEpochRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewOffsetForLeaderEpochRequestTopicPartition()
	rp.Partition, rp.CurrentLeaderEpoch, rp.LeaderEpoch = 0, currentEpoch, currentEpoch
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := request(t, c.Addr(id), req)
	if err != nil {
		t.Fatalf("offset for leader epoch from node %d: %v", id, err)
	}
	r := resp.(*kmsg.OffsetForLeaderEpochResponse)
	if len(r.Topics) != 1 || len(r.Topics[0].Partitions) != 1 {
		t.Fatalf("offset for leader epoch from node %d: malformed response", id)
	}
	return r.Topics[0].Partitions[0].ErrorCode
}
