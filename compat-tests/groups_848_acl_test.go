package compattests

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestGroup848RegexACL: a KIP-848 member subscribing by regular expression
// learns only the topics its principal may DESCRIBE (Kafka's
// KAFKA-18813), and ConsumerGroupDescribe hides a group that uses topics
// the describer may not describe.
//
// alice may read groups "regex-acl*" and read and describe orders-eu and
// (created later) orders-open; orders-secret and orders-hidden match her
// expression but are not hers. Checked on the wire: her heartbeats'
// assignments name only her topics' ids, also after topics matching the
// expression are created; her ConsumerGroupDescribe succeeds while the
// group uses only her topics and answers TOPIC_AUTHORIZATION_FAILED
// ("The described group uses topics ...") once admin's member subscribes
// orders-secret; a franz-go KIP-848 consumer of alice's with the same
// expression consumes every record of orders-eu and none of the others,
// without an authorization error.
func TestGroup848RegexACL(t *testing.T) {
	ctx := testCtx(t, 90*time.Second)
	b, addr := saslBrokerWith(t, append([]string{
		stdAuthorizer, "super.users=User:admin;" + anon,
		"sasl.enabled.mechanisms=PLAIN",
		`listener.name.sasl_plaintext.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" password="admin-secret" user_admin="admin-secret" user_alice="alice-secret";`,
	}, groupBroker848Overrides...)...)
	adm := newAdmin(t, b.Addr)
	for _, tp := range []string{"orders-eu", "orders-secret"} {
		createTopic(t, adm, tp, 2, nil)
	}
	createACLs(t, ctx, adm, newACLs().Allow("User:alice").Groups("regex-acl").ResourcePatternType(kadm.ACLPatternPrefixed).Operations(kadm.OpRead))
	createACLs(t, ctx, adm, newACLs().Allow("User:alice").Topics("orders-eu").Operations(kadm.OpRead, kadm.OpDescribe))

	alice := newClient(t, addr, plainOpt("alice", "alice-secret"))
	admin := newClient(t, addr, plainOpt("admin", "admin-secret"))
	names := func() map[[16]byte]string { // raw: kadm's Metadata may be cached
		md, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, admin)
		if err != nil {
			t.Fatal(err)
		}
		out := map[[16]byte]string{}
		for _, td := range md.Topics {
			out[td.TopicID] = deref(td.Topic)
		}
		return out
	}
	assigned := func(resp *kmsg.ConsumerGroupHeartbeatResponse) []string {
		if resp.Assignment == nil {
			return nil
		}
		ids := names()
		var ts []string
		for _, at := range resp.Assignment.Topics {
			n, ok := ids[at.TopicID]
			if !ok {
				n = fmt.Sprintf("unknown id %x (known: %v)", at.TopicID, ids)
			}
			ts = append(ts, n)
		}
		sort.Strings(ts)
		return ts
	}
	heartbeat := func(cl *kgo.Client, member string, epoch int32, regex *string, topics []string) *kmsg.ConsumerGroupHeartbeatResponse {
		t.Helper()
		req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
		req.Version = 1
		req.Group, req.MemberID, req.MemberEpoch = "regex-acl", member, epoch
		if epoch == 0 {
			req.RebalanceTimeoutMillis = 30000
			req.SubscribedTopicRegex, req.SubscribedTopicNames = regex, topics
			req.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
		}
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			t.Fatalf("ConsumerGroupHeartbeat as %s: %v", member, err)
		}
		if resp.ErrorCode != 0 {
			t.Fatalf("ConsumerGroupHeartbeat as %s: %v %s", member, kerr.ErrorForCode(resp.ErrorCode), deref(resp.ErrorMessage))
		}
		return resp
	}

	// 1. alice's expression matches orders-eu and orders-secret; she is
	// assigned only hers.
	re := "orders-.*"
	const am = "alice-member-0000000001"
	resp := heartbeat(alice, am, 0, &re, nil)
	if got := assigned(resp); !slices.Equal(got, []string{"orders-eu"}) {
		t.Fatalf("alice's join: assigned topics %v, want [orders-eu]", got)
	}
	epoch := resp.MemberEpoch

	// 2. Two more topics match: orders-open (hers) comes in at her next
	// heartbeats, orders-hidden never does.
	createTopic(t, adm, "orders-open", 1, nil)
	createTopic(t, adm, "orders-hidden", 1, nil)
	createACLs(t, ctx, adm, newACLs().Allow("User:alice").Topics("orders-open").Operations(kadm.OpRead, kadm.OpDescribe))
	var last []string
	waitUntil(t, 15*time.Second, "alice assigned orders-open", func() (bool, string) {
		resp := heartbeat(alice, am, epoch, nil, nil)
		epoch = resp.MemberEpoch
		if resp.Assignment != nil {
			last = assigned(resp)
		}
		if slices.Contains(last, "orders-hidden") || slices.Contains(last, "orders-secret") {
			t.Fatalf("alice assigned %v: a topic she may not describe", last)
		}
		time.Sleep(100 * time.Millisecond)
		return slices.Equal(last, []string{"orders-eu", "orders-open"}), fmt.Sprintf("assigned %v", last)
	})

	// 3. alice describes her group; then admin's member subscribes
	// orders-secret and the group is hidden from her, not from admin.
	describeAs := func(cl *kgo.Client) kmsg.ConsumerGroupDescribeResponseGroup {
		req := kmsg.NewPtrConsumerGroupDescribeRequest()
		req.Groups = []string{"regex-acl"}
		resp, err := req.RequestWith(ctx, cl)
		if err != nil || len(resp.Groups) != 1 {
			t.Fatalf("ConsumerGroupDescribe: %v %+v", err, resp)
		}
		return resp.Groups[0]
	}
	if d := describeAs(alice); d.ErrorCode != 0 || len(d.Members) != 1 {
		t.Fatalf("alice describes her own group: %v %s, %d members", kerr.ErrorForCode(d.ErrorCode), deref(d.ErrorMessage), len(d.Members))
	}
	heartbeat(admin, "admin-member-0000000001", 0, nil, []string{"orders-secret"})
	d := describeAs(alice)
	if d.ErrorCode != kerr.TopicAuthorizationFailed.Code || deref(d.ErrorMessage) != "The described group uses topics that the client is not authorized to describe." || len(d.Members) != 0 {
		t.Fatalf("alice describes a group using orders-secret: %v %q, %d members; want TOPIC_AUTHORIZATION_FAILED and nothing else",
			kerr.ErrorForCode(d.ErrorCode), deref(d.ErrorMessage), len(d.Members))
	}
	if d := describeAs(admin); d.ErrorCode != 0 || len(d.Members) != 2 {
		t.Fatalf("admin describes the group: %v, %d members", kerr.ErrorForCode(d.ErrorCode), len(d.Members))
	}

	// 4. A real client: alice's franz-go KIP-848 consumer with the same
	// expression reads orders-eu and nothing else.
	const n = 20
	for _, tp := range []string{"orders-eu", "orders-secret", "orders-hidden"} {
		for i := range n {
			if err := admin.ProduceSync(ctx, &kgo.Record{Topic: tp, Value: fmt.Appendf(nil, "%s-%d", tp, i)}).FirstErr(); err != nil {
				t.Fatalf("produce to %s: %v", tp, err)
			}
		}
	}
	cons := newClient(t, addr, plainOpt("alice", "alice-secret"), kip848(), kgo.ConsumerGroup("regex-acl-franz"),
		kgo.ConsumeRegex(), kgo.ConsumeTopics(re), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	got := map[string]int{}
	deadline := time.Now().Add(30 * time.Second)
	for got["orders-eu"] < n && time.Now().Before(deadline) {
		pctx, cancel := context.WithTimeout(ctx, time.Second)
		fs := cons.PollFetches(pctx)
		cancel()
		fs.EachError(func(tp string, p int32, err error) {
			if err != context.DeadlineExceeded && err != context.Canceled {
				t.Errorf("alice's consumer: %s[%d]: %v", tp, p, err)
			}
		})
		fs.EachRecord(func(r *kgo.Record) { got[r.Topic]++ })
	}
	if got["orders-eu"] != n || len(got) != 1 {
		t.Fatalf("alice's franz-go consumer read %v, want %d of orders-eu and nothing else", got, n)
	}
}
