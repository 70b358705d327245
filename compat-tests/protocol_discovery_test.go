package compattests

// The discovery APIs at their current versions (issue 25): Metadata v13,
// auto-creation answered as Kafka answers it (LEADER_NOT_AVAILABLE, no
// partitions, then the partitions on the next request), ApiVersions v5
// (KIP-1242's cluster and node check), FindCoordinator v6 (share keys),
// and FindCoordinator naming a coordinator only once it has loaded the
// group.

import (
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/IBM/sarama"
	kafka "github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// metadataV reads one topic at version v, auto-creating it if asked.
func metadataV(t *testing.T, c *rawConn, v int16, topic string, autoCreate bool) kmsg.MetadataResponseTopic {
	t.Helper()
	req := kmsg.NewPtrMetadataRequest()
	req.Version, req.AllowAutoTopicCreation = v, autoCreate
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(topic)
	req.Topics = append(req.Topics, rt)
	resp := c.roundTripStrict(t, req).(*kmsg.MetadataResponse)
	if len(resp.Topics) != 1 {
		t.Fatalf("Metadata v%d for %s: %d topics", v, topic, len(resp.Topics))
	}
	return resp.Topics[0]
}

// TestDiscoveryMetadataAutoCreate: Metadata v13 decodes exactly and
// answers 0 at the top; a request that auto-creates a topic is answered
// LEADER_NOT_AVAILABLE with no partitions and no topic id, and the next
// one lists the partitions; the internal topics are auto-created with
// their own settings; and franz-go, sarama, kcat and kafka-go all produce
// to (or read) topics created that way.
func TestDiscoveryMetadataAutoCreate(t *testing.T) {
	b := startBroker(t, t.TempDir(), "num.partitions=3", "auto.create.topics.enable=true", "transaction.state.log.num.partitions=4")
	c := dialRaw(t, b.Addr)

	t.Run("v13", func(t *testing.T) {
		createTopic(t, newAdmin(t, b.Addr), "md-known", 2, nil)
		req := kmsg.NewPtrMetadataRequest()
		req.Version = 13
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr("md-known")
		req.Topics = append(req.Topics, rt)
		resp := c.roundTripStrict(t, req).(*kmsg.MetadataResponse)
		if resp.ErrorCode != 0 || len(resp.Topics) != 1 || resp.Topics[0].ErrorCode != 0 || len(resp.Topics[0].Partitions) != 2 {
			t.Fatalf("Metadata v13: error %d, topics %+v", resp.ErrorCode, resp.Topics)
		}
	})

	for _, v := range []int16{1, 4, 12, 13} { // before v4 a request always auto-creates
		t.Run(fmt.Sprintf("auto-create v%d", v), func(t *testing.T) {
			topic := fmt.Sprintf("md-auto-v%d", v)
			first := metadataV(t, c, v, topic, true)
			if first.ErrorCode != kerr.LeaderNotAvailable.Code || len(first.Partitions) != 0 || first.TopicID != ([16]byte{}) || first.IsInternal {
				t.Fatalf("creating request: %+v, want LEADER_NOT_AVAILABLE, no partitions, no id", first)
			}
			next := metadataV(t, c, v, topic, v < 4)
			if next.ErrorCode != 0 || len(next.Partitions) != 3 || (v >= 10 && next.TopicID == ([16]byte{})) {
				t.Fatalf("next request: %+v, want the 3 partitions", next)
			}
		})
	}

	// An internal topic created through Metadata gets its own settings.
	// (__consumer_offsets and __transaction_state are both created on
	// first need.)
	t.Run("internal topic", func(t *testing.T) {
		const internal = "__transaction_state"
		first := metadataV(t, c, 12, internal, true)
		if first.ErrorCode != kerr.LeaderNotAvailable.Code || len(first.Partitions) != 0 || !first.IsInternal {
			t.Fatalf("creating request: %+v", first)
		}
		next := metadataV(t, c, 12, internal, false)
		if next.ErrorCode != 0 || len(next.Partitions) != 4 || !next.IsInternal {
			t.Fatalf("next request: %d partitions (want transaction.state.log.num.partitions=4), %+v", len(next.Partitions), next)
		}
		rcs, err := newAdmin(t, b.Addr).DescribeTopicConfigs(testCtx(t, 10*time.Second), internal)
		if err != nil {
			t.Fatal(err)
		}
		rc, err := rcs.On(internal, nil)
		if err != nil {
			t.Fatal(err)
		}
		policy := ""
		for _, cfg := range rc.Configs {
			if cfg.Key == "cleanup.policy" && cfg.Value != nil {
				policy = *cfg.Value
			}
		}
		if policy != "compact" {
			t.Errorf("auto-created %s has cleanup.policy %q, want compact", internal, policy)
		}
	})

	t.Run("franz-go", func(t *testing.T) {
		cl := newClient(t, b.Addr, kgo.AllowAutoTopicCreation())
		if err := cl.ProduceSync(testCtx(t, 20*time.Second), &kgo.Record{Topic: "md-auto-kgo", Value: []byte("v")}).FirstErr(); err != nil {
			t.Fatalf("produce to a new topic: %v", err)
		}
	})

	t.Run("sarama", func(t *testing.T) {
		cfg := sarama.NewConfig()
		cfg.Producer.RequiredAcks = sarama.WaitForAll
		cfg.Producer.Return.Successes = true
		cfg.Metadata.Retry.Backoff = 50 * time.Millisecond
		prod, err := sarama.NewSyncProducer([]string{b.Addr}, cfg)
		if err != nil {
			t.Fatal(err)
		}
		defer prod.Close()
		if _, _, err := prod.SendMessage(&sarama.ProducerMessage{Topic: "md-auto-sarama", Value: sarama.StringEncoder("v")}); err != nil {
			t.Fatalf("produce to a new topic: %v", err)
		}
	})

	t.Run("kcat", func(t *testing.T) {
		kcat := kcatPath(t)
		runKcat(t, kcat, "k1:hello\n", "-b", b.Addr, "-P", "-t", "md-auto-kcat", "-K:")
		out := runKcat(t, kcat, "", "-b", b.Addr, "-C", "-t", "md-auto-kcat", "-o", "beginning", "-e", "-f", "%k=%s\n")
		if strings.TrimSpace(out) != "k1=hello" {
			t.Fatalf("consumed %q, want k1=hello", out)
		}
	})

	// kafka-go's TestConn/test_delete_topics: after DeleteTopics, its
	// ReadPartitions (Metadata with auto-creation) of the deleted names
	// must list no partitions. The names are auto-created again by that
	// very request, as on Kafka; Kafka answers them without partitions.
	t.Run("kafka-go delete then read", func(t *testing.T) {
		createTopic(t, newAdmin(t, b.Addr), "md-kgo-conn", 1, nil)
		ctx := testCtx(t, 20*time.Second)
		conn, err := kafka.DialLeader(ctx, "tcp", b.Addr, "md-kgo-conn", 0)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		t1, t2 := "md-kgo-del-1", "md-kgo-del-2"
		if err := conn.CreateTopics(kafka.TopicConfig{Topic: t1, NumPartitions: 1, ReplicationFactor: 1},
			kafka.TopicConfig{Topic: t2, NumPartitions: 1, ReplicationFactor: 1}); err != nil {
			t.Fatalf("CreateTopics: %v", err)
		}
		conn.SetDeadline(time.Now().Add(10 * time.Second))
		if err := conn.DeleteTopics(t1, t2); err != nil {
			t.Fatalf("DeleteTopics: %v", err)
		}
		parts, err := conn.ReadPartitions(t1, t2)
		if err != nil {
			t.Fatalf("ReadPartitions: %v", err)
		}
		if len(parts) != 0 {
			t.Fatalf("ReadPartitions of deleted topics listed %d partitions, want none", len(parts))
		}
	})
}

// apiVersionsV5 asks c's node with KIP-1242's ids.
func apiVersionsV5(t *testing.T, c *rawConn, clusterID *string, nodeID int32) *kmsg.ApiVersionsResponse {
	t.Helper()
	req := kmsg.NewPtrApiVersionsRequest()
	req.Version = 5
	req.ClientSoftwareName, req.ClientSoftwareVersion = "fjord-compat", "1.0.0"
	req.ClusterID, req.NodeID = clusterID, nodeID
	return c.roundTripStrict(t, req).(*kmsg.ApiVersionsResponse)
}

// checkApiVersionsV5 checks KIP-1242's rule at addr, the node nodeID of
// cluster clusterID.
func checkApiVersionsV5(t *testing.T, addr, clusterID string, nodeID int32) {
	t.Helper()
	for _, tc := range []struct {
		name    string
		cluster *string
		node    int32
		want    int16
	}{
		{"bootstrapping (neither)", nil, -1, 0},
		{"right ids", kmsg.StringPtr(clusterID), nodeID, 0},
		{"wrong cluster", kmsg.StringPtr(clusterID + "-other"), nodeID, kerr.RebootstrapRequired.Code},
		{"wrong node", kmsg.StringPtr(clusterID), nodeID + 100, kerr.RebootstrapRequired.Code},
		{"node without cluster", nil, nodeID, kerr.InvalidRequest.Code},
		{"cluster without node", kmsg.StringPtr(clusterID), -1, kerr.InvalidRequest.Code},
	} {
		c := dialRaw(t, addr) // a refused check leaves the connection unusable for the client
		resp := apiVersionsV5(t, c, tc.cluster, tc.node)
		if resp.ErrorCode != tc.want {
			t.Errorf("%s: ApiVersions v5 at %s answered %d, want %d", tc.name, addr, resp.ErrorCode, tc.want)
		}
		if (tc.want == 0) != (len(resp.ApiKeys) > 0) {
			t.Errorf("%s: %d api keys with error %d", tc.name, len(resp.ApiKeys), resp.ErrorCode)
		}
	}
}

// TestDiscoveryApiVersionsV5: REBOOTSTRAP_REQUIRED for another cluster's
// or node's ids, INVALID_REQUEST for half a pair, the usual answer
// otherwise; v5 is advertised.
func TestDiscoveryApiVersionsV5(t *testing.T) {
	b := startBroker(t, t.TempDir())
	c := dialRaw(t, b.Addr)
	md := kmsg.NewPtrMetadataRequest()
	md.Version = 12
	mresp := c.roundTripStrict(t, md).(*kmsg.MetadataResponse)
	if mresp.ClusterID == nil || len(mresp.Brokers) != 1 {
		t.Fatalf("metadata: cluster %v, brokers %+v", mresp.ClusterID, mresp.Brokers)
	}
	av := apiVersionsV5(t, c, nil, -1)
	for _, k := range av.ApiKeys {
		want := map[int16]int16{3: 13, 10: 6, 18: 5}[k.ApiKey]
		if want != 0 && k.MaxVersion != want {
			t.Errorf("key %d advertised up to v%d, want v%d", k.ApiKey, k.MaxVersion, want)
		}
	}
	checkApiVersionsV5(t, b.Addr, *mresp.ClusterID, mresp.Brokers[0].NodeID)
}

// TestDiscoveryFindCoordinatorShare: FindCoordinator v6 with share keys
// (KIP-932, "groupId:topicId:partition"): a malformed key is
// INVALID_REQUEST with a message; a well-formed one is answered with the
// share coordinator (the leader of its __share_group_state partition,
// COORDINATOR_NOT_AVAILABLE while that topic is made); a group key in the
// same version is answered as ever.
func TestDiscoveryFindCoordinatorShare(t *testing.T) {
	b := startBroker(t, t.TempDir())
	c := dialRaw(t, b.Addr)
	keys := []string{"no-colons", "g:%%%:0", "", "a:b:c:d"}
	req := kmsg.NewPtrFindCoordinatorRequest()
	req.Version, req.CoordinatorType, req.CoordinatorKeys = 6, 2, keys
	resp := c.roundTripStrict(t, req).(*kmsg.FindCoordinatorResponse)
	if len(resp.Coordinators) != len(keys) {
		t.Fatalf("%d answers for %d keys: %+v", len(resp.Coordinators), len(keys), resp.Coordinators)
	}
	for i, co := range resp.Coordinators {
		if co.Key != keys[i] || co.ErrorCode != kerr.InvalidRequest.Code || co.NodeID != -1 || co.ErrorMessage == nil {
			t.Errorf("share key %q: %+v", keys[i], co)
		}
	}
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		sreq := kmsg.NewPtrFindCoordinatorRequest()
		sreq.Version, sreq.CoordinatorType, sreq.CoordinatorKeys = 6, 2, []string{"g:AAAAAAAAAAAAAAAAAAAAAA:0"}
		co := c.roundTripStrict(t, sreq).(*kmsg.FindCoordinatorResponse).Coordinators[0]
		if co.ErrorCode == 0 && co.NodeID == 1 {
			break
		}
		if co.ErrorCode != kerr.CoordinatorNotAvailable.Code || time.Now().After(deadline) {
			t.Fatalf("well-formed share key: %+v", co)
		}
	}
	// The connection still serves, and a group key at v6 is found.
	deadline := time.Now().Add(20 * time.Second)
	for {
		g := kmsg.NewPtrFindCoordinatorRequest()
		g.Version, g.CoordinatorKeys = 6, []string{"share-test-group"}
		co := c.roundTripStrict(t, g).(*kmsg.FindCoordinatorResponse).Coordinators[0]
		if co.ErrorCode == 0 {
			break
		}
		if co.ErrorCode != kerr.CoordinatorNotAvailable.Code || time.Now().After(deadline) {
			t.Fatalf("group key at v6: %+v", co)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// javaHash is Java's String.hashCode of an ASCII string, and
// offsetsPartition Kafka's placement of a group on the offsets topic.
func javaHash(s string) int32 {
	var h int32
	for i := 0; i < len(s); i++ {
		h = 31*h + int32(s[i])
	}
	return h
}

func offsetsPartition(group string, n int) int {
	h := javaHash(group)
	if h == -1<<31 {
		h = 0
	} else if h < 0 {
		h = -h
	}
	return int(h % int32(n))
}

// rawExchange sends req on a new connection to addr and decodes the
// answer; for goroutines, which may not call t.Fatal.
func rawExchange(addr string, req kmsg.Request) (kmsg.Response, error) {
	nc, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return nil, err
	}
	defer nc.Close()
	c := &rawConn{Conn: nc}
	if _, err := c.Write(c.frame(req)); err != nil {
		return nil, err
	}
	buf, err := c.readFrame(15 * time.Second)
	if err != nil {
		return nil, err
	}
	resp := req.ResponseKind()
	resp.SetVersion(req.GetVersion())
	if err := parseResponse(buf, c.corr, resp, req.IsFlexible() && req.Key() != 18); err != nil {
		return nil, err
	}
	return resp, nil
}

// joinAndSync makes group a one-member group at its coordinator addr:
// JoinGroup v3 (no MEMBER_ID_REQUIRED round) then SyncGroup v1, each sent
// once. It returns an error naming any non-zero answer.
func joinAndSync(addr, group string) error {
	j := kmsg.NewPtrJoinGroupRequest()
	j.Version = 3
	j.Group, j.SessionTimeoutMillis, j.RebalanceTimeoutMillis, j.ProtocolType = group, 10000, 10000, "consumer"
	p := kmsg.NewJoinGroupRequestProtocol()
	p.Name, p.Metadata = "range", []byte{0, 0, 0, 0, 0, 0, 0, 0, 0, 0}
	j.Protocols = append(j.Protocols, p)
	kr, err := rawExchange(addr, j)
	if err != nil {
		return fmt.Errorf("JoinGroup: %w", err)
	}
	jr := kr.(*kmsg.JoinGroupResponse)
	if jr.ErrorCode != 0 {
		return fmt.Errorf("JoinGroup at %s: %v", addr, kerr.ErrorForCode(jr.ErrorCode))
	}
	s := kmsg.NewPtrSyncGroupRequest()
	s.Version = 1
	s.Group, s.Generation, s.MemberID = group, jr.Generation, jr.MemberID
	a := kmsg.NewSyncGroupRequestGroupAssignment()
	a.MemberID, a.MemberAssignment = jr.MemberID, []byte{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}
	s.GroupAssignment = append(s.GroupAssignment, a)
	kr, err = rawExchange(addr, s)
	if err != nil {
		return fmt.Errorf("SyncGroup: %w", err)
	}
	if code := kr.(*kmsg.SyncGroupResponse).ErrorCode; code != 0 {
		return fmt.Errorf("SyncGroup at %s: %v", addr, kerr.ErrorForCode(code))
	}
	return nil
}

// signalNode sends sig to node b's process.
func signalNode(b *Broker, sig syscall.Signal) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.cmd == nil {
		return errors.New("not running")
	}
	return b.cmd.Process.Signal(sig)
}

// TestClusterDiscoveryFindCoordinatorLoaded: on three nodes, right after
// the offsets topic is first created, groups whose coordinator is another
// node are looked up through node 1, and each JoinGroup and SyncGroup
// sent once to the coordinator it names succeeds: node 1 names a
// coordinator only once that node has loaded the group's partition, and
// never tells the client NOT_COORDINATOR or COORDINATOR_LOAD_IN_PROGRESS
// (sarama retries neither).
//
// A broker creates the offsets topic on the first group lookup, as Kafka
// does, so the test's first lookup creates it. Empty partitions load in
// an instant, as fast as node 1 applies
// the new topic; to make the window wide and certain, one other node
// (not the active controller) is frozen (SIGSTOP, shorter than its
// session: it stays a live broker and leads its share of the new
// partitions) while the topic is created, and thawed a moment later:
// until it has applied the topic and loaded its partitions, a lookup of
// its groups must not name it.
//
// Also KIP-1242's ApiVersions check on a client and a CONTROLLER listener
// of a cluster node.
func TestClusterDiscoveryFindCoordinatorLoaded(t *testing.T) {
	const offsetsParts = 50 // the default
	c := startCluster(t, 3, "group.initial.rebalance.delay.ms=0")
	const via = 1
	a := dialRaw(t, c.Addr(via))

	if tm := metadataV(t, a, 12, "__consumer_offsets", false); tm.ErrorCode != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("the offsets topic exists before any group lookup: %+v", tm)
	}

	frozen := 2
	if ctl := c.Controller(); ctl == frozen {
		frozen = 3
	}
	if err := signalNode(c.Node(frozen), syscall.SIGSTOP); err != nil {
		t.Fatalf("freezing node %d: %v", frozen, err)
	}
	frozenAt := time.Now()
	var thawOnce sync.Once
	thaw := func() { thawOnce.Do(func() { _ = signalNode(c.Node(frozen), syscall.SIGCONT) }) }
	t.Cleanup(thaw)

	// The first lookup asks for the offsets topic and waits for it: it
	// names a coordinator that has loaded the group, never the frozen
	// node, or answers COORDINATOR_NOT_AVAILABLE.
	fc := kmsg.NewPtrFindCoordinatorRequest()
	fc.Version, fc.CoordinatorKeys = 4, []string{"first-lookup"}
	co := a.roundTripStrict(t, fc).(*kmsg.FindCoordinatorResponse).Coordinators[0]
	if (co.ErrorCode != 0 && co.ErrorCode != kerr.CoordinatorNotAvailable.Code) || (co.ErrorCode == 0 && co.NodeID == int32(frozen)) {
		t.Fatalf("first lookup, without an offsets topic: %+v, want a live coordinator or COORDINATOR_NOT_AVAILABLE", co)
	}
	t.Logf("first lookup: node %d, code %d, after %v", co.NodeID, co.ErrorCode, time.Since(frozenAt).Round(time.Millisecond))
	// As soon as node 1 lists the topic: one group per partition that
	// another node leads.
	var leaders []int32
	deadline := time.Now().Add(30 * time.Second)
	for {
		tm := metadataV(t, a, 12, "__consumer_offsets", false)
		if tm.ErrorCode == 0 && len(tm.Partitions) == offsetsParts && !slices.ContainsFunc(tm.Partitions,
			func(p kmsg.MetadataResponseTopicPartition) bool { return p.Leader < 0 }) {
			leaders = make([]int32, offsetsParts)
			for _, p := range tm.Partitions {
				leaders[p.Partition] = p.Leader
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("node %d never listed the offsets topic: %+v", via, tm)
		}
		time.Sleep(5 * time.Millisecond)
	}
	want := map[string]int32{} // group -> its partition's leader
	for p, l := range leaders {
		if l == via {
			continue
		}
		for i := 0; ; i++ {
			g := fmt.Sprintf("loaded-%d-%d", p, i)
			if offsetsPartition(g, offsetsParts) == p {
				want[g] = l
				break
			}
		}
	}
	if len(want) == 0 || !slices.Contains(leaders, int32(frozen)) {
		t.Fatalf("node %d leads every offsets partition, or frozen node %d none: %v", via, frozen, leaders)
	}
	// Thawed 2 s after it froze, well within its 3 s session (the first
	// lookup may have waited up to 1.5 s for an answer from it).
	time.AfterFunc(time.Until(frozenAt.Add(2*time.Second)), thaw)

	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		failures []string
	)
	pending := make([]string, 0, len(want))
	for g := range want {
		pending = append(pending, g)
	}
	waited := 0
	for len(pending) > 0 {
		fc := kmsg.NewPtrFindCoordinatorRequest()
		fc.Version, fc.CoordinatorKeys = 4, pending
		resp := a.roundTripStrict(t, fc).(*kmsg.FindCoordinatorResponse)
		pending = nil
		for _, co := range resp.Coordinators {
			switch {
			case co.ErrorCode == kerr.CoordinatorNotAvailable.Code:
				pending = append(pending, co.Key)
			case co.ErrorCode != 0:
				t.Fatalf("lookup of %s: %v (%v); a client must be told only COORDINATOR_NOT_AVAILABLE", co.Key, kerr.ErrorForCode(co.ErrorCode), co.ErrorMessage)
			case co.NodeID != want[co.Key]:
				t.Errorf("lookup of %s named node %d; node %d leads its partition", co.Key, co.NodeID, want[co.Key])
			default:
				addr := net.JoinHostPort(co.Host, strconv.Itoa(int(co.Port)))
				wg.Add(1)
				go func(group string) {
					defer wg.Done()
					if err := joinAndSync(addr, group); err != nil {
						mu.Lock()
						failures = append(failures, fmt.Sprintf("%s (coordinator %d): %v", group, co.NodeID, err))
						mu.Unlock()
					}
				}(co.Key)
			}
		}
		if len(pending) > 0 {
			waited++
			if time.Now().After(deadline) {
				t.Fatalf("no coordinator for %v", pending)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	wg.Wait()
	t.Logf("%d groups on coordinators other than node %d; lookups repeated %d times", len(want), via, waited)
	if len(failures) > 0 {
		t.Fatalf("a group at the coordinator FindCoordinator named was not served at once:\n%s", strings.Join(failures, "\n"))
	}

	md := kmsg.NewPtrMetadataRequest()
	md.Version = 12
	mresp := a.roundTripStrict(t, md).(*kmsg.MetadataResponse)
	checkApiVersionsV5(t, c.Addr(2), *mresp.ClusterID, 2)
	checkApiVersionsV5(t, c.CtlAddr(3), *mresp.ClusterID, 3)
}
