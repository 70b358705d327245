package compattests

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"
)

const (
	stdAuthorizer = "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer"
	anon          = "User:ANONYMOUS"
)

// TestACLAdminAPIs: CreateAcls, DescribeAcls and DeleteAcls through kadm
// and sarama's ClusterAdmin, their error paths (SECURITY_DISABLED without
// an authorizer, INVALID_REQUEST for a MATCH pattern in a creation), and
// ACLs surviving a restart.
func TestACLAdminAPIs(t *testing.T) {
	ctx := testCtx(t, 60*time.Second)

	// No authorizer: SECURITY_DISABLED.
	plain := startBroker(t, t.TempDir())
	padm := newAdmin(t, plain.Addr)
	res, err := padm.CreateACLs(ctx, newACLs().Allow(anon).Topics("t").Operations(kadm.OpRead))
	if err != nil || len(res) != 1 || res[0].Err != kerr.SecurityDisabled {
		t.Fatalf("create without authorizer: %v %+v", err, res)
	}
	plain.Stop()

	b := startBroker(t, t.TempDir(), stdAuthorizer, "super.users="+anon)
	adm := newAdmin(t, b.Addr)
	res, err = adm.CreateACLs(ctx, newACLs().Allow("User:alice").Topics("mf.settlement.").
		ResourcePatternType(kadm.ACLPatternPrefixed).Operations(kadm.OpWrite, kadm.OpDescribe))
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res {
		if r.Err != nil {
			t.Fatalf("create: %+v", r)
		}
	}
	res, err = adm.CreateACLs(ctx, newACLs().Deny("User:mallory").DenyHosts("10.0.0.9").Groups("g").Operations(kadm.OpRead))
	if err != nil || res[0].Err != nil {
		t.Fatalf("create deny: %v %+v", err, res)
	}

	// A MATCH pattern is for filters only: INVALID_REQUEST, raw (kadm
	// refuses to send it).
	cl := newClient(t, b.Addr)
	creq := kmsg.NewPtrCreateACLsRequest()
	c := kmsg.NewCreateACLsRequestCreation()
	c.ResourceType, c.ResourceName, c.ResourcePatternType = kmsg.ACLResourceTypeTopic, "x", kmsg.ACLResourcePatternTypeMatch
	c.Principal, c.Host, c.Operation, c.PermissionType = anon, "*", kmsg.ACLOperationRead, kmsg.ACLPermissionTypeAllow
	bad := c
	bad.ResourceType, bad.ResourceName, bad.ResourcePatternType = kmsg.ACLResourceTypeCluster, "not-kafka-cluster", kmsg.ACLResourcePatternTypeLiteral
	creq.Creations = []kmsg.CreateACLsRequestCreation{c, bad}
	cresp, err := creq.RequestWith(ctx, cl)
	if err != nil || len(cresp.Results) != 2 || cresp.Results[0].ErrorCode != kerr.InvalidRequest.Code || cresp.Results[1].ErrorCode != kerr.InvalidRequest.Code {
		t.Fatalf("invalid creations: %v %+v", err, cresp)
	}
	dreq := kmsg.NewPtrDescribeACLsRequest()
	dreq.ResourceType = kmsg.ACLResourceTypeUnknown
	dresp, err := dreq.RequestWith(ctx, cl)
	if err != nil || dresp.ErrorCode != kerr.InvalidRequest.Code {
		t.Fatalf("describe with an UNKNOWN filter: %v %+v", err, dresp)
	}

	delreq := kmsg.NewPtrDeleteACLsRequest()
	badf := kmsg.NewDeleteACLsRequestFilter()
	badf.ResourceType, badf.ResourcePatternType, badf.Operation, badf.PermissionType = kmsg.ACLResourceTypeTopic, kmsg.ACLResourcePatternTypeUnknown, kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
	delreq.Filters = append(delreq.Filters, badf)
	delresp, err := delreq.RequestWith(ctx, cl)
	if err != nil || len(delresp.Results) != 1 || delresp.Results[0].ErrorCode != kerr.InvalidRequest.Code {
		t.Fatalf("delete with an UNKNOWN pattern filter: %v %+v", err, delresp)
	}

	// Describe with MATCH finds the prefix from a topic name.
	match := newACLs().Topics("mf.settlement.eur").ResourcePatternType(kadm.ACLPatternMatch).Operations(kadm.OpAny)
	match.Allow().AllowHosts().Deny().DenyHosts()
	dres, err := adm.DescribeACLs(ctx, match)
	if err != nil || len(dres) != 1 || dres[0].Err != nil || len(dres[0].Described) != 2 {
		t.Fatalf("describe MATCH: %v %+v", err, dres)
	}

	// sarama: create, list, delete.
	cfg := sarama.NewConfig()
	cfg.Version = sarama.V3_6_0_0
	sadm, err := sarama.NewClusterAdmin([]string{b.Addr}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer sadm.Close()
	err = sadm.CreateACL(sarama.Resource{ResourceType: sarama.AclResourceTopic, ResourceName: "clicks.", ResourcePatternType: sarama.AclPatternPrefixed},
		sarama.Acl{Principal: "User:ui", Host: "*", Operation: sarama.AclOperationWrite, PermissionType: sarama.AclPermissionAllow})
	if err != nil {
		t.Fatalf("sarama CreateACL: %v", err)
	}
	err = sadm.CreateACL(sarama.Resource{ResourceType: sarama.AclResourceTopic, ResourceName: "x", ResourcePatternType: sarama.AclPatternMatch},
		sarama.Acl{Principal: "User:ui", Host: "*", Operation: sarama.AclOperationWrite, PermissionType: sarama.AclPermissionAllow})
	if err == nil || !strings.Contains(err.Error(), sarama.ErrInvalidRequest.Error()) {
		t.Errorf("sarama CreateACL with MATCH: %v, want INVALID_REQUEST", err)
	}
	ui := "User:ui"
	listed, err := sadm.ListAcls(sarama.AclFilter{ResourceType: sarama.AclResourceAny, ResourcePatternTypeFilter: sarama.AclPatternAny,
		Principal: &ui, Operation: sarama.AclOperationAny, PermissionType: sarama.AclPermissionAny})
	if err != nil || len(listed) != 1 || listed[0].ResourceName != "clicks." || len(listed[0].Acls) != 1 {
		t.Fatalf("sarama ListAcls: %v %+v", err, listed)
	}

	// Restart: the ACLs are in the metadata log.
	b.Stop()
	b.Restart()
	adm = newAdmin(t, b.Addr)
	all := newACLs().AnyResource().ResourcePatternType(kadm.ACLPatternAny).Operations(kadm.OpAny)
	all.Allow().AllowHosts().Deny().DenyHosts()
	dres, err = adm.DescribeACLs(ctx, all)
	if err != nil || dres[0].Err != nil || len(dres[0].Described) != 4 {
		t.Fatalf("after restart: %v %+v", err, dres)
	}

	sadm2, err := sarama.NewClusterAdmin([]string{b.Addr}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer sadm2.Close()
	matched, err := sadm2.DeleteACL(sarama.AclFilter{ResourceType: sarama.AclResourceTopic, ResourcePatternTypeFilter: sarama.AclPatternAny,
		Principal: &ui, Operation: sarama.AclOperationAny, PermissionType: sarama.AclPermissionAny}, false)
	if err != nil || len(matched) != 1 {
		t.Fatalf("sarama DeleteACL: %v %+v", err, matched)
	}
	del, err := adm.DeleteACLs(ctx, all)
	if err != nil || del[0].Err != nil || len(del[0].Deleted) != 3 {
		t.Fatalf("kadm DeleteACLs: %v %+v", err, del)
	}
	dres, err = adm.DescribeACLs(ctx, all)
	if err != nil || len(dres[0].Described) != 0 {
		t.Fatalf("after delete: %v %+v", err, dres)
	}
}

func createACLs(t *testing.T, ctx context.Context, adm *kadm.Client, b *kadm.ACLBuilder) {
	t.Helper()
	res, err := adm.CreateACLs(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res {
		if r.Err != nil {
			t.Fatalf("create acl %+v: %v", r, r.Err)
		}
	}
}

// authProbe sends one raw request about resources named with prefix and
// returns the error code where Kafka puts the authorization failure.
type authProbe struct {
	key     int16
	cluster bool // needs an operation on the cluster, whatever the prefix
	api     string
	code    int16 // the denial's code
	run     func(ctx context.Context, cl *kgo.Client, p string) (int16, error)
}

func authProbes() []authProbe {
	partCode := func(code int16, err error) (int16, error) { return code, err }
	return []authProbe{
		{0, false, "Produce", kerr.TopicAuthorizationFailed.Code, func(ctx context.Context, cl *kgo.Client, p string) (int16, error) {
			r := cl.ProduceSync(ctx, &kgo.Record{Topic: p + "t", Value: []byte("v")}).FirstErr()
			if ke, ok := r.(*kerr.Error); ok {
				return ke.Code, nil
			}
			if r != nil {
				return -1, nil
			}
			return 0, nil
		}},
		{1, false, "Fetch", kerr.TopicAuthorizationFailed.Code, func(ctx context.Context, cl *kgo.Client, p string) (int16, error) {
			req := kmsg.NewPtrFetchRequest()
			req.Version, req.ReplicaID, req.MaxWaitMillis, req.MaxBytes = 11, -1, 1, 1<<20
			rt := kmsg.NewFetchRequestTopic()
			rt.Topic = p + "t"
			rp := kmsg.NewFetchRequestTopicPartition()
			rp.PartitionMaxBytes = 1 << 20
			rt.Partitions = append(rt.Partitions, rp)
			req.Topics = append(req.Topics, rt)
			resp, err := req.RequestWith(ctx, cl)
			if err != nil || len(resp.Topics) == 0 || len(resp.Topics[0].Partitions) == 0 {
				return -1, err
			}
			return resp.Topics[0].Partitions[0].ErrorCode, nil
		}},
		{2, false, "ListOffsets", kerr.TopicAuthorizationFailed.Code, func(ctx context.Context, cl *kgo.Client, p string) (int16, error) {
			req := kmsg.NewPtrListOffsetsRequest()
			rt := kmsg.NewListOffsetsRequestTopic()
			rt.Topic = p + "t"
			rt.Partitions = append(rt.Partitions, kmsg.NewListOffsetsRequestTopicPartition())
			req.Topics = append(req.Topics, rt)
			resp, err := req.RequestWith(ctx, cl)
			if err != nil || len(resp.Topics) == 0 {
				return -1, err
			}
			return resp.Topics[0].Partitions[0].ErrorCode, nil
		}},
		{3, false, "Metadata", kerr.TopicAuthorizationFailed.Code, func(ctx context.Context, cl *kgo.Client, p string) (int16, error) {
			req := kmsg.NewPtrMetadataRequest()
			rt := kmsg.NewMetadataRequestTopic()
			rt.Topic = kmsg.StringPtr(p + "t")
			req.Topics = append(req.Topics, rt)
			resp, err := req.RequestWith(ctx, cl)
			if err != nil || len(resp.Topics) == 0 {
				return -1, err
			}
			return resp.Topics[0].ErrorCode, nil
		}},
		{8, false, "OffsetCommit", kerr.GroupAuthorizationFailed.Code, func(ctx context.Context, cl *kgo.Client, p string) (int16, error) {
			req := kmsg.NewPtrOffsetCommitRequest()
			req.Group, req.Generation = p+"g", -1
			rt := kmsg.NewOffsetCommitRequestTopic()
			rt.Topic = p + "t"
			rt.Partitions = append(rt.Partitions, kmsg.NewOffsetCommitRequestTopicPartition())
			req.Topics = append(req.Topics, rt)
			resp, err := req.RequestWith(ctx, cl)
			if err != nil || len(resp.Topics) == 0 {
				return -1, err
			}
			return resp.Topics[0].Partitions[0].ErrorCode, nil
		}},
		{9, false, "OffsetFetch", kerr.GroupAuthorizationFailed.Code, func(ctx context.Context, cl *kgo.Client, p string) (int16, error) {
			req := kmsg.NewPtrOffsetFetchRequest()
			req.Version, req.Group = 7, p+"g"
			resp, err := req.RequestWith(ctx, cl)
			if err != nil {
				return -1, err
			}
			return resp.ErrorCode, nil
		}},
		{10, false, "FindCoordinator", kerr.GroupAuthorizationFailed.Code, func(ctx context.Context, cl *kgo.Client, p string) (int16, error) {
			req := kmsg.NewPtrFindCoordinatorRequest()
			req.Version, req.CoordinatorKey = 3, p+"g"
			resp, err := req.RequestWith(ctx, cl)
			if err != nil {
				return -1, err
			}
			return resp.ErrorCode, nil
		}},
		{11, false, "JoinGroup", kerr.GroupAuthorizationFailed.Code, func(ctx context.Context, cl *kgo.Client, p string) (int16, error) {
			req := kmsg.NewPtrJoinGroupRequest()
			req.Version, req.Group, req.SessionTimeoutMillis, req.RebalanceTimeoutMillis, req.ProtocolType = 5, p+"g", 10000, 10000, "consumer"
			req.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range"}}
			resp, err := req.RequestWith(ctx, cl)
			if err != nil {
				return -1, err
			}
			return resp.ErrorCode, nil
		}},
		{12, false, "Heartbeat", kerr.GroupAuthorizationFailed.Code, func(ctx context.Context, cl *kgo.Client, p string) (int16, error) {
			req := kmsg.NewPtrHeartbeatRequest()
			req.Group, req.MemberID = p+"g", "m"
			resp, err := req.RequestWith(ctx, cl)
			if err != nil {
				return -1, err
			}
			return resp.ErrorCode, nil
		}},
		{15, false, "DescribeGroups", kerr.GroupAuthorizationFailed.Code, func(ctx context.Context, cl *kgo.Client, p string) (int16, error) {
			req := kmsg.NewPtrDescribeGroupsRequest()
			req.Groups = []string{p + "g"}
			resp, err := req.RequestWith(ctx, cl)
			if err != nil || len(resp.Groups) == 0 {
				return -1, err
			}
			return resp.Groups[0].ErrorCode, nil
		}},
		{42, false, "DeleteGroups", kerr.GroupAuthorizationFailed.Code, func(ctx context.Context, cl *kgo.Client, p string) (int16, error) {
			req := kmsg.NewPtrDeleteGroupsRequest()
			req.Groups = []string{p + "g"}
			resp, err := req.RequestWith(ctx, cl)
			if err != nil || len(resp.Groups) == 0 {
				return -1, err
			}
			return resp.Groups[0].ErrorCode, nil
		}},
		{37, false, "CreatePartitions", kerr.TopicAuthorizationFailed.Code, func(ctx context.Context, cl *kgo.Client, p string) (int16, error) {
			req := kmsg.NewPtrCreatePartitionsRequest()
			rt := kmsg.NewCreatePartitionsRequestTopic()
			rt.Topic, rt.Count = p+"t", 1 // not more than it has: INVALID_PARTITIONS when allowed
			req.Topics, req.ValidateOnly = append(req.Topics, rt), true
			resp, err := req.RequestWith(ctx, cl)
			if err != nil || len(resp.Topics) == 0 {
				return -1, err
			}
			return resp.Topics[0].ErrorCode, nil
		}},
		{32, false, "DescribeConfigs", kerr.TopicAuthorizationFailed.Code, func(ctx context.Context, cl *kgo.Client, p string) (int16, error) {
			req := kmsg.NewPtrDescribeConfigsRequest()
			rr := kmsg.NewDescribeConfigsRequestResource()
			rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeTopic, p+"t"
			req.Resources = append(req.Resources, rr)
			resp, err := req.RequestWith(ctx, cl)
			if err != nil || len(resp.Resources) == 0 {
				return -1, err
			}
			return resp.Resources[0].ErrorCode, nil
		}},
		{44, false, "IncrementalAlterConfigs", kerr.TopicAuthorizationFailed.Code, func(ctx context.Context, cl *kgo.Client, p string) (int16, error) {
			req := kmsg.NewPtrIncrementalAlterConfigsRequest()
			rr := kmsg.NewIncrementalAlterConfigsRequestResource()
			rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeTopic, p+"t"
			rc := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
			rc.Name, rc.Value = "retention.ms", kmsg.StringPtr("86400000")
			rr.Configs = append(rr.Configs, rc)
			req.Resources, req.ValidateOnly = append(req.Resources, rr), true
			resp, err := req.RequestWith(ctx, cl)
			if err != nil || len(resp.Resources) == 0 {
				return -1, err
			}
			return resp.Resources[0].ErrorCode, nil
		}},
		{21, false, "DeleteRecords", kerr.TopicAuthorizationFailed.Code, func(ctx context.Context, cl *kgo.Client, p string) (int16, error) {
			req := kmsg.NewPtrDeleteRecordsRequest()
			rt := kmsg.NewDeleteRecordsRequestTopic()
			rt.Topic = p + "t"
			rp := kmsg.NewDeleteRecordsRequestTopicPartition()
			rp.Offset = 0
			rt.Partitions = append(rt.Partitions, rp)
			req.Topics, req.TimeoutMillis = append(req.Topics, rt), 5000
			resp, err := req.RequestWith(ctx, cl)
			if err != nil || len(resp.Topics) == 0 {
				return -1, err
			}
			return resp.Topics[0].Partitions[0].ErrorCode, nil
		}},
		{22, false, "InitProducerId", kerr.TransactionalIDAuthorizationFailed.Code, func(ctx context.Context, cl *kgo.Client, p string) (int16, error) {
			req := kmsg.NewPtrInitProducerIDRequest()
			req.TransactionalID, req.TransactionTimeoutMillis = kmsg.StringPtr(p+"x"), 10000
			resp, err := req.RequestWith(ctx, cl)
			if err != nil {
				return -1, err
			}
			return resp.ErrorCode, nil
		}},
		{26, false, "EndTxn", kerr.TransactionalIDAuthorizationFailed.Code, func(ctx context.Context, cl *kgo.Client, p string) (int16, error) {
			req := kmsg.NewPtrEndTxnRequest()
			req.TransactionalID, req.ProducerID, req.ProducerEpoch = p+"x", 1, 0
			resp, err := req.RequestWith(ctx, cl)
			if err != nil {
				return -1, err
			}
			return resp.ErrorCode, nil
		}},
		{20, false, "DeleteTopics", kerr.TopicAuthorizationFailed.Code, func(ctx context.Context, cl *kgo.Client, p string) (int16, error) {
			req := kmsg.NewPtrDeleteTopicsRequest()
			req.TopicNames, req.TimeoutMillis = []string{p + "gone"}, 5000
			rt := kmsg.NewDeleteTopicsRequestTopic()
			rt.Topic = kmsg.StringPtr(p + "gone")
			req.Topics = append(req.Topics, rt) // v6+
			resp, err := req.RequestWith(ctx, cl)
			if err != nil || len(resp.Topics) == 0 {
				return -1, err
			}
			return resp.Topics[0].ErrorCode, nil
		}},
		{19, false, "CreateTopics", kerr.TopicAuthorizationFailed.Code, func(ctx context.Context, cl *kgo.Client, p string) (int16, error) {
			req := kmsg.NewPtrCreateTopicsRequest()
			rt := kmsg.NewCreateTopicsRequestTopic()
			rt.Topic, rt.NumPartitions, rt.ReplicationFactor = p+"new", 1, 1
			req.Topics, req.ValidateOnly, req.TimeoutMillis = append(req.Topics, rt), true, 5000
			resp, err := req.RequestWith(ctx, cl)
			if err != nil || len(resp.Topics) == 0 {
				return -1, err
			}
			return partCode(resp.Topics[0].ErrorCode, nil)
		}},

		{22, false, "InitProducerId (idempotent)", kerr.ClusterAuthorizationFailed.Code, func(ctx context.Context, cl *kgo.Client, p string) (int16, error) {
			req := kmsg.NewPtrInitProducerIDRequest()
			resp, err := req.RequestWith(ctx, cl)
			if err != nil {
				return -1, err
			}
			return resp.ErrorCode, nil
		}},
		{14, false, "SyncGroup", kerr.GroupAuthorizationFailed.Code, func(ctx context.Context, cl *kgo.Client, p string) (int16, error) {
			req := kmsg.NewPtrSyncGroupRequest()
			req.Group, req.MemberID = p+"g", "m"
			resp, err := req.RequestWith(ctx, cl)
			if err != nil {
				return -1, err
			}
			return resp.ErrorCode, nil
		}},
		{13, false, "LeaveGroup", kerr.GroupAuthorizationFailed.Code, func(ctx context.Context, cl *kgo.Client, p string) (int16, error) {
			req := kmsg.NewPtrLeaveGroupRequest()
			req.Group, req.MemberID = p+"g", "m"
			req.Members = []kmsg.LeaveGroupRequestMember{{MemberID: "m"}}
			resp, err := req.RequestWith(ctx, cl)
			if err != nil {
				return -1, err
			}
			return resp.ErrorCode, nil
		}},
		{23, false, "OffsetForLeaderEpoch", kerr.TopicAuthorizationFailed.Code, func(ctx context.Context, cl *kgo.Client, p string) (int16, error) {
			req := kmsg.NewPtrOffsetForLeaderEpochRequest()
			rt := kmsg.NewOffsetForLeaderEpochRequestTopic()
			rt.Topic = p + "t"
			rp := kmsg.NewOffsetForLeaderEpochRequestTopicPartition()
			rp.CurrentLeaderEpoch, rp.LeaderEpoch = -1, 0
			rt.Partitions = append(rt.Partitions, rp)
			req.Topics = append(req.Topics, rt)
			resp, err := req.RequestWith(ctx, cl)
			if err != nil || len(resp.Topics) == 0 {
				return -1, err
			}
			return resp.Topics[0].Partitions[0].ErrorCode, nil
		}},
		{24, false, "AddPartitionsToTxn", kerr.TransactionalIDAuthorizationFailed.Code, func(ctx context.Context, cl *kgo.Client, p string) (int16, error) {
			req := kmsg.NewPtrAddPartitionsToTxnRequest()
			req.TransactionalID, req.ProducerID = p+"x", 1
			req.Topics = []kmsg.AddPartitionsToTxnRequestTopic{{Topic: p + "t", Partitions: []int32{0}}}
			resp, err := req.RequestWith(ctx, cl)
			if err != nil || len(resp.Topics) == 0 {
				return -1, err
			}
			return resp.Topics[0].Partitions[0].ErrorCode, nil
		}},
		{25, false, "AddOffsetsToTxn", kerr.TransactionalIDAuthorizationFailed.Code, func(ctx context.Context, cl *kgo.Client, p string) (int16, error) {
			req := kmsg.NewPtrAddOffsetsToTxnRequest()
			req.TransactionalID, req.ProducerID, req.Group = p+"x", 1, p+"g"
			resp, err := req.RequestWith(ctx, cl)
			if err != nil {
				return -1, err
			}
			return resp.ErrorCode, nil
		}},
		{28, false, "TxnOffsetCommit", kerr.GroupAuthorizationFailed.Code /* kgo asks for the group coordinator first */, func(ctx context.Context, cl *kgo.Client, p string) (int16, error) {
			req := kmsg.NewPtrTxnOffsetCommitRequest()
			req.TransactionalID, req.Group, req.ProducerID = p+"x", p+"g", 1
			rt := kmsg.NewTxnOffsetCommitRequestTopic()
			rt.Topic = p + "t"
			rt.Partitions = append(rt.Partitions, kmsg.NewTxnOffsetCommitRequestTopicPartition())
			req.Topics = append(req.Topics, rt)
			resp, err := req.RequestWith(ctx, cl)
			if err != nil || len(resp.Topics) == 0 {
				return -1, err
			}
			return resp.Topics[0].Partitions[0].ErrorCode, nil
		}},
		{68, false, "ConsumerGroupHeartbeat", kerr.GroupAuthorizationFailed.Code, func(ctx context.Context, cl *kgo.Client, p string) (int16, error) {
			req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
			req.Group, req.MemberID, req.RebalanceTimeoutMillis = p+"g", "probe-member-0000000000", 30000
			req.SubscribedTopicNames, req.Topics = []string{p + "t"}, []kmsg.ConsumerGroupHeartbeatRequestTopic{}
			resp, err := req.RequestWith(ctx, cl)
			if err != nil {
				return -1, err
			}
			return resp.ErrorCode, nil
		}},
		{69, false, "ConsumerGroupDescribe", kerr.GroupAuthorizationFailed.Code, func(ctx context.Context, cl *kgo.Client, p string) (int16, error) {
			req := kmsg.NewPtrConsumerGroupDescribeRequest()
			req.Groups = []string{p + "g"}
			resp, err := req.RequestWith(ctx, cl)
			if err != nil || len(resp.Groups) == 0 {
				return -1, err
			}
			return resp.Groups[0].ErrorCode, nil
		}},
		{76, false, "ShareGroupHeartbeat", kerr.GroupAuthorizationFailed.Code, func(ctx context.Context, cl *kgo.Client, p string) (int16, error) {
			req := kmsg.NewPtrShareGroupHeartbeatRequest()
			req.GroupID, req.MemberID, req.SubscribedTopicNames = p+"sg", "probe-member-0000000000", []string{p + "t"}
			resp, err := req.RequestWith(ctx, cl)
			if err != nil {
				return -1, err
			}
			return resp.ErrorCode, nil
		}},
		{77, false, "ShareGroupDescribe", kerr.GroupAuthorizationFailed.Code, func(ctx context.Context, cl *kgo.Client, p string) (int16, error) {
			req := kmsg.NewPtrShareGroupDescribeRequest()
			req.GroupIDs = []string{p + "sg"}
			resp, err := req.RequestWith(ctx, cl)
			if err != nil || len(resp.Groups) == 0 {
				return -1, err
			}
			return resp.Groups[0].ErrorCode, nil
		}},
		{78, false, "ShareFetch", kerr.GroupAuthorizationFailed.Code, func(ctx context.Context, cl *kgo.Client, p string) (int16, error) {
			req := kmsg.NewPtrShareFetchRequest()
			req.GroupID, req.MemberID, req.ShareSessionEpoch = kmsg.StringPtr(p+"sg"), kmsg.StringPtr("probe-member-0000000000"), 0
			// kgo routes no share request itself: sent to the node.
			resp, err := cl.SeedBrokers()[0].Request(ctx, req)
			if err != nil {
				return -1, err
			}
			return resp.(*kmsg.ShareFetchResponse).ErrorCode, nil
		}},
		{79, false, "ShareAcknowledge", kerr.GroupAuthorizationFailed.Code, func(ctx context.Context, cl *kgo.Client, p string) (int16, error) {
			req := kmsg.NewPtrShareAcknowledgeRequest()
			req.GroupID, req.MemberID, req.ShareSessionEpoch = kmsg.StringPtr(p+"sg"), kmsg.StringPtr("probe-member-0000000000"), 1
			resp, err := cl.SeedBrokers()[0].Request(ctx, req)
			if err != nil {
				return -1, err
			}
			return resp.(*kmsg.ShareAcknowledgeResponse).ErrorCode, nil
		}},
		// The share coordinator's state RPCs are inter-broker: CLUSTER_ACTION.
		{83, true, "InitializeShareGroupState", kerr.ClusterAuthorizationFailed.Code, func(ctx context.Context, cl *kgo.Client, p string) (int16, error) {
			req := kmsg.NewPtrInitializeShareGroupStateRequest()
			req.GroupID = p + "sg"
			return shareStateProbe(ctx, cl, req)
		}},
		{84, true, "ReadShareGroupState", kerr.ClusterAuthorizationFailed.Code, func(ctx context.Context, cl *kgo.Client, p string) (int16, error) {
			req := kmsg.NewPtrReadShareGroupStateRequest()
			req.GroupID = p + "sg"
			return shareStateProbe(ctx, cl, req)
		}},
		{85, true, "WriteShareGroupState", kerr.ClusterAuthorizationFailed.Code, func(ctx context.Context, cl *kgo.Client, p string) (int16, error) {
			req := kmsg.NewPtrWriteShareGroupStateRequest()
			req.GroupID = p + "sg"
			return shareStateProbe(ctx, cl, req)
		}},
		{86, true, "DeleteShareGroupState", kerr.ClusterAuthorizationFailed.Code, func(ctx context.Context, cl *kgo.Client, p string) (int16, error) {
			req := kmsg.NewPtrDeleteShareGroupStateRequest()
			req.GroupID = p + "sg"
			return shareStateProbe(ctx, cl, req)
		}},
		{87, true, "ReadShareGroupStateSummary", kerr.ClusterAuthorizationFailed.Code, func(ctx context.Context, cl *kgo.Client, p string) (int16, error) {
			req := kmsg.NewPtrReadShareGroupStateSummaryRequest()
			req.GroupID = p + "sg"
			return shareStateProbe(ctx, cl, req)
		}},
		{90, false, "DescribeShareGroupOffsets", kerr.GroupAuthorizationFailed.Code, func(ctx context.Context, cl *kgo.Client, p string) (int16, error) {
			req := kmsg.NewPtrDescribeShareGroupOffsetsRequest()
			rg := kmsg.NewDescribeShareGroupOffsetsRequestGroup()
			rg.GroupID = p + "sg"
			req.Groups = append(req.Groups, rg)
			resp, err := req.RequestWith(ctx, cl)
			if err != nil || len(resp.Groups) == 0 {
				return -1, err
			}
			return resp.Groups[0].ErrorCode, nil
		}},
		{91, false, "AlterShareGroupOffsets", kerr.GroupAuthorizationFailed.Code, func(ctx context.Context, cl *kgo.Client, p string) (int16, error) {
			req := kmsg.NewPtrAlterShareGroupOffsetsRequest()
			req.GroupID = p + "sg"
			resp, err := req.RequestWith(ctx, cl)
			if err != nil {
				return -1, err
			}
			return resp.ErrorCode, nil
		}},
		{92, false, "DeleteShareGroupOffsets", kerr.GroupAuthorizationFailed.Code, func(ctx context.Context, cl *kgo.Client, p string) (int16, error) {
			req := kmsg.NewPtrDeleteShareGroupOffsetsRequest()
			req.GroupID = p + "sg"
			resp, err := req.RequestWith(ctx, cl)
			if err != nil {
				return -1, err
			}
			return resp.ErrorCode, nil
		}},
		{47, false, "OffsetDelete", kerr.GroupAuthorizationFailed.Code, func(ctx context.Context, cl *kgo.Client, p string) (int16, error) {
			req := kmsg.NewPtrOffsetDeleteRequest()
			req.Group = p + "g"
			resp, err := req.RequestWith(ctx, cl)
			if err != nil {
				return -1, err
			}
			return resp.ErrorCode, nil
		}},
		{61, false, "DescribeProducers", kerr.TopicAuthorizationFailed.Code, func(ctx context.Context, cl *kgo.Client, p string) (int16, error) {
			req := kmsg.NewPtrDescribeProducersRequest()
			req.Topics = []kmsg.DescribeProducersRequestTopic{{Topic: p + "t", Partitions: []int32{0}}}
			resp, err := req.RequestWith(ctx, cl)
			if err != nil || len(resp.Topics) == 0 {
				return -1, err
			}
			return resp.Topics[0].Partitions[0].ErrorCode, nil
		}},
		{65, false, "DescribeTransactions", kerr.TransactionalIDAuthorizationFailed.Code, func(ctx context.Context, cl *kgo.Client, p string) (int16, error) {
			req := kmsg.NewPtrDescribeTransactionsRequest()
			req.TransactionalIDs = []string{p + "x"}
			resp, err := req.RequestWith(ctx, cl)
			if err != nil || len(resp.TransactionStates) == 0 {
				return -1, err
			}
			return resp.TransactionStates[0].ErrorCode, nil
		}},
		{75, false, "DescribeTopicPartitions", kerr.TopicAuthorizationFailed.Code, func(ctx context.Context, cl *kgo.Client, p string) (int16, error) {
			req := kmsg.NewPtrDescribeTopicPartitionsRequest()
			req.Topics, req.ResponsePartitionLimit = []kmsg.DescribeTopicPartitionsRequestTopic{{Topic: p + "t"}}, 100
			resp, err := req.RequestWith(ctx, cl)
			if err != nil || len(resp.Topics) == 0 {
				return -1, err
			}
			return resp.Topics[0].ErrorCode, nil
		}},
		{33, true, "AlterConfigs (broker)", kerr.ClusterAuthorizationFailed.Code, func(ctx context.Context, cl *kgo.Client, p string) (int16, error) {
			req := kmsg.NewPtrAlterConfigsRequest()
			rr := kmsg.NewAlterConfigsRequestResource()
			rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeBroker, "1"
			req.Resources, req.ValidateOnly = append(req.Resources, rr), true
			resp, err := req.RequestWith(ctx, cl)
			if err != nil || len(resp.Resources) == 0 {
				return -1, err
			}
			return resp.Resources[0].ErrorCode, nil
		}},
		{27, true, "WriteTxnMarkers", kerr.ClusterAuthorizationFailed.Code, func(ctx context.Context, cl *kgo.Client, p string) (int16, error) {
			req := kmsg.NewPtrWriteTxnMarkersRequest()
			m := kmsg.NewWriteTxnMarkersRequestMarker()
			m.ProducerID, m.Topics = 1, []kmsg.WriteTxnMarkersRequestMarkerTopic{{Topic: "nope", Partitions: []int32{0}}}
			req.Markers = append(req.Markers, m)
			resp, err := direct[*kmsg.WriteTxnMarkersResponse](ctx, cl, req)
			if err != nil || len(resp.Markers) == 0 || len(resp.Markers[0].Topics) == 0 {
				return -1, err
			}
			return resp.Markers[0].Topics[0].Partitions[0].ErrorCode, nil
		}},
		{29, true, "DescribeAcls", kerr.ClusterAuthorizationFailed.Code, func(ctx context.Context, cl *kgo.Client, p string) (int16, error) {
			req := kmsg.NewPtrDescribeACLsRequest()
			req.ResourceType, req.ResourcePatternType, req.Operation, req.PermissionType = kmsg.ACLResourceTypeAny, kmsg.ACLResourcePatternTypeAny, kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
			resp, err := req.RequestWith(ctx, cl)
			if err != nil {
				return -1, err
			}
			return resp.ErrorCode, nil
		}},
		{31, true, "DeleteAcls", kerr.ClusterAuthorizationFailed.Code, func(ctx context.Context, cl *kgo.Client, p string) (int16, error) {
			req := kmsg.NewPtrDeleteACLsRequest()
			f := kmsg.NewDeleteACLsRequestFilter()
			f.ResourceType, f.ResourceName, f.ResourcePatternType = kmsg.ACLResourceTypeTopic, kmsg.StringPtr("no-such-acl"), kmsg.ACLResourcePatternTypeLiteral
			f.Operation, f.PermissionType = kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
			req.Filters = append(req.Filters, f)
			resp, err := req.RequestWith(ctx, cl)
			if err != nil || len(resp.Results) == 0 {
				return -1, err
			}
			return resp.Results[0].ErrorCode, nil
		}},
		{34, true, "AlterReplicaLogDirs", kerr.ClusterAuthorizationFailed.Code, func(ctx context.Context, cl *kgo.Client, p string) (int16, error) {
			req := kmsg.NewPtrAlterReplicaLogDirsRequest()
			d := kmsg.NewAlterReplicaLogDirsRequestDir()
			d.Dir, d.Topics = "/nowhere", []kmsg.AlterReplicaLogDirsRequestDirTopic{{Topic: "nope", Partitions: []int32{0}}}
			req.Dirs = append(req.Dirs, d)
			resp, err := direct[*kmsg.AlterReplicaLogDirsResponse](ctx, cl, req)
			if err != nil || len(resp.Topics) == 0 {
				return -1, err
			}
			return resp.Topics[0].Partitions[0].ErrorCode, nil
		}},
		{35, true, "DescribeLogDirs", kerr.ClusterAuthorizationFailed.Code, func(ctx context.Context, cl *kgo.Client, p string) (int16, error) {
			req := kmsg.NewPtrDescribeLogDirsRequest()
			resp, err := direct[*kmsg.DescribeLogDirsResponse](ctx, cl, req)
			if err != nil {
				return -1, err
			}
			return resp.ErrorCode, nil
		}},
		{43, true, "ElectLeaders", kerr.ClusterAuthorizationFailed.Code, func(ctx context.Context, cl *kgo.Client, p string) (int16, error) {
			req := kmsg.NewPtrElectLeadersRequest()
			req.TimeoutMillis, req.Topics = 5000, []kmsg.ElectLeadersRequestTopic{{Topic: "nope", Partitions: []int32{0}}}
			resp, err := req.RequestWith(ctx, cl)
			if err != nil {
				return -1, err
			}
			return resp.ErrorCode, nil
		}},
		{45, true, "AlterPartitionReassignments", kerr.ClusterAuthorizationFailed.Code, func(ctx context.Context, cl *kgo.Client, p string) (int16, error) {
			req := kmsg.NewPtrAlterPartitionAssignmentsRequest()
			req.TimeoutMillis = 5000
			resp, err := req.RequestWith(ctx, cl)
			if err != nil {
				return -1, err
			}
			return resp.ErrorCode, nil
		}},
		{46, true, "ListPartitionReassignments", kerr.ClusterAuthorizationFailed.Code, func(ctx context.Context, cl *kgo.Client, p string) (int16, error) {
			req := kmsg.NewPtrListPartitionReassignmentsRequest()
			req.TimeoutMillis = 5000
			resp, err := req.RequestWith(ctx, cl)
			if err != nil {
				return -1, err
			}
			return resp.ErrorCode, nil
		}},
		{48, true, "DescribeClientQuotas", kerr.ClusterAuthorizationFailed.Code, func(ctx context.Context, cl *kgo.Client, p string) (int16, error) {
			req := kmsg.NewPtrDescribeClientQuotasRequest()
			resp, err := req.RequestWith(ctx, cl)
			if err != nil {
				return -1, err
			}
			return resp.ErrorCode, nil
		}},
		{49, true, "AlterClientQuotas", kerr.ClusterAuthorizationFailed.Code, func(ctx context.Context, cl *kgo.Client, p string) (int16, error) {
			req := kmsg.NewPtrAlterClientQuotasRequest()
			e := kmsg.NewAlterClientQuotasRequestEntry()
			e.Entity = []kmsg.AlterClientQuotasRequestEntryEntity{{Type: "user", Name: kmsg.StringPtr("u")}}
			e.Ops = []kmsg.AlterClientQuotasRequestEntryOp{{Key: "producer_byte_rate", Value: 1024}}
			req.Entries, req.ValidateOnly = append(req.Entries, e), true
			resp, err := req.RequestWith(ctx, cl)
			if err != nil || len(resp.Entries) == 0 {
				return -1, err
			}
			return resp.Entries[0].ErrorCode, nil
		}},
		{50, true, "DescribeUserScramCredentials", kerr.ClusterAuthorizationFailed.Code, func(ctx context.Context, cl *kgo.Client, p string) (int16, error) {
			resp, err := kmsg.NewPtrDescribeUserSCRAMCredentialsRequest().RequestWith(ctx, cl)
			if err != nil {
				return -1, err
			}
			return resp.ErrorCode, nil
		}},
		{51, true, "AlterUserScramCredentials", kerr.ClusterAuthorizationFailed.Code, func(ctx context.Context, cl *kgo.Client, p string) (int16, error) {
			// Deleting a credential nobody has: RESOURCE_NOT_FOUND when
			// allowed, so nothing is changed either way.
			req := kmsg.NewPtrAlterUserSCRAMCredentialsRequest()
			d := kmsg.NewAlterUserSCRAMCredentialsRequestDeletion()
			d.Name, d.Mechanism = p+"nobody", 1
			req.Deletions = append(req.Deletions, d)
			resp, err := req.RequestWith(ctx, cl)
			if err != nil || len(resp.Results) == 0 {
				return -1, err
			}
			return resp.Results[0].ErrorCode, nil
		}},
		{57, true, "UpdateFeatures", kerr.ClusterAuthorizationFailed.Code, func(ctx context.Context, cl *kgo.Client, p string) (int16, error) {
			req := kmsg.NewPtrUpdateFeaturesRequest()
			req.TimeoutMillis, req.ValidateOnly = 5000, true
			resp, err := req.RequestWith(ctx, cl)
			if err != nil {
				return -1, err
			}
			return resp.ErrorCode, nil
		}},
		{30, true, "CreateAcls", kerr.ClusterAuthorizationFailed.Code, func(ctx context.Context, cl *kgo.Client, p string) (int16, error) {
			req := kmsg.NewPtrCreateACLsRequest()
			c := kmsg.NewCreateACLsRequestCreation()
			c.ResourceType, c.ResourceName, c.ResourcePatternType = kmsg.ACLResourceTypeTopic, "probe", kmsg.ACLResourcePatternTypeLiteral
			c.Principal, c.Host, c.Operation, c.PermissionType = "User:probe", "*", kmsg.ACLOperationRead, kmsg.ACLPermissionTypeAllow
			req.Creations = append(req.Creations, c)
			resp, err := req.RequestWith(ctx, cl)
			if err != nil || len(resp.Results) == 0 {
				return -1, err
			}
			return resp.Results[0].ErrorCode, nil
		}},
	}
}

// TestACLAuthorizationMatrix drives the probes (raw requests through a kgo
// client) for resources whose ACLs allow User:ANONYMOUS, deny it, or do not
// mention it, on a broker per variant: the default (no ACL: denied), with
// allow.everyone.if.no.acl.found=true, and with ANONYMOUS a super user.
// Then cluster-level denial, the filtered listings, and the audit log.
func TestACLAuthorizationMatrix(t *testing.T) {
	ctx := testCtx(t, 90*time.Second)
	probes := authProbes()
	// check runs every probe on resources named prefix*; the topic, group
	// and transactional-id probes expect denied, the cluster probes
	// clusterDenied.
	check := func(t *testing.T, cl *kgo.Client, prefix string, denied, clusterDenied bool, skip map[string]bool) {
		t.Helper()
		for _, p := range probes {
			if skip[p.api] {
				continue
			}
			denied := denied
			if p.cluster {
				denied = clusterDenied
			}
			code, err := p.run(ctx, cl, prefix)
			// kgo routes some requests itself (a Metadata or FindCoordinator
			// first) and returns that step's Kafka error.
			if ke, ok := err.(*kerr.Error); ok {
				code, err = ke.Code, nil
			}
			if err != nil {
				t.Errorf("%s %s*: %v", p.api, prefix, err)
				continue
			}
			switch {
			case denied && code != p.code:
				t.Errorf("%s on %s*: code %d, want %d (%s)", p.api, prefix, code, p.code, kerr.ErrorForCode(p.code))
			case !denied && (code == kerr.TopicAuthorizationFailed.Code || code == kerr.GroupAuthorizationFailed.Code ||
				code == kerr.TransactionalIDAuthorizationFailed.Code || code == kerr.ClusterAuthorizationFailed.Code):
				t.Errorf("%s on %s*: denied (%s), want allowed", p.api, prefix, kerr.ErrorForCode(code))
			}
		}
	}

	t.Run("no acl, default", func(t *testing.T) {
		b := startBroker(t, t.TempDir(), stdAuthorizer)
		// Every API the broker serves has a probe, but for those Kafka
		// checks nothing on (ApiVersions, DescribeCluster, telemetry).
		vs, err := kmsg.NewPtrApiVersionsRequest().RequestWith(ctx, newClient(t, b.Addr))
		if err != nil {
			t.Fatal(err)
		}
		// ListGroups and ListTransactions deny nothing: they filter (ListGroups
		// is checked below).
		probed := map[int16]bool{18: true, 60: true, 71: true, 72: true, 16: true, 66: true, 17: true, 36: true}
		for _, p := range probes {
			probed[p.key] = true
		}
		for _, k := range vs.ApiKeys {
			if !probed[k.ApiKey] {
				t.Errorf("api key %d (%s) is served but not probed", k.ApiKey, kmsg.NameForKey(k.ApiKey))
			}
		}
		cl := newClient(t, b.Addr, kgo.RecordRetries(0), kgo.ProducerLinger(0), kgo.DisableIdempotentWrite(),
			kgo.MaxVersions(probeVersions())) // Fetch by topic name (v12)
		check(t, cl, "other.", true, true, nil)
		adm := newAdmin(t, b.Addr)
		res, err := adm.CreateACLs(ctx, newACLs().Allow(anon).Topics("x").Operations(kadm.OpRead))
		if err != nil || res[0].Err != kerr.ClusterAuthorizationFailed {
			t.Errorf("CreateAcls without ALTER on the cluster: %v %+v", err, res)
		}
	})

	t.Run("allow everyone if no acl", func(t *testing.T) {
		audit := filepath.Join(t.TempDir(), "audit.log")
		b := startBroker(t, t.TempDir(), stdAuthorizer, "allow.everyone.if.no.acl.found=true", "fjord.audit.log.file="+audit)
		adm := newAdmin(t, b.Addr)
		for _, p := range []string{"ok.", "deny.", "other."} {
			createTopic(t, adm, p+"t", 1, nil)
		}
		for _, pattern := range []struct {
			prefix string
			allow  bool
		}{{"ok.", true}, {"deny.", false}} {
			bld := newACLs().Topics(pattern.prefix).Groups(pattern.prefix).TransactionalIDs(pattern.prefix).
				ResourcePatternType(kadm.ACLPatternPrefixed).Operations(kadm.OpAll)
			if pattern.allow {
				bld.Allow(anon)
			} else {
				bld.Deny(anon)
			}
			createACLs(t, ctx, adm, bld)
		}
		cl := newClient(t, b.Addr, kgo.RecordRetries(0), kgo.ProducerLinger(0), kgo.DisableIdempotentWrite(),
			kgo.MaxVersions(probeVersions())) // Fetch by topic name (v12)
		check(t, cl, "ok.", false, false, nil)
		// CREATE on the cluster (no ACL names it: allowed) covers every
		// topic, as in Kafka.
		check(t, cl, "deny.", true, false, map[string]bool{"CreateTopics": true, "InitProducerId (idempotent)": true})
		check(t, cl, "other.", false, false, nil) // not mentioned: allow.everyone.if.no.acl.found

		// Metadata of all topics lists only the describable ones.
		md, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, tp := range md.Topics {
			names = append(names, *tp.Topic)
		}
		if strings.Contains(strings.Join(names, ","), "deny.") || !strings.Contains(strings.Join(names, ","), "ok.t") {
			t.Errorf("metadata lists %v", names)
		}
		// ListGroups lists only the groups the principal may describe.
		gcl := newClient(t, b.Addr, kgo.ConsumerGroup("other.lg"), kgo.ConsumeTopics("other.t"))
		gcl.PollRecords(testCtx(t, 3*time.Second), 1)
		listed := func() []string {
			lg, err := kmsg.NewPtrListGroupsRequest().RequestWith(ctx, cl)
			if err != nil {
				t.Fatal(err)
			}
			var gs []string
			for _, g := range lg.Groups {
				gs = append(gs, g.Group)
			}
			return gs
		}
		if gs := listed(); !slices.Contains(gs, "other.lg") {
			t.Errorf("ListGroups before the deny: %v", gs)
		}
		createACLs(t, ctx, adm, newACLs().Deny(anon).Groups("other.lg").Operations(kadm.OpDescribe))
		if gs := listed(); !slices.Contains(gs, "other.lg") {
			t.Errorf("ListGroups with DESCRIBE on the cluster (no ACL names it) lists every group: %v", gs)
		}

		// Cluster-level: DENY ALL on the cluster (afterwards CreateAcls is
		// denied) block ElectLeaders and
		// the ACL APIs, and ListGroups now lists only describable groups.
		createACLs(t, ctx, adm, newACLs().Deny(anon).Clusters().Operations(kadm.OpAll))
		check(t, cl, "ok.", false, true, nil)
		if gs := listed(); slices.Contains(gs, "other.lg") {
			t.Errorf("ListGroups lists a group it may not describe: %v", gs)
		}
		el := kmsg.NewPtrElectLeadersRequest()
		el.TimeoutMillis = 5000
		elr, err := el.RequestWith(ctx, cl)
		if err != nil || elr.ErrorCode != kerr.ClusterAuthorizationFailed.Code {
			t.Errorf("ElectLeaders with ALTER denied: %v %+v", err, elr)
		}
		res, err := adm.CreateACLs(ctx, newACLs().Allow(anon).Topics("x").Operations(kadm.OpRead))
		if err != nil || res[0].Err != kerr.ClusterAuthorizationFailed {
			t.Errorf("CreateAcls with ALTER denied: %v %+v", err, res)
		}

		// The audit log: denials and admin requests, one JSON line each.
		var lines string
		for i := 0; i < 50; i++ {
			raw, _ := os.ReadFile(audit)
			lines = string(raw)
			if strings.Contains(lines, `"api":"ElectLeaders"`) {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		for _, want := range []string{`"principal":"User:ANONYMOUS"`, `"outcome":"denied"`, `"resource":"TOPIC:deny.t"`, `"api":"CreateACLs"`, `"outcome":"ok"`, `"client":"127.0.0.1"`} {
			if !strings.Contains(lines, want) {
				t.Errorf("audit log lacks %s:\n%s", want, lines)
			}
		}
	})

	t.Run("super user", func(t *testing.T) {
		b := startBroker(t, t.TempDir(), stdAuthorizer, "super.users=User:admin;"+anon)
		adm := newAdmin(t, b.Addr)
		createTopic(t, adm, "deny.t", 1, nil)
		createACLs(t, ctx, adm, newACLs().Deny(anon).Topics("*").Groups("*").TransactionalIDs("*").Operations(kadm.OpAll))
		cl := newClient(t, b.Addr, kgo.RecordRetries(0), kgo.ProducerLinger(0), kgo.DisableIdempotentWrite(),
			kgo.MaxVersions(probeVersions())) // Fetch by topic name (v12)
		check(t, cl, "deny.", false, false, nil)
	})
}

// TestACLsOnEveryNode: an ACL created through one node of three applies on
// every node as soon as it is answered.
func TestACLsOnEveryNode(t *testing.T) {
	ctx := testCtx(t, 60*time.Second)
	c := startCluster(t, 3, stdAuthorizer, "allow.everyone.if.no.acl.found=true")
	adm := newAdmin(t, c.Addr(1))
	resp, err := adm.CreateTopic(ctx, 1, 3, nil, "mf.settlement.eur")
	if err != nil || resp.Err != nil {
		t.Fatalf("create topic: %v %v", err, resp.Err)
	}
	createACLs(t, ctx, adm, newACLs().Deny(anon).Topics("mf.settlement.").ResourcePatternType(kadm.ACLPatternPrefixed).Operations(kadm.OpWrite))
	for _, id := range c.IDs() {
		cl := newClient(t, c.Addr(id))
		req := kmsg.NewPtrDescribeACLsRequest()
		req.ResourceType, req.ResourcePatternType, req.Operation, req.PermissionType = kmsg.ACLResourceTypeAny, kmsg.ACLResourcePatternTypeAny, kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
		// Read-your-writes: the ACL was answered only once every node had
		// applied it, so each describes it at once, without a retry.
		r, err := req.RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		if n := len(r.Resources); n != 1 {
			t.Fatalf("node %d describes %d resources right after CreateAcls was answered through node 1", id, n)
		}
		preq := kmsg.NewPtrProduceRequest()
		preq.Acks, preq.TimeoutMillis = -1, 5000
		pt := kmsg.NewProduceRequestTopic()
		pt.Topic, pt.TopicID = "mf.settlement.eur", resp.ID // v13 names it by id
		pp := kmsg.NewProduceRequestTopicPartition()
		pt.Partitions = append(pt.Partitions, pp)
		preq.Topics = append(preq.Topics, pt)
		presp, err := preq.RequestWith(ctx, cl)
		if err != nil || presp.Topics[0].Partitions[0].ErrorCode != kerr.TopicAuthorizationFailed.Code {
			t.Errorf("node %d: produce to a denied topic: %v %+v", id, err, presp)
		}
	}
}

// TestAcksAllRequired: fjord.produce.acks.all.required=true refuses acks=1
// with INVALID_REQUIRED_ACKS and takes acks=all; set live, it applies at
// once.
func TestAcksAllRequired(t *testing.T) {
	ctx := testCtx(t, 30*time.Second)
	b := startBroker(t, t.TempDir())
	adm := newAdmin(t, b.Addr)
	createTopic(t, adm, "mf.settlement.acks", 1, map[string]*string{"fjord.produce.acks.all.required": kmsg.StringPtr("true")})
	one := newClient(t, b.Addr, kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite(), kgo.RecordRetries(0))
	if err := one.ProduceSync(ctx, &kgo.Record{Topic: "mf.settlement.acks", Value: []byte("x")}).FirstErr(); err != kerr.InvalidRequiredAcks {
		t.Errorf("acks=1: %v, want INVALID_REQUIRED_ACKS", err)
	}
	all := newClient(t, b.Addr)
	if err := all.ProduceSync(ctx, &kgo.Record{Topic: "mf.settlement.acks", Value: []byte("x")}).FirstErr(); err != nil {
		t.Errorf("acks=all: %v", err)
	}
	createTopic(t, adm, "clicks", 1, nil)
	if err := one.ProduceSync(ctx, &kgo.Record{Topic: "clicks", Value: []byte("x")}).FirstErr(); err != nil {
		t.Errorf("acks=1 on a topic without the config: %v", err)
	}
	if _, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Name: "fjord.produce.acks.all.required", Value: kmsg.StringPtr("true")}}, "clicks"); err != nil {
		t.Fatal(err)
	}
	var err error
	for i := 0; i < 50; i++ {
		if err = one.ProduceSync(ctx, &kgo.Record{Topic: "clicks", Value: []byte("x")}).FirstErr(); err == kerr.InvalidRequiredAcks {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != kerr.InvalidRequiredAcks {
		t.Errorf("acks=1 after the config was set live: %v", err)
	}
}

// newACLs is a builder for LITERAL patterns unless told otherwise (kadm
// has no default for creations).
func newACLs() *kadm.ACLBuilder { return kadm.NewACLs().ResourcePatternType(kadm.ACLPatternLiteral) }

// probeVersions caps the probes' client at Kafka 3.0 (Fetch by topic name)
// plus DescribeTopicPartitions.
func probeVersions() *kversion.Versions {
	v := kversion.V3_0_0()
	v.SetMaxKeyVersion(75, 0)
	v.SetMaxKeyVersion(35, 4) // DescribeLogDirs: a top-level error code from v3
	// The next-generation group keys, at the versions fjord serves.
	for key, max := range map[int16]int16{68: 1, 69: 1, 76: 1, 77: 1, 78: 2, 79: 2, 83: 0, 84: 0, 85: 0, 86: 0, 87: 0, 90: 1, 91: 0, 92: 0} {
		v.SetMaxKeyVersion(key, max)
	}
	return v
}

// direct sends req to the seed broker itself, not where kgo would route
// it (kgo asks Metadata first for partition-addressed requests).
func direct[R kmsg.Response](ctx context.Context, cl *kgo.Client, req kmsg.Request) (R, error) {
	var zero R
	resp, err := cl.SeedBrokers()[0].Request(ctx, req)
	if err != nil {
		return zero, err
	}
	r, ok := resp.(R)
	if !ok {
		return zero, fmt.Errorf("response %T", resp)
	}
	return r, nil
}

// shareStateProbe sends a share-state RPC naming one partition of a
// topic id nobody has (a denial of CLUSTER_ACTION answers every partition
// named) and returns that partition's code.
func shareStateProbe(ctx context.Context, cl *kgo.Client, req kmsg.Request) (int16, error) {
	topics := reflect.ValueOf(req).Elem().FieldByName("Topics")
	topic := reflect.New(topics.Type().Elem()).Elem()
	parts := topic.FieldByName("Partitions")
	parts.Set(reflect.Append(parts, reflect.New(parts.Type().Elem()).Elem()))
	topics.Set(reflect.Append(topics, topic))
	resp, err := cl.SeedBrokers()[0].Request(ctx, req) // inter-broker: kgo routes none of them
	if err != nil {
		return -1, err
	}
	rt := reflect.ValueOf(resp).Elem().FieldByName("Topics")
	if rt.Len() == 0 || rt.Index(0).FieldByName("Partitions").Len() == 0 {
		return -1, fmt.Errorf("%T: no partition answered", resp)
	}
	return int16(rt.Index(0).FieldByName("Partitions").Index(0).FieldByName("ErrorCode").Int()), nil
}
