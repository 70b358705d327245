package compattests

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"
)

// plainUsersBroker starts a node with ACLs on, ANONYMOUS (its PLAINTEXT
// listener) a super user, and PLAIN users on its SASL listener, each with
// the password <name>-secret.
func plainUsersBroker(t *testing.T, users ...string) (*Broker, string) {
	t.Helper()
	jaas := "listener.name.sasl_plaintext.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required"
	for _, u := range users {
		jaas += fmt.Sprintf(` user_%s="%s-secret"`, u, u)
	}
	return saslBrokerWith(t, "sasl.enabled.mechanisms=PLAIN", jaas+";", stdAuthorizer, "super.users="+anon)
}

// TestAuthorizedOperations: KIP-430's bit sets, as two principals with
// different ACLs see them through kadm (Metadata, DescribeGroups) and
// kmsg (DescribeCluster, Metadata v10's cluster field,
// DescribeTopicPartitions), and the "not asked" value.
func TestAuthorizedOperations(t *testing.T) {
	b, saslAddr := plainUsersBroker(t, "alice", "bob")
	ctx := testCtx(t, 60*time.Second)
	adm := newAdmin(t, b.Addr)
	createTopic(t, adm, "ops-t", 1, nil)
	// ops-g must exist (Empty, with an offset): DescribeGroups v6 answers
	// a group that does not GROUP_ID_NOT_FOUND, without operations, as
	// Kafka 4 does (KIP-1043).
	opsOffsets := kadm.Offsets{}
	opsOffsets.Add(kadm.Offset{Topic: "ops-t", Partition: 0, At: 0, LeaderEpoch: -1})
	if err := adm.CommitAllOffsets(ctx, "ops-g", opsOffsets); err != nil {
		t.Fatalf("commit an offset for ops-g: %v", err)
	}
	for _, acls := range []*kadm.ACLBuilder{
		newACLs().Allow("User:alice").Topics("ops-t").Operations(kadm.OpWrite, kadm.OpDescribeConfigs),
		newACLs().Allow("User:alice").Groups("ops-g").Operations(kadm.OpRead),
		newACLs().Allow("User:alice").Clusters().Operations(kadm.OpDescribe, kadm.OpAlterConfigs),
		newACLs().Allow("User:bob").Topics("ops-t").Operations(kadm.OpAll),
		newACLs().Deny("User:bob").Topics("ops-t").Operations(kadm.OpDelete),
		newACLs().Allow("User:bob").Clusters().Operations(kadm.OpIdempotentWrite),
	} {
		res, err := adm.CreateACLs(ctx, acls)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range res {
			if r.Err != nil {
				t.Fatalf("create ACL: %+v", r)
			}
		}
	}
	alice := newClient(t, saslAddr, plainOpt("alice", "alice-secret"))
	bob := newClient(t, saslAddr, plainOpt("bob", "bob-secret"))
	ops := func(o ...kmsg.ACLOperation) []kmsg.ACLOperation {
		slices.Sort(o)
		return o
	}
	type want struct {
		topic, group, cluster []kmsg.ACLOperation
		groupErr              error
	}
	for who, c := range map[string]struct {
		cl *kgo.Client
		want
	}{
		"alice": {alice, want{
			topic:   ops(kmsg.ACLOperationWrite, kmsg.ACLOperationDescribe, kmsg.ACLOperationDescribeConfigs),
			group:   ops(kmsg.ACLOperationRead, kmsg.ACLOperationDescribe),
			cluster: ops(kmsg.ACLOperationDescribe, kmsg.ACLOperationDescribeConfigs, kmsg.ACLOperationAlterConfigs),
		}},
		// bob may do all but DELETE on the topic; IDEMPOTENT_WRITE on
		// the cluster without DESCRIBE reads as nothing, as in Kafka.
		"bob": {bob, want{
			topic: ops(kmsg.ACLOperationRead, kmsg.ACLOperationWrite, kmsg.ACLOperationCreate, kmsg.ACLOperationDescribe,
				kmsg.ACLOperationAlter, kmsg.ACLOperationDescribeConfigs, kmsg.ACLOperationAlterConfigs),
			groupErr: kerr.GroupAuthorizationFailed,
		}},
	} {
		kadmc := kadm.NewClient(c.cl)
		md, err := kadmc.Metadata(kadm.WithAuthorizedOps(ctx), "ops-t")
		if err != nil {
			t.Fatalf("%s: metadata: %v", who, err)
		}
		if got := ops(md.Topics["ops-t"].AuthorizedOperations...); !slices.Equal(got, c.topic) {
			t.Errorf("%s: topic operations %v, want %v", who, got, c.topic)
		}

		// bob may not describe the group: its coordinator is not found
		// for him either, as in Kafka.
		groups, err := kadmc.DescribeGroups(ctx, "ops-g")
		if c.groupErr != nil {
			if !errors.Is(err, c.groupErr) {
				t.Errorf("%s: describe groups: %v, want %v", who, err, c.groupErr)
			}
		} else if err != nil {
			t.Fatalf("%s: describe groups: %v", who, err)
		} else if g := groups["ops-g"]; g.Err != nil || !slices.Equal(ops(g.AuthorizedOperations...), c.group) {
			t.Errorf("%s: group %v operations %v, want %v", who, g.Err, g.AuthorizedOperations, c.group)
		}

		dc := kmsg.NewPtrDescribeClusterRequest()
		dc.IncludeClusterAuthorizedOperations = true
		dcr, err := dc.RequestWith(ctx, c.cl)
		if err != nil || dcr.ErrorCode != 0 {
			t.Fatalf("%s: describe cluster: %v %+v", who, err, dcr)
		}
		if got := ops(kadm.DecodeACLOperations(dcr.ClusterAuthorizedOperations)...); !slices.Equal(got, c.cluster) || c.cluster == nil && dcr.ClusterAuthorizedOperations != 0 {
			t.Errorf("%s: cluster operations %d = %v, want %v", who, dcr.ClusterAuthorizedOperations, got, c.cluster)
		}

		// Metadata v8-10 carry the cluster's operations (Kafka 2.7's
		// client sends v9).
		v10 := newClient(t, saslAddr, plainOpt(who, who+"-secret"), kgo.MaxVersions(kversion.V2_7_0()))
		mreq := kmsg.NewPtrMetadataRequest()
		mreq.IncludeClusterAuthorizedOperations = true
		mreq.Topics = []kmsg.MetadataRequestTopic{{Topic: kmsg.StringPtr("ops-t")}}
		mresp, err := mreq.RequestWith(ctx, v10)
		if err != nil {
			t.Fatalf("%s: metadata v10: %v", who, err)
		}
		if got := ops(kadm.DecodeACLOperations(mresp.AuthorizedOperations)...); !slices.Equal(got, c.cluster) {
			t.Errorf("%s: metadata v%d cluster operations %v, want %v", who, mresp.GetVersion(), got, c.cluster)
		}
		if v := mresp.GetVersion(); v < 8 || v > 10 || len(mresp.Topics) != 1 || mresp.Topics[0].AuthorizedOperations != math.MinInt32 {
			t.Errorf("%s: topic operations not asked for: %+v, want %d", who, mresp.Topics, math.MinInt32)
		}

		dtp := kmsg.NewPtrDescribeTopicPartitionsRequest()
		dtp.Topics = []kmsg.DescribeTopicPartitionsRequestTopic{{Topic: "ops-t"}}
		dtp.ResponsePartitionLimit = 10
		dtpr, err := dtp.RequestWith(ctx, c.cl)
		if err != nil || len(dtpr.Topics) != 1 || dtpr.Topics[0].ErrorCode != 0 {
			t.Fatalf("%s: describe topic partitions: %v %+v", who, err, dtpr)
		}
		if got := ops(kadm.DecodeACLOperations(dtpr.Topics[0].AuthorizedOperations)...); !slices.Equal(got, c.topic) {
			t.Errorf("%s: DescribeTopicPartitions operations %v, want %v", who, got, c.topic)
		}
	}

	// Not asked: Kafka's -2147483648.
	dc := kmsg.NewPtrDescribeClusterRequest()
	dcr, err := dc.RequestWith(ctx, alice)
	if err != nil || dcr.ClusterAuthorizedOperations != math.MinInt32 {
		t.Errorf("describe cluster, not asked: %v %d", err, dcr.ClusterAuthorizedOperations)
	}
	dg := kmsg.NewPtrDescribeGroupsRequest()
	dg.Groups = []string{"ops-g"}
	dgr, err := dg.RequestWith(ctx, alice)
	if err != nil || len(dgr.Groups) != 1 || dgr.Groups[0].AuthorizedOperations != math.MinInt32 {
		t.Errorf("describe groups, not asked: %v %+v", err, dgr)
	}
}

// TestDynamicSuperUsers: super.users changed with IncrementalAlterConfigs
// on the cluster default takes effect without a restart, and its removal
// too; a per-broker value is refused; ALTER_CONFIGS on the cluster tunes
// broker configs but does not change super.users (a super user must).
func TestDynamicSuperUsers(t *testing.T) {
	b, saslAddr := plainUsersBroker(t, "alice")
	ctx := testCtx(t, 60*time.Second)
	adm := newAdmin(t, b.Addr)
	aliceCl := newClient(t, saslAddr, plainOpt("alice", "alice-secret"))
	alice := kadm.NewClient(aliceCl)
	// clusterOps polls (bounded) until alice's cluster operations are want
	// (KIP-430: 8096 is every cluster operation).
	clusterOps := func(want int32) {
		t.Helper()
		var got int32
		for ctx.Err() == nil {
			req := kmsg.NewPtrDescribeClusterRequest()
			req.IncludeClusterAuthorizedOperations = true
			resp, err := req.RequestWith(ctx, aliceCl)
			if err != nil {
				t.Fatal(err)
			}
			if got = resp.ClusterAuthorizedOperations; got == want {
				return
			}
			time.Sleep(50 * time.Millisecond)
		}
		t.Fatalf("alice's cluster operations %d, want %d", got, want)
	}
	createAs := func(topic string) error {
		res, err := alice.CreateTopic(ctx, 1, 1, nil, topic)
		if err != nil {
			return err
		}
		return res.Err
	}

	clusterOps(0)
	if err := createAs("su-1"); !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("alice, not a super user, creates a topic: %v", err)
	}
	set := func(v *string, brokers ...int32) error {
		op := kadm.SetConfig
		if v == nil {
			op = kadm.DeleteConfig
		}
		rs, err := adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{{Op: op, Name: "super.users", Value: v}}, brokers...)
		if err != nil {
			return err
		}
		for _, r := range rs {
			if r.Err != nil {
				return r.Err
			}
		}
		return nil
	}
	// ALTER_CONFIGS on the cluster is not enough to make oneself a super
	// user (legacy AlterConfigs as well: sarama's, kafka-configs --alter
	// before 2.3), though it tunes.
	acls, err := adm.CreateACLs(ctx, newACLs().Allow("User:alice").Clusters().Operations(kadm.OpAlterConfigs))
	if err != nil || acls[0].Err != nil {
		t.Fatalf("grant alice ALTER_CONFIGS: %v %+v", err, acls)
	}
	rs, err := alice.AlterBrokerConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "super.users", Value: kmsg.StringPtr("User:alice")}})
	if err != nil || len(rs) != 1 || !errors.Is(rs[0].Err, kerr.ClusterAuthorizationFailed) || !strings.Contains(rs[0].ErrMessage, "super user") {
		t.Fatalf("alice, with ALTER_CONFIGS, sets super.users: %v %+v", err, rs)
	}
	legacy := kmsg.NewPtrAlterConfigsRequest()
	lr := kmsg.NewAlterConfigsRequestResource()
	lr.ResourceType = kmsg.ConfigResourceTypeBroker
	lc := kmsg.NewAlterConfigsRequestResourceConfig()
	lc.Name, lc.Value = "super.users", kmsg.StringPtr("User:alice")
	lr.Configs = append(lr.Configs, lc)
	legacy.Resources = append(legacy.Resources, lr)
	lresp, err := legacy.RequestWith(ctx, aliceCl)
	if err != nil || len(lresp.Resources) != 1 || lresp.Resources[0].ErrorCode != kerr.ClusterAuthorizationFailed.Code {
		t.Fatalf("alice, with ALTER_CONFIGS, sets super.users by AlterConfigs: %v %+v", err, lresp)
	}
	rs, err = alice.AlterBrokerConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "log.retention.ms", Value: kmsg.StringPtr("86400000")}})
	if err != nil || len(rs) != 1 || rs[0].Err != nil {
		t.Fatalf("alice, with ALTER_CONFIGS, tunes: %v %+v", err, rs)
	}
	audited := func() bool {
		for _, l := range strings.Split(b.readLog(), "\n") {
			if strings.Contains(l, `"principal":"User:alice"`) && strings.Contains(l, `"api":"IncrementalAlterConfigs"`) &&
				strings.Contains(l, `"outcome":"denied"`) {
				return true
			}
		}
		return false
	}
	for !audited() && ctx.Err() == nil {
		time.Sleep(50 * time.Millisecond)
	}
	if !audited() {
		t.Error("no audit denial for alice's change of super.users")
	}
	clusterOps(0)

	if err := set(kmsg.StringPtr(anon+";User:alice"), 1); !errors.Is(err, kerr.InvalidConfig) {
		t.Errorf("super.users for broker 1 alone: %v, want INVALID_CONFIG", err)
	}
	if err := set(kmsg.StringPtr(anon + ";User:alice")); err != nil {
		t.Fatalf("super.users for the cluster: %v", err)
	}
	clusterOps(8096)
	if err := createAs("su-1"); err != nil {
		t.Errorf("alice, a super user now, creates a topic: %v", err)
	}
	// Removing the dynamic value falls back to the static one.
	if err := set(nil); err != nil {
		t.Fatalf("delete super.users: %v", err)
	}
	clusterOps(0)
	if err := createAs("su-2"); !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Errorf("alice, no longer a super user, creates a topic: %v", err)
	}
	if !b.logContains("super.users changed") {
		t.Error("no log line for the change")
	}
}
