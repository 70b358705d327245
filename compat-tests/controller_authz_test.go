package compattests

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestControllerListenerAuthorizes: apache/kafka's single-node
// sasl_plaintext layout (CONTROLLER:PLAINTEXT) with the StandardAuthorizer
// and super.users=User:admin. An anonymous connection to the CONTROLLER
// port is a stranger: it may ask ApiVersions, as in Kafka, and
// everything else it sends (DescribeCluster too: Kafka's controller
// answers it only with ALTER on the cluster) is refused with Kafka's
// authorization error and audited — the grant of ALL on the cluster to
// User:mallory first of all, which an earlier Fjord accepted. Afterwards
// the admin sees no trace of it.
func TestControllerListenerAuthorizes(t *testing.T) {
	ex := startApacheSASLExample(t,
		"KAFKA_AUTHORIZER_CLASS_NAME=org.apache.kafka.metadata.authorizer.StandardAuthorizer",
		"KAFKA_SUPER_USERS=User:admin")
	ctx := testCtx(t, 60*time.Second)
	stranger, err := kgo.NewClient(kgo.SeedBrokers(ex.ctl), kgo.RequestRetries(0))
	if err != nil {
		t.Fatal(err)
	}
	defer stranger.Close()
	send := func(req kmsg.Request) kmsg.Response {
		t.Helper()
		c, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		resp, err := stranger.SeedBrokers()[0].Request(c, req)
		if err != nil {
			t.Fatalf("%s on the CONTROLLER listener: %v", kmsg.NameForKey(req.Key()), err)
		}
		return resp
	}
	denied := kerr.ClusterAuthorizationFailed.Code

	// The attack of issue 24: grant User:mallory ALL on the cluster.
	ca := kmsg.NewPtrCreateACLsRequest()
	c := kmsg.NewCreateACLsRequestCreation()
	c.ResourceType, c.ResourceName, c.ResourcePatternType = kmsg.ACLResourceTypeCluster, "kafka-cluster", kmsg.ACLResourcePatternTypeLiteral
	c.Principal, c.Host, c.Operation, c.PermissionType = "User:mallory", "*", kmsg.ACLOperationAll, kmsg.ACLPermissionTypeAllow
	ca.Creations = append(ca.Creations, c)
	if r := send(ca).(*kmsg.CreateACLsResponse); len(r.Results) != 1 || r.Results[0].ErrorCode != denied {
		t.Errorf("CreateAcls from a stranger: %+v, want CLUSTER_AUTHORIZATION_FAILED", r.Results)
	}

	// Brokers' own requests: registering a broker id, keeping it alive.
	reg := kmsg.NewPtrBrokerRegistrationRequest()
	reg.BrokerID, reg.ClusterID, reg.IncarnationID = 99, "4L6g3nShT-eMCtK--X86sw", [16]byte{9}
	if r := send(reg).(*kmsg.BrokerRegistrationResponse); r.ErrorCode != denied {
		t.Errorf("BrokerRegistration from a stranger: code %d, want CLUSTER_AUTHORIZATION_FAILED", r.ErrorCode)
	}
	hb := kmsg.NewPtrBrokerHeartbeatRequest()
	hb.BrokerID, hb.BrokerEpoch = 1, 1
	if r := send(hb).(*kmsg.BrokerHeartbeatResponse); r.ErrorCode != denied {
		t.Errorf("BrokerHeartbeat from a stranger: code %d, want CLUSTER_AUTHORIZATION_FAILED", r.ErrorCode)
	}
	ap := kmsg.NewPtrAllocateProducerIDsRequest()
	ap.BrokerID, ap.BrokerEpoch = 1, 1
	if r := send(ap).(*kmsg.AllocateProducerIDsResponse); r.ErrorCode != denied {
		t.Errorf("AllocateProducerIDs from a stranger: code %d, want CLUSTER_AUTHORIZATION_FAILED", r.ErrorCode)
	}

	// The metadata log holds every secret: neither its snapshot nor its
	// entries are handed to a stranger.
	fs := kmsg.NewPtrFetchSnapshotRequest()
	fst := kmsg.NewFetchSnapshotRequestTopic()
	fst.Topic = "__cluster_metadata"
	fst.Partitions = append(fst.Partitions, kmsg.NewFetchSnapshotRequestTopicPartition())
	fs.Topics = append(fs.Topics, fst)
	if r := send(fs).(*kmsg.FetchSnapshotResponse); r.ErrorCode != denied || len(r.Topics) != 0 {
		t.Errorf("FetchSnapshot from a stranger: code %d with %d topics, want CLUSTER_AUTHORIZATION_FAILED and nothing", r.ErrorCode, len(r.Topics))
	}
	f := kmsg.NewPtrFetchRequest()
	ft := kmsg.NewFetchRequestTopic()
	ft.Topic = "__cluster_metadata"
	fp := kmsg.NewFetchRequestTopicPartition()
	fp.PartitionMaxBytes = 1 << 20
	ft.Partitions = append(ft.Partitions, fp)
	f.Topics = append(f.Topics, ft)
	if r := send(f).(*kmsg.FetchResponse); r.ErrorCode != denied {
		t.Errorf("Fetch of the metadata log from a stranger: code %d, want CLUSTER_AUTHORIZATION_FAILED", r.ErrorCode)
	} else {
		for _, tp := range r.Topics {
			for _, p := range tp.Partitions {
				if len(p.RecordBatches) > 0 {
					t.Errorf("Fetch of the metadata log from a stranger returned %d bytes", len(p.RecordBatches))
				}
			}
		}
	}

	// Forwarded admin requests meet the ordinary ACLs.
	up := kmsg.NewPtrAlterUserSCRAMCredentialsRequest()
	u := kmsg.NewAlterUserSCRAMCredentialsRequestUpsertion()
	u.Name, u.Mechanism, u.Iterations, u.Salt, u.SaltedPassword = "mallory", 1, 4096, []byte("salt"), make([]byte, 32)
	up.Upsertions = append(up.Upsertions, u)
	if r := send(up).(*kmsg.AlterUserSCRAMCredentialsResponse); len(r.Results) != 1 || r.Results[0].ErrorCode != denied {
		t.Errorf("AlterUserScramCredentials from a stranger: %+v", r.Results)
	}
	ia := kmsg.NewPtrIncrementalAlterConfigsRequest()
	res := kmsg.NewIncrementalAlterConfigsRequestResource()
	res.ResourceType = kmsg.ConfigResourceTypeBroker
	cfg := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
	cfg.Name, cfg.Value = "super.users", kmsg.StringPtr("User:mallory")
	res.Configs = append(res.Configs, cfg)
	ia.Resources = append(ia.Resources, res)
	if r := send(ia).(*kmsg.IncrementalAlterConfigsResponse); len(r.Resources) != 1 || r.Resources[0].ErrorCode != denied {
		t.Errorf("IncrementalAlterConfigs super.users from a stranger: %+v", r.Resources)
	}
	ct := kmsg.NewPtrCreateTopicsRequest()
	ctt := kmsg.NewCreateTopicsRequestTopic()
	ctt.Topic, ctt.NumPartitions, ctt.ReplicationFactor = "mallory.topic", 1, 1
	ct.Topics = append(ct.Topics, ctt)
	if r := send(ct).(*kmsg.CreateTopicsResponse); len(r.Topics) != 1 || r.Topics[0].ErrorCode != kerr.TopicAuthorizationFailed.Code {
		t.Errorf("CreateTopics from a stranger: %+v", r.Topics)
	}

	// What Kafka lets anyone ask, and what it does not: the controllers'
	// DescribeCluster needs ALTER on the cluster (ControllerApis).
	av := kmsg.NewPtrApiVersionsRequest()
	av.ClientSoftwareName, av.ClientSoftwareVersion = "probe", "1.0"
	if r := send(av).(*kmsg.ApiVersionsResponse); r.ErrorCode != 0 || len(r.ApiKeys) == 0 {
		t.Errorf("ApiVersions on the CONTROLLER listener: %+v", r)
	}
	dc := kmsg.NewPtrDescribeClusterRequest()
	dc.EndpointType = 2
	if r := send(dc).(*kmsg.DescribeClusterResponse); r.ErrorCode != denied || len(r.Brokers) != 0 {
		t.Errorf("DescribeCluster of the controllers from a stranger: code %d, %d controllers, want CLUSTER_AUTHORIZATION_FAILED and none", r.ErrorCode, len(r.Brokers))
	}

	// The admin, on the client listener, sees no trace of any of it.
	adm := kadm.NewClient(newClient(t, ex.host, plainOpt("admin", "admin-secret")))
	acls, err := adm.DescribeACLs(ctx, kadm.NewACLs().AnyResource().ResourcePatternType(kadm.ACLPatternAny).Operations(kadm.OpAny).Allow().Deny())
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range acls {
		if r.Err != nil {
			t.Fatalf("DescribeAcls as admin: %v", r.Err)
		}
		if len(r.Described) != 0 {
			t.Errorf("ACLs exist after the stranger's attempts: %+v", r.Described)
		}
	}
	scram, err := adm.DescribeUserSCRAMs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := scram["mallory"]; ok {
		t.Error("a SCRAM credential for mallory exists")
	}
	md, err := adm.BrokerMetadata(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(md.Brokers) != 1 {
		t.Errorf("brokers after the stranger's registration: %v", md.Brokers.NodeIDs())
	}
	if td, err := adm.ListTopics(ctx, "mallory.topic"); err == nil && td.Has("mallory.topic") {
		t.Error("the stranger's topic exists")
	}
	bc, err := adm.DescribeBrokerConfigs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, rc := range bc {
		for _, c := range rc.Configs {
			if c.Key == "super.users" && c.Value != nil && strings.Contains(*c.Value, "mallory") {
				t.Errorf("super.users is %q", *c.Value)
			}
		}
	}

	// The refusal is audited, naming the listener and the stranger.
	ok := false
	for _, line := range strings.Split(ex.logs.String(), "\n") {
		if strings.Contains(line, `"audit":true`) && strings.Contains(line, `"listener":"controller"`) &&
			strings.Contains(line, `"principal":"User:ANONYMOUS"`) && strings.Contains(line, `"api":"CreateACLs"`) &&
			strings.Contains(line, `"outcome":"denied"`) {
			ok = true
		}
	}
	if !ok {
		t.Errorf("no audit line for the stranger's CreateAcls on the CONTROLLER listener:\n%s", tail(ex.logs.String()))
	}
}
