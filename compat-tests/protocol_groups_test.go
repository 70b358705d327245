package compattests

// The group APIs at Kafka 4.2's versions and beyond (issue 25): OffsetCommit
// and OffsetFetch v10 (topic ids, KIP-848/KIP-516) with a real franz-go
// group consumer, DescribeGroups v6 and DeleteGroups v3 (KIP-1043),
// ListGroups v5 (group types, KIP-848), TxnOffsetCommit v6 (topic ids,
// KIP-1319) inside a franz-go transaction.

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"
)

// versionSpy records the version of every request a franz-go client
// writes, by API key: its Dialer wraps each connection and reads the
// request header off each frame the client writes (kgo's hooks do not
// tell the version).
type versionSpy struct {
	mu   sync.Mutex
	seen map[int16]map[int16]int // key -> version -> requests
}

func newVersionSpy() *versionSpy { return &versionSpy{seen: map[int16]map[int16]int{}} }

func (s *versionSpy) dial(ctx context.Context, network, host string) (net.Conn, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, network, host)
	if err != nil {
		return nil, err
	}
	return &spyConn{Conn: c, s: s}, nil
}

// versions returns the versions the client sent key at, and how often.
func (s *versionSpy) versions(key int16) map[int16]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[int16]int{}
	for v, n := range s.seen[key] {
		out[v] = n
	}
	return out
}

func (s *versionSpy) reset() {
	s.mu.Lock()
	defer s.mu.Unlock()
	clear(s.seen)
}

// spyConn is one spied connection. kgo writes a connection from one
// goroutine at a time; pending is the start of a frame not yet written
// whole.
type spyConn struct {
	net.Conn
	s       *versionSpy
	pending []byte
}

func (c *spyConn) Write(p []byte) (int, error) {
	c.pending = append(c.pending, p...)
	for len(c.pending) >= 8 {
		size := int(binary.BigEndian.Uint32(c.pending))
		if len(c.pending) < 4+size {
			break
		}
		key, version := int16(binary.BigEndian.Uint16(c.pending[4:])), int16(binary.BigEndian.Uint16(c.pending[6:]))
		c.s.mu.Lock()
		if c.s.seen[key] == nil {
			c.s.seen[key] = map[int16]int{}
		}
		c.s.seen[key][version]++
		c.s.mu.Unlock()
		c.pending = c.pending[4+size:]
	}
	if len(c.pending) == 0 {
		c.pending = nil
	}
	return c.Conn.Write(p)
}

// onlyVersion fails unless the spy saw key sent, and only at version.
func onlyVersion(t *testing.T, s *versionSpy, what string, key, version int16) {
	t.Helper()
	got := s.versions(key)
	if len(got) != 1 || got[version] == 0 {
		t.Errorf("%s: the client sent key %d at versions %v, want only v%d", what, key, got, version)
	}
}

// groupCommitResume runs a franz-go group consumer over topic (which holds
// before records), commits what it read and closes; then, after more
// records, a new consumer of the group resumes exactly where the first
// committed. Both must speak OffsetCommit and OffsetFetch v10 (topic ids).
func groupCommitResume(t *testing.T, seeds []string, adm *kadm.Client, group, topic string, before int) {
	t.Helper()
	prod := newClient(t, seeds[0], kgo.SeedBrokers(seeds...))
	produceAcked(t, prod, topic, "before", before)
	end := endOffsets(t, adm, topic)

	spy := newVersionSpy()
	consumer := func(name string) *kgo.Client {
		return newClient(t, seeds[0], kgo.SeedBrokers(seeds...),
			kgo.ClientID(name),
			kgo.Dialer(spy.dial),
			kgo.ConsumerGroup(group),
			kgo.ConsumeTopics(topic),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
			kgo.DisableAutoCommit(),
			kgo.SessionTimeout(groupSessionTimeout),
			kgo.HeartbeatInterval(groupHeartbeat),
			kgo.FetchMaxWait(200*time.Millisecond),
		)
	}
	// poll reads until want records arrived, failing on a fetch error or
	// after 60s.
	poll := func(cl *kgo.Client, want int) []*kgo.Record {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		var got []*kgo.Record
		for len(got) < want {
			fs := cl.PollFetches(ctx)
			if ctx.Err() != nil {
				t.Fatalf("got %d of %d records", len(got), want)
			}
			fs.EachError(func(tp string, p int32, err error) { t.Fatalf("fetch %s[%d]: %v", tp, p, err) })
			got = append(got, fs.Records()...)
		}
		return got
	}

	first := consumer("pg-first")
	recs := poll(first, before)
	if len(recs) != before {
		t.Fatalf("the first consumer read %d records, want %d", len(recs), before)
	}
	if err := first.CommitUncommittedOffsets(testCtx(t, 30*time.Second)); err != nil {
		t.Fatalf("commit: %v", err)
	}
	first.Close() // leaves the group
	onlyVersion(t, spy, "the first consumer's OffsetFetch", 9, 10)
	onlyVersion(t, spy, "the first consumer's OffsetCommit", 8, 10)
	if got := committedOffsets(t, adm, group, topic); !sameOffsets(got, end) {
		t.Fatalf("committed %s, want the end offsets %s", fmtOffsets(got), fmtOffsets(end))
	}

	after := produceAcked(t, prod, topic, "after", 90)
	spy.reset()
	second := consumer("pg-second")
	recs = poll(second, len(after))
	firstAt := map[int32]int64{}
	for _, r := range recs {
		if want, ok := after[recKey{r.Partition, r.Offset}]; !ok || string(r.Value) != want {
			t.Errorf("the resumed consumer read %s[%d]@%d %q, not one of the records produced after the commit", r.Topic, r.Partition, r.Offset, r.Value)
		}
		if at, ok := firstAt[r.Partition]; !ok || r.Offset < at {
			firstAt[r.Partition] = r.Offset
		}
	}
	if len(recs) != len(after) {
		t.Errorf("the resumed consumer read %d records, want %d", len(recs), len(after))
	}
	for p, at := range firstAt {
		if at != end[p] {
			t.Errorf("partition %d resumed at %d, want the committed %d", p, at, end[p])
		}
	}
	if err := second.CommitUncommittedOffsets(testCtx(t, 30*time.Second)); err != nil {
		t.Fatalf("second commit: %v", err)
	}
	second.Close()
	onlyVersion(t, spy, "the resumed consumer's OffsetFetch", 9, 10)
	onlyVersion(t, spy, "the resumed consumer's OffsetCommit", 8, 10)
	if got, want := committedOffsets(t, adm, group, topic), endOffsets(t, adm, topic); !sameOffsets(got, want) {
		t.Errorf("after resuming: committed %s, want the end offsets %s", fmtOffsets(got), fmtOffsets(want))
	}
}

func topicIDOf(t *testing.T, adm *kadm.Client, topic string) [16]byte {
	t.Helper()
	td, err := adm.ListTopics(testCtx(t, 15*time.Second), topic)
	if err != nil || td[topic].Err != nil {
		t.Fatalf("ListTopics(%s): %v %v", topic, err, td[topic].Err)
	}
	return td[topic].ID
}

func randomTopicID(t *testing.T) [16]byte {
	var id [16]byte
	if _, err := rand.Read(id[:]); err != nil {
		t.Fatal(err)
	}
	return id
}

// TestProtocolGroupsOffsetsV10: a franz-go group consumer commits and
// resumes over OffsetCommit/OffsetFetch v10; raw v10 requests naming an
// unknown topic id get UNKNOWN_TOPIC_ID; ListGroups v5 filters by type,
// DescribeGroups v6 and DeleteGroups v3 answer as Kafka 4.x does.
func TestProtocolGroupsOffsetsV10(t *testing.T) {
	const topic, group = "pg-topic", "pg-group"
	b := startBroker(t, t.TempDir(), groupBrokerOverrides...)
	adm := newAdmin(t, b.Addr)
	createTopic(t, adm, topic, 3, nil)
	groupCommitResume(t, []string{b.Addr}, adm, group, topic, 300)
	if t.Failed() {
		t.FailNow()
	}
	end := endOffsets(t, adm, topic)
	id := topicIDOf(t, adm, topic)
	unknown := randomTopicID(t)

	c := dialRaw(t, b.Addr)
	t.Run("OffsetFetchV10", func(t *testing.T) {
		req := kmsg.NewPtrOffsetFetchRequest()
		req.Version = 10
		g := kmsg.NewOffsetFetchRequestGroup()
		g.Group = group
		known := kmsg.NewOffsetFetchRequestGroupTopic()
		known.TopicID, known.Partitions = id, []int32{0, 1, 2}
		bogus := kmsg.NewOffsetFetchRequestGroupTopic()
		bogus.TopicID, bogus.Partitions = unknown, []int32{0, 1}
		g.Topics = []kmsg.OffsetFetchRequestGroupTopic{known, bogus}
		req.Groups = []kmsg.OffsetFetchRequestGroup{g}
		resp := c.roundTripStrict(t, req).(*kmsg.OffsetFetchResponse)
		if len(resp.Groups) != 1 || resp.Groups[0].ErrorCode != 0 || len(resp.Groups[0].Topics) != 2 {
			t.Fatalf("OffsetFetch v10: %+v", resp.Groups)
		}
		for _, rt := range resp.Groups[0].Topics {
			for _, rp := range rt.Partitions {
				switch rt.TopicID {
				case id:
					if rp.ErrorCode != 0 || rp.Offset != end[rp.Partition] {
						t.Errorf("OffsetFetch v10 of %s[%d] by id: offset %d error %d, want %d", topic, rp.Partition, rp.Offset, rp.ErrorCode, end[rp.Partition])
					}
				case unknown:
					if rp.ErrorCode != kerr.UnknownTopicID.Code || rp.Offset != -1 {
						t.Errorf("OffsetFetch v10 of an unknown topic id, partition %d: offset %d error %d, want -1 and UNKNOWN_TOPIC_ID", rp.Partition, rp.Offset, rp.ErrorCode)
					}
				default:
					t.Errorf("OffsetFetch v10 answers topic id %x, not asked for", rt.TopicID)
				}
			}
		}
	})

	t.Run("OffsetCommitV10", func(t *testing.T) {
		req := kmsg.NewPtrOffsetCommitRequest()
		req.Version, req.Group, req.Generation = 10, group, -1
		known := kmsg.NewOffsetCommitRequestTopic()
		known.TopicID = id
		bogus := kmsg.NewOffsetCommitRequestTopic()
		bogus.TopicID = unknown
		for p := int32(0); p < 2; p++ {
			rp := kmsg.NewOffsetCommitRequestTopicPartition()
			rp.Partition, rp.Offset = p, end[p]-1
			known.Partitions = append(known.Partitions, rp)
			bogus.Partitions = append(bogus.Partitions, rp)
		}
		req.Topics = []kmsg.OffsetCommitRequestTopic{known, bogus}
		resp := c.roundTripStrict(t, req).(*kmsg.OffsetCommitResponse)
		n := 0
		for _, rt := range resp.Topics {
			for _, rp := range rt.Partitions {
				n++
				switch {
				case rt.TopicID == id && rp.ErrorCode != 0:
					t.Errorf("OffsetCommit v10 of %s[%d] by id: %v", topic, rp.Partition, kerr.ErrorForCode(rp.ErrorCode))
				case rt.TopicID == unknown && rp.ErrorCode != kerr.UnknownTopicID.Code:
					t.Errorf("OffsetCommit v10 of an unknown topic id, partition %d: error %d, want UNKNOWN_TOPIC_ID", rp.Partition, rp.ErrorCode)
				case rt.TopicID != id && rt.TopicID != unknown:
					t.Errorf("OffsetCommit v10 answers topic id %x, not asked for", rt.TopicID)
				}
			}
		}
		if n != 4 {
			t.Errorf("OffsetCommit v10 answered %d partitions, want 4: %+v", n, resp.Topics)
		}
		// The simple commit by id moved the group's offsets, read back by
		// name (kadm's OffsetFetch).
		want := map[int32]int64{0: end[0] - 1, 1: end[1] - 1, 2: end[2]}
		if got := committedOffsets(t, adm, group, topic); !sameOffsets(got, want) {
			t.Errorf("after a commit by id: %s, want %s", fmtOffsets(got), fmtOffsets(want))
		}
		// A commit with a generation to a group that does not exist is
		// GROUP_ID_NOT_FOUND from v9 (Kafka's OffsetMetadataManager).
		req.Group, req.Generation, req.MemberID, req.Topics = "pg-nobody", 1, "m", req.Topics[:1]
		resp = c.roundTripStrict(t, req).(*kmsg.OffsetCommitResponse)
		if len(resp.Topics) != 1 || resp.Topics[0].Partitions[0].ErrorCode != kerr.GroupIDNotFound.Code {
			t.Errorf("OffsetCommit v10 with a generation to an unknown group: %+v, want GROUP_ID_NOT_FOUND", resp.Topics)
		}
	})

	t.Run("ListGroupsV5", func(t *testing.T) {
		list := func(types ...string) map[string]kmsg.ListGroupsResponseGroup {
			req := kmsg.NewPtrListGroupsRequest()
			req.Version, req.TypesFilter = 5, types
			resp := c.roundTripStrict(t, req).(*kmsg.ListGroupsResponse)
			if resp.ErrorCode != 0 {
				t.Fatalf("ListGroups v5 %q: %v", types, kerr.ErrorForCode(resp.ErrorCode))
			}
			out := map[string]kmsg.ListGroupsResponseGroup{}
			for _, g := range resp.Groups {
				out[g.Group] = g
			}
			return out
		}
		if got := list("consumer"); len(got) != 0 {
			t.Errorf("ListGroups v5 of consumer groups (KIP-848): %+v, want none", got)
		}
		for _, types := range [][]string{{"classic"}, {"Classic", "share"}, nil} {
			g, ok := list(types...)[group]
			if !ok || g.GroupType != "classic" || g.ProtocolType != "consumer" || g.GroupState != "Empty" {
				t.Errorf("ListGroups v5 %q: %s is %+v (listed %v), want an Empty classic consumer group", types, group, g, ok)
			}
		}
	})

	t.Run("DescribeGroupsV6", func(t *testing.T) {
		req := kmsg.NewPtrDescribeGroupsRequest()
		req.Version, req.Groups = 6, []string{group, "pg-nobody"}
		resp := c.roundTripStrict(t, req).(*kmsg.DescribeGroupsResponse)
		if len(resp.Groups) != 2 {
			t.Fatalf("DescribeGroups v6: %+v", resp.Groups)
		}
		if g := resp.Groups[0]; g.ErrorCode != 0 || g.ErrorMessage != nil || g.State != "Empty" || g.ProtocolType != "consumer" {
			t.Errorf("DescribeGroups v6 of %s: %+v", group, g)
		}
		if g := resp.Groups[1]; g.ErrorCode != kerr.GroupIDNotFound.Code || g.ErrorMessage == nil || *g.ErrorMessage != "Group pg-nobody not found." {
			t.Errorf("DescribeGroups v6 of an unknown group: %+v, want GROUP_ID_NOT_FOUND and Kafka's message", g)
		}
		// kadm negotiates v6 and reports the unknown group's error.
		dg, err := adm.DescribeGroups(testCtx(t, 15*time.Second), group, "pg-nobody")
		if err != nil {
			t.Fatalf("kadm DescribeGroups: %v", err)
		}
		if g := dg[group]; g.Err != nil || g.State != "Empty" {
			t.Errorf("kadm DescribeGroups(%s): state %q err %v", group, g.State, g.Err)
		}
		if g := dg["pg-nobody"]; !strings.Contains(fmt.Sprint(g.Err), "GROUP_ID_NOT_FOUND") {
			t.Errorf("kadm DescribeGroups of an unknown group: err %v, want GROUP_ID_NOT_FOUND", g.Err)
		}
	})

	t.Run("DeleteGroupsV3", func(t *testing.T) {
		req := kmsg.NewPtrDeleteGroupsRequest()
		req.Version, req.Groups = 3, []string{group, "pg-nobody"}
		resp := c.roundTripStrict(t, req).(*kmsg.DeleteGroupsResponse)
		if len(resp.Groups) != 2 {
			t.Fatalf("DeleteGroups v3: %+v", resp.Groups)
		}
		for _, g := range resp.Groups {
			switch g.Group {
			case group:
				if g.ErrorCode != 0 || g.ErrorMessage != nil {
					t.Errorf("DeleteGroups v3 of %s: %+v", group, g)
				}
			default:
				if g.ErrorCode != kerr.GroupIDNotFound.Code || g.ErrorMessage == nil || *g.ErrorMessage != "Group pg-nobody not found." {
					t.Errorf("DeleteGroups v3 of an unknown group: %+v, want GROUP_ID_NOT_FOUND and Kafka's message", g)
				}
			}
		}
		if got := committedOffsets(t, adm, group, topic); len(got) != 0 {
			t.Errorf("the deleted group still has offsets %s", fmtOffsets(got))
		}
		// kadm negotiates v3: the group is gone.
		res, err := adm.DeleteGroups(testCtx(t, 15*time.Second), group)
		if err != nil {
			t.Fatalf("kadm DeleteGroups: %v", err)
		}
		if r := res[group]; !strings.Contains(fmt.Sprint(r.Err), "GROUP_ID_NOT_FOUND") {
			t.Errorf("kadm DeleteGroups of the deleted group: %v, want GROUP_ID_NOT_FOUND", r.Err)
		}
	})

	t.Run("TxnOffsetCommitV6", func(t *testing.T) {
		txnOffsetCommitByID(t, b.Addr, adm, topic, id)
	})
}

// txnOffsetCommitByID commits offsets for topic (whose id is id) by topic
// id, with a raw TxnOffsetCommit v6 inside a franz-go transaction (franz-go
// itself sends v4 to a broker without transaction.version 2, and names
// topics only), and checks they become the group's offsets when the
// transaction commits.
func txnOffsetCommitByID(t *testing.T, addr string, adm *kadm.Client, topic string, id [16]byte) {
	const group, out = "pg-txn-group", "pg-txn-out"
	createTopic(t, adm, out, 1, nil)
	// kgo caps TxnOffsetCommit at Kafka 4.2's v5; allow v6.
	maxV := kversion.Stable()
	maxV.SetMaxKeyVersion(28, 6)
	spy := newVersionSpy()
	tx := newClient(t, addr, kgo.TransactionalID("pg-txn"), kgo.MaxVersions(maxV), kgo.Dialer(spy.dial), kgo.DefaultProduceTopic(out))
	ctx := testCtx(t, 60*time.Second)
	if err := tx.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := tx.ProduceSync(ctx, &kgo.Record{Value: []byte("in the transaction")}).FirstErr(); err != nil {
		t.Fatalf("transactional produce: %v", err)
	}
	pid, epoch, err := tx.ProducerID(ctx)
	if err != nil {
		t.Fatal(err)
	}
	add := kmsg.NewPtrAddOffsetsToTxnRequest()
	add.TransactionalID, add.ProducerID, add.ProducerEpoch, add.Group = "pg-txn", pid, epoch, group
	if resp, err := add.RequestWith(ctx, tx); err != nil || resp.ErrorCode != 0 {
		t.Fatalf("AddOffsetsToTxn: %v %+v", err, resp)
	}
	unknown := randomTopicID(t)
	req := kmsg.NewPtrTxnOffsetCommitRequest()
	req.TransactionalID, req.Group, req.ProducerID, req.ProducerEpoch, req.Generation = "pg-txn", group, pid, epoch, -1
	for _, tid := range [][16]byte{id, unknown} {
		rt := kmsg.NewTxnOffsetCommitRequestTopic()
		rt.TopicID = tid
		for p := int32(0); p < 3; p++ {
			rp := kmsg.NewTxnOffsetCommitRequestTopicPartition()
			rp.Partition, rp.Offset = p, int64(10+p)
			rt.Partitions = append(rt.Partitions, rp)
		}
		req.Topics = append(req.Topics, rt)
	}
	resp, err := req.RequestWith(ctx, tx)
	if err != nil {
		t.Fatalf("TxnOffsetCommit: %v", err)
	}
	if resp.Version != 6 {
		t.Fatalf("TxnOffsetCommit went at v%d, want v6", resp.Version)
	}
	n := 0
	for _, rt := range resp.Topics {
		for _, rp := range rt.Partitions {
			n++
			switch {
			case rt.TopicID == id && rp.ErrorCode != 0:
				t.Errorf("TxnOffsetCommit v6 of %s[%d] by id: %v", topic, rp.Partition, kerr.ErrorForCode(rp.ErrorCode))
			case rt.TopicID == unknown && rp.ErrorCode != kerr.UnknownTopicID.Code:
				t.Errorf("TxnOffsetCommit v6 of an unknown topic id: error %d, want UNKNOWN_TOPIC_ID", rp.ErrorCode)
			case rt.TopicID != id && rt.TopicID != unknown:
				t.Errorf("TxnOffsetCommit v6 answers topic id %x, not asked for", rt.TopicID)
			}
		}
	}
	if n != 6 {
		t.Errorf("TxnOffsetCommit v6 answered %d partitions, want 6", n)
	}
	onlyVersion(t, spy, "the raw TxnOffsetCommit", 28, 6)
	if err := tx.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatalf("EndTransaction: %v", err)
	}
	want := map[int32]int64{0: 10, 1: 11, 2: 12}
	waitUntil(t, 15*time.Second, "the transaction's offsets are the group's", func() (bool, string) {
		got := committedOffsets(t, adm, group, topic)
		return sameOffsets(got, want), fmtOffsets(got)
	})
}

// TestProtocolGroupsOffsetsV10Cluster: the group consumer's commit and
// resume over OffsetCommit/OffsetFetch v10 on three nodes, the topic and
// the offsets topic at replication factor 3.
func TestProtocolGroupsOffsetsV10Cluster(t *testing.T) {
	const topic, group = "pg-rf3", "pg-rf3-group"
	c := startCluster(t, 3, append([]string{"offsets.topic.replication.factor=3"}, groupBrokerOverrides...)...)
	seeds := c.Addrs()
	adm := kadm.NewClient(newClient(t, seeds[0], kgo.SeedBrokers(seeds...)))
	resp, err := adm.CreateTopic(testCtx(t, 30*time.Second), 3, 3, nil, topic)
	if err != nil {
		t.Fatalf("create %s: %v (%s)", topic, err, resp.ErrMessage)
	}
	groupCommitResume(t, seeds, adm, group, topic, 300)

	// The offsets topic really is at replication factor 3.
	td, err := adm.ListTopics(testCtx(t, 15*time.Second), "__consumer_offsets")
	if err != nil || td["__consumer_offsets"].Err != nil {
		t.Fatalf("ListTopics(__consumer_offsets): %v %v", err, td["__consumer_offsets"].Err)
	}
	for p, pd := range td["__consumer_offsets"].Partitions {
		if len(pd.Replicas) != 3 {
			t.Fatalf("__consumer_offsets[%d] has replicas %v, want 3", p, pd.Replicas)
		}
	}
}
