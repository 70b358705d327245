package compattests

// The catalogue a current client asks about: DescribeTopicPartitions
// (KIP-966), DescribeCluster's endpoint types (KIP-919), the feature flags
// in ApiVersions and UpdateFeatures (KIP-584), client telemetry (KIP-714),
// and DeleteTopics' promise that no node lists a deleted topic once it has
// answered.

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"
	kafka "github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"
)

// describeTopicPartitions sends one DescribeTopicPartitions request.
func describeTopicPartitions(t testing.TB, cl *kgo.Client, limit int32, cursor *kmsg.DescribeTopicPartitionsRequestCursor, topics ...string) *kmsg.DescribeTopicPartitionsResponse {
	t.Helper()
	req := kmsg.NewPtrDescribeTopicPartitionsRequest()
	req.ResponsePartitionLimit = limit
	req.Cursor = cursor
	for _, name := range topics {
		rt := kmsg.NewDescribeTopicPartitionsRequestTopic()
		rt.Topic = name
		req.Topics = append(req.Topics, rt)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatalf("DescribeTopicPartitions: %v", err)
	}
	return resp
}

// TestCatalogDescribeTopicPartitions pages through every topic two
// partitions at a time with the cursor Kafka defines, and checks a named
// request with an unknown topic, against sarama's DescribeTopics view.
func TestCatalogDescribeTopicPartitions(t *testing.T) {
	b := startBroker(t, t.TempDir())
	adm := newAdmin(t, b.Addr)
	createTopic(t, adm, "cat-b", 2, nil)
	createTopic(t, adm, "cat-a", 3, nil)
	cl := newClient(t, b.Addr)

	var got []string
	// Start at cat-a: names sort bytewise, so __consumer_offsets comes first.
	cursor := &kmsg.DescribeTopicPartitionsRequestCursor{Topic: "cat-a"}
	ids := map[string][16]byte{}
	for pages := 0; ; pages++ {
		if pages > 10 {
			t.Fatalf("cursor never ends; so far %v", got)
		}
		resp := describeTopicPartitions(t, cl, 2, cursor)
		n := 0
		for _, st := range resp.Topics {
			if st.ErrorCode != 0 || st.Topic == nil {
				t.Fatalf("listing all topics gave an error topic: %+v", st)
			}
			ids[*st.Topic] = st.TopicID
			for _, p := range st.Partitions {
				got = append(got, fmt.Sprintf("%s/%d", *st.Topic, p.Partition))
				if p.LeaderID != 1 || len(p.Replicas) != 1 || len(p.ISR) != 1 || len(p.EligibleLeaderReplicas) != 0 {
					t.Errorf("%s/%d: %+v", *st.Topic, p.Partition, p)
				}
				n++
			}
		}
		if n > 2 {
			t.Fatalf("a page of %d partitions with limit 2", n)
		}
		if resp.NextCursor == nil {
			break
		}
		cursor = &kmsg.DescribeTopicPartitionsRequestCursor{Topic: resp.NextCursor.Topic, Partition: resp.NextCursor.Partition}
	}
	if s := strings.Join(got, " "); s != "cat-a/0 cat-a/1 cat-a/2 cat-b/0 cat-b/1" {
		t.Errorf("paged partitions: %s", s)
	}

	resp := describeTopicPartitions(t, cl, 100, nil, "nope", "cat-b")
	if len(resp.Topics) != 2 || *resp.Topics[0].Topic != "cat-b" || *resp.Topics[1].Topic != "nope" ||
		resp.Topics[1].ErrorCode != kerr.UnknownTopicOrPartition.Code || resp.Topics[1].TopicID != [16]byte{} {
		t.Errorf("named request: %+v", resp.Topics)
	}
	bad := describeTopicPartitions(t, cl, 100, &kmsg.DescribeTopicPartitionsRequestCursor{Topic: "cat-c"}, "cat-a")
	if len(bad.Topics) != 1 || bad.Topics[0].ErrorCode != kerr.InvalidRequest.Code {
		t.Errorf("cursor outside the named topics: %+v", bad.Topics)
	}

	// sarama's DescribeTopics (Metadata) agrees on ids and partitions.
	cfg := sarama.NewConfig()
	cfg.Version = sarama.V3_6_0_0
	sadm, err := sarama.NewClusterAdmin([]string{b.Addr}, cfg)
	if err != nil {
		t.Fatalf("sarama admin: %v", err)
	}
	defer sadm.Close()
	tms, err := sadm.DescribeTopics([]string{"cat-a", "cat-b"})
	if err != nil {
		t.Fatalf("sarama DescribeTopics: %v", err)
	}
	for _, tm := range tms {
		if tm.Err != sarama.ErrNoError || [16]byte(tm.Uuid) != ids[tm.Name] || len(tm.Partitions) != map[string]int{"cat-a": 3, "cat-b": 2}[tm.Name] {
			t.Errorf("sarama %s: err %v id %x (DescribeTopicPartitions %x), %d partitions", tm.Name, tm.Err, tm.Uuid, ids[tm.Name], len(tm.Partitions))
		}
	}
}

// TestCatalogDescribeCluster: brokers for endpoint type 1 (kmsg v0-v2,
// and sarama), MISMATCHED_ENDPOINT_TYPE for controllers asked of a
// broker, UNSUPPORTED_ENDPOINT_TYPE for an unknown type, as Kafka's
// brokers answer (KIP-919); the voters when a CONTROLLER listener is asked
// for controllers.
func TestCatalogDescribeCluster(t *testing.T) {
	c := startCluster(t, 3)
	ctx := testCtx(t, 20*time.Second)
	// kgo sends the highest version both sides know: clients capped at
	// Kafka 2.8's and 3.7's versions send v0 and v1.
	versioned := []*kgo.Client{
		newClient(t, c.Addr(2), kgo.MaxVersions(kversion.V2_8_0())),
		newClient(t, c.Addr(2), kgo.MaxVersions(kversion.V3_7_0())),
		c.Client(2),
	}
	for _, tc := range []struct {
		version  int16
		endpoint int8
		code     int16
	}{
		{0, 1, 0}, {1, 1, 0}, {2, 1, 0},
		{1, 2, kerr.MismatchedEndpointType.Code}, {2, 2, kerr.MismatchedEndpointType.Code},
		{1, 3, kerr.UnsupportedEndpointType.Code},
	} {
		req := kmsg.NewPtrDescribeClusterRequest()
		req.EndpointType, req.IncludeFencedBrokers = tc.endpoint, tc.version >= 2
		resp, err := req.RequestWith(ctx, versioned[tc.version])
		if err != nil {
			t.Fatalf("v%d type %d: %v", tc.version, tc.endpoint, err)
		}
		if resp.Version != tc.version {
			t.Fatalf("DescribeCluster sent as v%d, want v%d", resp.Version, tc.version)
		}
		if resp.ErrorCode != tc.code {
			t.Errorf("v%d type %d: error %d, want %d (%v)", tc.version, tc.endpoint, resp.ErrorCode, tc.code, resp.ErrorMessage)
			continue
		}
		if tc.code != 0 {
			if resp.ErrorMessage == nil || len(resp.Brokers) != 0 {
				t.Errorf("v%d type %d: message %v, %d brokers", tc.version, tc.endpoint, resp.ErrorMessage, len(resp.Brokers))
			}
			continue
		}
		if len(resp.Brokers) != 3 || resp.ClusterID == "" || resp.ControllerID < 1 || (tc.version >= 1 && resp.EndpointType != 1) {
			t.Errorf("v%d: %d brokers, cluster %q, controller %d, endpoint type %d", tc.version, len(resp.Brokers), resp.ClusterID, resp.ControllerID, resp.EndpointType)
		}
		for _, br := range resp.Brokers {
			if br.IsFenced {
				t.Errorf("v%d: broker %d fenced", tc.version, br.NodeID)
			}
		}
	}

	// A controller's CONTROLLER listener describes the controllers
	// (bootstrap.controllers), and refuses the broker type.
	ctl := newClient(t, c.CtlAddr(3))
	for _, typ := range []int8{2, 1} {
		req := kmsg.NewPtrDescribeClusterRequest()
		req.EndpointType = typ
		resp, err := req.RequestWith(ctx, ctl)
		if err != nil {
			t.Fatalf("DescribeCluster type %d on a CONTROLLER listener: %v", typ, err)
		}
		switch {
		case typ == 1 && resp.ErrorCode != kerr.MismatchedEndpointType.Code:
			t.Errorf("controller asked for brokers: code %d", resp.ErrorCode)
		case typ == 2 && (resp.ErrorCode != 0 || len(resp.Brokers) != 3 || resp.ControllerID < 1 || resp.EndpointType != 2):
			t.Errorf("controllers: code %d, %d voters, active %d, type %d", resp.ErrorCode, len(resp.Brokers), resp.ControllerID, resp.EndpointType)
		}
		if typ == 2 {
			for _, v := range resp.Brokers {
				if want := c.CtlAddr(int(v.NodeID)); net.JoinHostPort(v.Host, fmt.Sprint(v.Port)) != want {
					t.Errorf("voter %d at %s:%d, want %s", v.NodeID, v.Host, v.Port, want)
				}
			}
		}
	}

	cfg := sarama.NewConfig()
	cfg.Version = sarama.V3_7_0_0 // DescribeCluster v1
	sadm, err := sarama.NewClusterAdmin([]string{c.Addr(1)}, cfg)
	if err != nil {
		t.Fatalf("sarama admin: %v", err)
	}
	defer sadm.Close()
	brokers, controller, err := sadm.DescribeCluster()
	if err != nil {
		t.Fatalf("sarama DescribeCluster: %v", err)
	}
	if len(brokers) != 3 || controller < 1 {
		t.Errorf("sarama DescribeCluster: %d brokers, controller %d", len(brokers), controller)
	}
}

// TestCatalogFeatures: ApiVersions v3+ finalizes metadata.version 21,
// transaction.version 1, group.version 1 (KIP-848) and share.version 1
// (KIP-932), with a positive epoch; v3
// leaves out supported ranges starting at 0 (KAFKA-17492). UpdateFeatures
// through kadm: the current level is a no-op success (validate-only or
// not), any other level INVALID_UPDATE_VERSION with a message.
func TestCatalogFeatures(t *testing.T) {
	b := startBroker(t, t.TempDir())
	cl := newClient(t, b.Addr)
	ctx := testCtx(t, 20*time.Second)
	for _, v := range []int16{3, 4} {
		// kgo picks the version itself; a client capped at Kafka 3.7's
		// versions sends ApiVersions v3.
		vcl := cl
		if v == 3 {
			vcl = newClient(t, b.Addr, kgo.MaxVersions(kversion.V3_7_0()))
		}
		resp, err := kmsg.NewPtrApiVersionsRequest().RequestWith(ctx, vcl)
		if err != nil {
			t.Fatalf("ApiVersions v%d: %v", v, err)
		}
		if resp.Version != v {
			t.Fatalf("ApiVersions sent as v%d, want v%d", resp.Version, v)
		}
		fin := map[string]int16{}
		for _, f := range resp.FinalizedFeatures {
			fin[f.Name] = f.MaxVersionLevel
			if f.MinVersionLevel != f.MaxVersionLevel {
				t.Errorf("v%d: %s finalized %d-%d", v, f.Name, f.MinVersionLevel, f.MaxVersionLevel)
			}
		}
		if fmt.Sprint(fin) != "map[group.version:1 metadata.version:21 share.version:1 transaction.version:1]" || resp.FinalizedFeaturesEpoch <= 0 {
			t.Errorf("v%d: finalized %v at epoch %d", v, fin, resp.FinalizedFeaturesEpoch)
		}
		sup := map[string]string{}
		for _, f := range resp.SupportedFeatures {
			sup[f.Name] = fmt.Sprintf("%d-%d", f.MinVersion, f.MaxVersion)
		}
		// A range starting at 0 only from v4 (KAFKA-17492).
		want := "map[metadata.version:21-21 transaction.version:1-1]"
		if v >= 4 {
			want = "map[group.version:0-1 kraft.version:0-0 metadata.version:21-21 share.version:0-1 transaction.version:1-1]"
		}
		if fmt.Sprint(sup) != want {
			t.Errorf("v%d: supported %v, want %s", v, sup, want)
		}
	}

	adm := newAdmin(t, b.Addr)
	// kadm has no DescribeFeatures; Java's is ApiVersions, which kadm
	// exposes: the same features, and the catalogue's keys advertised.
	vs, err := adm.ApiVersions(ctx)
	if err != nil {
		t.Fatalf("kadm ApiVersions: %v", err)
	}
	for _, v := range vs.Sorted() {
		if v.Err != nil {
			t.Fatalf("kadm ApiVersions of node %d: %v", v.NodeID, v.Err)
		}
		if fs := v.Raw().FinalizedFeatures; len(fs) != 4 {
			t.Errorf("kadm ApiVersions of node %d: finalized %+v", v.NodeID, fs)
		}
		for key, max := range map[int16]int16{57: 2, 60: 2, 71: 0, 72: 0, 75: 0} {
			if _, got, ok := v.KeyVersions(key); !ok || got != max {
				t.Errorf("node %d advertises %s up to v%d (%v), want v%d", v.NodeID, kmsg.NameForKey(key), got, ok, max)
			}
		}
	}
	for _, validateOnly := range []bool{true, false} {
		res, err := adm.UpdateFeatures(ctx, validateOnly,
			kadm.FeatureUpdate{Feature: "metadata.version", MaxVersionLevel: 21, UpgradeType: 1},
			kadm.FeatureUpdate{Feature: "group.version", MaxVersionLevel: 1, UpgradeType: 1})
		if err == nil {
			err = res.Error()
		}
		if err != nil {
			t.Errorf("no-op update (validate only %v): %v", validateOnly, err)
		}
	}
	for _, u := range []kadm.FeatureUpdate{
		{Feature: "metadata.version", MaxVersionLevel: 25, UpgradeType: 1},
		{Feature: "group.version", MaxVersionLevel: 0, UpgradeType: 2},
		{Feature: "transaction.version", MaxVersionLevel: 2, UpgradeType: 1},
		{Feature: "no.such.feature", MaxVersionLevel: 1, UpgradeType: 1},
	} {
		res, err := adm.UpdateFeatures(ctx, true, u)
		if err == nil {
			err = res.Error()
		}
		if !errors.Is(err, kerr.InvalidUpdateVersion) {
			t.Errorf("update %s to %d: %v, want INVALID_UPDATE_VERSION", u.Feature, u.MaxVersionLevel, err)
		}
	}
	// The message says why (kmsg directly: kadm keeps only the code).
	req := kmsg.NewPtrUpdateFeaturesRequest()
	fu := kmsg.NewUpdateFeaturesRequestFeatureUpdate()
	fu.Feature, fu.MaxVersionLevel, fu.UpgradeType = "metadata.version", 25, 1
	req.FeatureUpdates = append(req.FeatureUpdates, fu)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatalf("UpdateFeatures: %v", err)
	}
	if resp.ErrorCode != kerr.InvalidUpdateVersion.Code || resp.ErrorMessage == nil || !strings.Contains(*resp.ErrorMessage, "fixed at 21") {
		t.Errorf("UpdateFeatures v%d: code %d message %v", resp.Version, resp.ErrorCode, resp.ErrorMessage)
	}
}

// TestCatalogTelemetry: a new client instance gets an id and a
// subscription that asks for nothing; a push with that subscription is
// accepted, one with another subscription id is UNKNOWN_SUBSCRIPTION_ID.
func TestCatalogTelemetry(t *testing.T) {
	b := startBroker(t, t.TempDir())
	cl := newClient(t, b.Addr)
	ctx := testCtx(t, 20*time.Second)
	get := kmsg.NewPtrGetTelemetrySubscriptionsRequest()
	sub, err := get.RequestWith(ctx, cl)
	if err != nil {
		t.Fatalf("GetTelemetrySubscriptions: %v", err)
	}
	if sub.ErrorCode != 0 || sub.ClientInstanceID == [16]byte{} || len(sub.RequestedMetrics) != 0 || sub.PushIntervalMillis <= 0 {
		t.Fatalf("subscription: %+v", sub)
	}
	again := kmsg.NewPtrGetTelemetrySubscriptionsRequest()
	again.ClientInstanceID = sub.ClientInstanceID
	sub2, err := again.RequestWith(ctx, cl)
	if err != nil || sub2.ClientInstanceID != sub.ClientInstanceID || sub2.SubscriptionID != sub.SubscriptionID {
		t.Fatalf("asked again: %+v, %v", sub2, err)
	}
	for _, tc := range []struct {
		subID int32
		code  int16
	}{{sub.SubscriptionID, 0}, {sub.SubscriptionID + 1, kerr.UnknownSubscriptionID.Code}} {
		push := kmsg.NewPtrPushTelemetryRequest()
		push.ClientInstanceID, push.SubscriptionID, push.Terminating = sub.ClientInstanceID, tc.subID, true
		resp, err := push.RequestWith(ctx, cl)
		if err != nil || resp.ErrorCode != tc.code {
			t.Errorf("push with subscription %d: %+v, %v; want code %d", tc.subID, resp, err, tc.code)
		}
	}
}

// TestCatalogDeleteTopicsEveryNode: on three nodes, a topic deleted
// through one node (kadm, sarama and kafka-go in turn) is gone from every
// node's Metadata, by name and by id, and from DescribeTopicPartitions the
// moment DeleteTopics answers, and a consumer's fetch by topic id gets
// UNKNOWN_TOPIC_ID everywhere. Then, with auto-creation on, a Metadata
// request for the deleted name creates a new topic under a new id, as
// Kafka does, and it serves produce and consume.
func TestCatalogDeleteTopicsEveryNode(t *testing.T) {
	c := startCluster(t, 3, "auto.create.topics.enable=true", "num.partitions=3", "default.replication.factor=3")
	ctx := testCtx(t, 60*time.Second)
	const rounds = 6
	for round := range rounds {
		topic := fmt.Sprintf("doomed-%d", round)
		via := round%3 + 1
		if _, err := c.Admin(via).CreateTopic(ctx, 3, 3, nil, topic); err != nil {
			t.Fatalf("round %d: create: %v", round, err)
		}
		// Every node lists it first, so "gone" below is not "not yet there".
		var id [16]byte
		c.Await(t, 10*time.Second, topic+" listed by every node", func() (bool, string) {
			for _, n := range c.IDs() {
				tm := rawMetadata(t, c.Client(n), topic)
				if tm.ErrorCode != 0 || len(tm.Partitions) != 3 {
					return false, fmt.Sprintf("node %d: code %d, %d partitions", n, tm.ErrorCode, len(tm.Partitions))
				}
				id = tm.TopicID
			}
			return true, ""
		})

		start := time.Now()
		switch round % 3 {
		case 0:
			resp, err := c.Admin(via).DeleteTopics(ctx, topic)
			if err == nil {
				err = resp.Error()
			}
			if err != nil {
				t.Fatalf("round %d: kadm delete: %v", round, err)
			}
		case 1:
			cfg := sarama.NewConfig()
			cfg.Version = sarama.V2_8_0_0
			sadm, err := sarama.NewClusterAdmin([]string{c.Addr(via)}, cfg)
			if err != nil {
				t.Fatalf("sarama admin: %v", err)
			}
			err = sadm.DeleteTopic(topic)
			sadm.Close()
			if err != nil {
				t.Fatalf("round %d: sarama delete: %v", round, err)
			}
		case 2:
			kc := &kafka.Client{Addr: kafka.TCP(c.Addr(via)), Timeout: 10 * time.Second}
			resp, err := kc.DeleteTopics(ctx, &kafka.DeleteTopicsRequest{Topics: []string{topic}})
			if err == nil {
				err = resp.Errors[topic]
			}
			if err != nil {
				t.Fatalf("round %d: kafka-go delete: %v", round, err)
			}
		}
		t.Logf("round %d: DeleteTopics answered in %v", round, time.Since(start))
		for _, n := range c.IDs() {
			cl := c.Client(n)
			if tm := rawMetadata(t, cl, topic); tm.ErrorCode != kerr.UnknownTopicOrPartition.Code || len(tm.Partitions) != 0 {
				t.Errorf("round %d: node %d still lists %s right after DeleteTopics via node %d: code %d, %d partitions",
					round, n, topic, via, tm.ErrorCode, len(tm.Partitions))
			}
			if tm := rawMetadataByID(t, cl, id); tm.ErrorCode != kerr.UnknownTopicID.Code {
				t.Errorf("round %d: node %d: metadata by id: code %d", round, n, tm.ErrorCode)
			}
			if d := describeTopicPartitions(t, cl, 100, nil, topic); len(d.Topics) != 1 || d.Topics[0].ErrorCode != kerr.UnknownTopicOrPartition.Code {
				t.Errorf("round %d: node %d: DescribeTopicPartitions: %+v", round, n, d.Topics)
			}
			if code := fetchByID(t, cl, id); code != kerr.UnknownTopicID.Code && code != kerr.UnknownTopicOrPartition.Code {
				t.Errorf("round %d: node %d: fetch of the deleted topic: %v", round, n, kerr.ErrorForCode(code))
			}
		}
	}

	// Auto-creation of the deleted name: a new topic with a new id.
	const topic = "doomed-0"
	old := rawMetadata(t, c.Client(2), topic)
	req := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(topic)
	req.Topics, req.AllowAutoTopicCreation = append(req.Topics, rt), true
	if _, err := req.RequestWith(ctx, c.Client(2)); err != nil {
		t.Fatalf("auto-creating metadata: %v", err)
	}
	var newID [16]byte
	c.Await(t, 10*time.Second, "re-created "+topic+" on every node", func() (bool, string) {
		for _, n := range c.IDs() {
			tm := rawMetadata(t, c.Client(n), topic)
			if tm.ErrorCode != 0 || len(tm.Partitions) != 3 {
				return false, fmt.Sprintf("node %d: code %d", n, tm.ErrorCode)
			}
			if newID != ([16]byte{}) && tm.TopicID != newID {
				return false, fmt.Sprintf("node %d: id %x, another node %x", n, tm.TopicID, newID)
			}
			newID = tm.TopicID
		}
		return true, ""
	})
	if old.ErrorCode != kerr.UnknownTopicOrPartition.Code || newID == [16]byte{} {
		t.Fatalf("before re-creation: code %d; new id %x", old.ErrorCode, newID)
	}
	prod := newClient(t, c.Addr(3), kgo.RequiredAcks(kgo.AllISRAcks()))
	for i := range 9 {
		if err := prod.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte{byte(i)}}).FirstErr(); err != nil {
			t.Fatalf("produce to the re-created topic: %v", err)
		}
	}
	if recs := consumeAll(t, c.Addr(1), topic, 9, 20*time.Second); len(recs) != 9 {
		t.Errorf("consumed %d records from the re-created topic, want 9", len(recs))
	}
}

// rawMetadata asks cl's node for one topic by name, without auto-creation.
func rawMetadata(t testing.TB, cl *kgo.Client, topic string) kmsg.MetadataResponseTopic {
	t.Helper()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(topic)
	return rawMetadataTopic(t, cl, rt)
}

// rawMetadataByID asks cl's node for one topic by id.
func rawMetadataByID(t testing.TB, cl *kgo.Client, id [16]byte) kmsg.MetadataResponseTopic {
	t.Helper()
	rt := kmsg.NewMetadataRequestTopic()
	rt.TopicID = id
	return rawMetadataTopic(t, cl, rt)
}

func rawMetadataTopic(t testing.TB, cl *kgo.Client, rt kmsg.MetadataRequestTopic) kmsg.MetadataResponseTopic {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req := kmsg.NewPtrMetadataRequest()
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil || len(resp.Topics) != 1 {
		t.Fatalf("metadata: %v (%d topics)", err, len(resp.Topics))
	}
	return resp.Topics[0]
}

// fetchByID is a consumer's fetch (v13+, by topic id) of partition 0 of
// the topic with that id, from cl's node; it returns the partition's code.
func fetchByID(t testing.TB, cl *kgo.Client, id [16]byte) int16 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req := kmsg.NewPtrFetchRequest()
	req.ReplicaID, req.MaxWaitMillis, req.MaxBytes = -1, 0, 1<<20
	ft := kmsg.NewFetchRequestTopic()
	ft.TopicID = id
	fp := kmsg.NewFetchRequestTopicPartition()
	fp.PartitionMaxBytes, fp.CurrentLeaderEpoch = 1<<20, -1
	ft.Partitions = append(ft.Partitions, fp)
	req.Topics = append(req.Topics, ft)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatalf("fetch: %v", err)
	}
	if resp.ErrorCode != 0 {
		return resp.ErrorCode
	}
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		t.Fatalf("fetch: %d topics", len(resp.Topics))
	}
	return resp.Topics[0].Partitions[0].ErrorCode
}
