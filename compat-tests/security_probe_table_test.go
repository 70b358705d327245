package compattests

import (
	"fmt"
	"reflect"
	"slices"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// The table of TestSecurityProbe (security_probe_test.go): for every API
// key a Fjord listener may advertise, what a caller without rights sends
// and what Kafka answers it, on the client listeners (KafkaApis, with
// the StandardAuthorizer) and on the CONTROLLER listener (ControllerApis),
// and the super user's harmless request. A listener advertising a key
// missing here fails the test: a new key needs its row, written from
// Kafka's handler for it.

// spKey is one API key's row.
type spKey struct {
	// client: sent by alice on the client listeners (the first one also
	// before authentication, where Kafka closes the connection).
	client []spAttack
	// ctl: sent by an anonymous connection on the CONTROLLER listener.
	ctl []spAttack
	// harmless: the super user's request, which must be allowed and
	// change nothing the snapshot holds; harmlessCheck, what its answer
	// must show beyond that.
	harmless      func(*spEnv) kmsg.Request
	harmlessCheck func(*spEnv, kmsg.Response) string
	// mutation: a refusal must leave an audit line.
	mutation bool
}

var spAllowed = spOutcome{allowed: true}

// spDeny is a denial with code at each path.
func spDeny(code int16, paths ...string) spOutcome {
	o := spOutcome{}
	for _, p := range paths {
		o.codes = append(o.codes, spCodeAt{p, code})
	}
	return o
}

// with adds a check to o.
func (o spOutcome) with(check func(*spEnv, kmsg.Response) string) spOutcome {
	o.check = check
	return o
}

func spTable() map[int16]spKey {
	t := map[int16]spKey{
		0: {
			client: []spAttack{{"produce to the topic", spProduce, spDeny(spTopicDenied, "Topics[*].Partitions[*].ErrorCode")}},
			// Admin's record lands in the topic; the snapshot does not
			// hold its end offsets.
			harmless: spProduce,
		},
		1: {
			client: []spAttack{
				{"fetch the topic as a consumer", spFetch(-1), spDeny(spTopicDenied, "Topics[*].Partitions[*].ErrorCode").with(spNoRecords)},
				{"fetch the topic as follower 1", spFetch(1), spDeny(spTopicDenied, "Topics[*].Partitions[*].ErrorCode").with(spNoRecords)},
			},
			// ControllerApis.handleFetch: CLUSTER_ACTION, top level.
			ctl:      []spAttack{{"fetch the metadata log as replica 99", spFetchMetadataLog, spDeny(spClusterDenied, "ErrorCode").with(spNoRecords)}},
			harmless: spFetch(-1),
			harmlessCheck: func(e *spEnv, r kmsg.Response) string {
				for _, tp := range r.(*kmsg.FetchResponse).Topics {
					for _, p := range tp.Partitions {
						if p.ErrorCode == 0 && len(p.RecordBatches) > 0 {
							return ""
						}
					}
				}
				return "admin's fetch of partition 0 read nothing"
			},
		},
		2: {
			client:   []spAttack{{"list the topic's offsets", spListOffsets, spDeny(spTopicDenied, "Topics[*].Partitions[*].ErrorCode")}},
			harmless: spListOffsets,
		},
		3: {
			client: []spAttack{
				{"metadata of the topic, and auto-creation of mallory.auto", func(e *spEnv) kmsg.Request {
					return spMetadata(true, e.topic, "mallory.auto")
				}, spDeny(spTopicDenied, "Topics[0].ErrorCode", "Topics[1].ErrorCode").with(func(_ *spEnv, r kmsg.Response) string {
					for _, tp := range r.(*kmsg.MetadataResponse).Topics {
						if len(tp.Partitions) > 0 {
							return fmt.Sprintf("a refused topic's partitions are shown: %+v", tp)
						}
					}
					return ""
				})},
				{"metadata of every topic", func(*spEnv) kmsg.Request { return spMetadata(false) }, spAllowed.with(func(_ *spEnv, r kmsg.Response) string {
					if ts := r.(*kmsg.MetadataResponse).Topics; len(ts) > 0 {
						return fmt.Sprintf("lists %d topics to a principal that may describe none", len(ts))
					}
					return ""
				})},
			},
			harmless: func(e *spEnv) kmsg.Request { return spMetadata(false, e.topic) },
			harmlessCheck: func(e *spEnv, r kmsg.Response) string {
				if ts := r.(*kmsg.MetadataResponse).Topics; len(ts) != 1 || ts[0].ErrorCode != 0 || len(ts[0].Partitions) != 2 {
					return fmt.Sprintf("admin's Metadata of the topic: %s", spFmtCodes(spCodes(r)))
				}
				return ""
			},
		},
		8: {
			client: []spAttack{{"rewind the group's offset", func(e *spEnv) kmsg.Request { return spOffsetCommit(e, e.group) },
				spDeny(spGroupDenied, "Topics[*].Partitions[*].ErrorCode")}},
			harmless: func(e *spEnv) kmsg.Request { return spOffsetCommit(e, spAdminName+"group") },
		},
		9: {
			client: []spAttack{{"fetch the group's offsets", spOffsetFetch, spDeny(spGroupDenied, "Groups[*].ErrorCode").with(func(_ *spEnv, r kmsg.Response) string {
				for _, g := range r.(*kmsg.OffsetFetchResponse).Groups {
					if len(g.Topics) > 0 {
						return fmt.Sprintf("a refused group's offsets are shown: %+v", g.Topics)
					}
				}
				return ""
			})}},
			harmless: spOffsetFetch,
			harmlessCheck: func(e *spEnv, r kmsg.Response) string {
				for _, g := range r.(*kmsg.OffsetFetchResponse).Groups {
					for _, tp := range g.Topics {
						if tp.Topic == e.topic || tp.TopicID == e.topicID { // v10 names topics by id
							return ""
						}
					}
				}
				return "admin's OffsetFetch shows no offset of the group"
			},
		},
		10: {
			client: []spAttack{
				{"find the group's coordinator", spFindCoordinator(0), spDeny(spGroupDenied, "Coordinators[*].ErrorCode")},
				{"find the transaction's coordinator", spFindCoordinator(1), spDeny(spTxnDenied, "Coordinators[*].ErrorCode")},
			},
			harmless: spFindCoordinator(0),
		},
		11: {
			client: []spAttack{{"join the group", func(e *spEnv) kmsg.Request { return spJoinGroup(e.group) }, spDeny(spGroupDenied, "ErrorCode")}},
			// MEMBER_ID_REQUIRED, at once: a member id, no rebalance.
			harmless: func(*spEnv) kmsg.Request { return spJoinGroup(spAdminName + "join") },
		},
		12: {
			client:   []spAttack{{"heartbeat in the group", func(e *spEnv) kmsg.Request { return spHeartbeat(e.group) }, spDeny(spGroupDenied, "ErrorCode")}},
			harmless: func(*spEnv) kmsg.Request { return spHeartbeat(spAdminName + "join") },
		},
		13: {
			client:   []spAttack{{"leave the group", func(e *spEnv) kmsg.Request { return spLeaveGroup(e.group) }, spDeny(spGroupDenied, "ErrorCode")}},
			harmless: func(*spEnv) kmsg.Request { return spLeaveGroup(spAdminName + "join") },
		},
		14: {
			client:   []spAttack{{"sync the group", func(e *spEnv) kmsg.Request { return spSyncGroup(e.group) }, spDeny(spGroupDenied, "ErrorCode")}},
			harmless: func(*spEnv) kmsg.Request { return spSyncGroup(spAdminName + "join") },
		},
		15: {
			client: []spAttack{{"describe the group", spDescribeGroups, spDeny(spGroupDenied, "Groups[*].ErrorCode").with(func(_ *spEnv, r kmsg.Response) string {
				for _, g := range r.(*kmsg.DescribeGroupsResponse).Groups {
					if len(g.Members) > 0 || g.State != "" {
						return fmt.Sprintf("a refused group is described: %+v", g)
					}
				}
				return ""
			})}},
			harmless: spDescribeGroups,
		},
		16: {
			// Kafka lists only the groups the principal may describe.
			client: []spAttack{{"list the groups", func(*spEnv) kmsg.Request { return kmsg.NewPtrListGroupsRequest() }, spAllowed.with(func(_ *spEnv, r kmsg.Response) string {
				if gs := r.(*kmsg.ListGroupsResponse).Groups; len(gs) > 0 {
					return fmt.Sprintf("lists %+v to a principal that may describe no group", gs)
				}
				return ""
			})}},
			harmless: func(*spEnv) kmsg.Request { return kmsg.NewPtrListGroupsRequest() },
			harmlessCheck: func(e *spEnv, r kmsg.Response) string {
				if !slices.ContainsFunc(r.(*kmsg.ListGroupsResponse).Groups, func(g kmsg.ListGroupsResponseGroup) bool { return g.Group == e.group }) {
					return "admin's ListGroups does not list the group"
				}
				return ""
			},
		},
		17: {
			// Needs no ACL. After authentication Kafka answers
			// ILLEGAL_SASL_STATE or starts re-authentication (KIP-368).
			client:   []spAttack{{"SASL handshake", spSASLHandshake, spAllowed}},
			harmless: spSASLHandshake,
		},
		18: {
			client:   []spAttack{{"ApiVersions", spApiVersions, spAllowed}},
			ctl:      []spAttack{{"ApiVersions", spApiVersions, spAllowed}},
			harmless: spApiVersions,
		},
		19: {
			client: []spAttack{{"create mallory.topic", func(*spEnv) kmsg.Request { return spCreateTopics(false, "mallory.topic") },
				spDeny(spTopicDenied, "Topics[*].ErrorCode")}},
			harmless: func(*spEnv) kmsg.Request { return spCreateTopics(true, spAdminName+"validate") },
			mutation: true,
		},
		20: {
			client:   []spAttack{{"delete the topic", func(e *spEnv) kmsg.Request { return spDeleteTopics(e.topic) }, spDeny(spTopicDenied, "Topics[*].ErrorCode")}},
			harmless: func(*spEnv) kmsg.Request { return spDeleteTopics(spAdminName + "none") },
			mutation: true,
		},
		21: {
			client: []spAttack{{"delete every record of the topic", func(e *spEnv) kmsg.Request { return spDeleteRecords(e, -1) },
				spDeny(spTopicDenied, "Topics[*].Partitions[*].ErrorCode")}},
			harmless: func(e *spEnv) kmsg.Request { return spDeleteRecords(e, 0) }, // below offset 0: nothing
			mutation: true,
		},
		22: {
			client: []spAttack{
				{"fence the transactional producer", func(e *spEnv) kmsg.Request { return spInitProducerID(&e.txn) }, spDeny(spTxnDenied, "ErrorCode")},
				// IDEMPOTENT_WRITE on the cluster or WRITE on some topic.
				{"an idempotent producer id", func(*spEnv) kmsg.Request { return spInitProducerID(nil) }, spDeny(spClusterDenied, "ErrorCode")},
			},
			harmless: func(*spEnv) kmsg.Request { return spInitProducerID(nil) },
		},
		23: {
			client:   []spAttack{{"the topic's leader epochs", spOffsetForLeaderEpoch, spDeny(spTopicDenied, "Topics[*].Partitions[*].ErrorCode")}},
			harmless: spOffsetForLeaderEpoch,
		},
		24: {
			// v4+ is broker-to-broker: CLUSTER_ACTION, top level.
			client: []spAttack{{"add the topic to the transaction", func(e *spEnv) kmsg.Request { return spAddPartitionsToTxn(e.txn, e.pid, e.epoch, false) },
				spDeny(spClusterDenied, "ErrorCode")}},
			harmless: func(*spEnv) kmsg.Request { return spAddPartitionsToTxn(spAdminName+"txn", 1<<40, 0, true) },
		},
		25: {
			client: []spAttack{{"add the group to the transaction", func(e *spEnv) kmsg.Request { return spAddOffsetsToTxn(e.txn, e.pid, e.epoch, e.group) },
				spDeny(spTxnDenied, "ErrorCode")}},
			harmless: func(*spEnv) kmsg.Request { return spAddOffsetsToTxn(spAdminName+"txn", 1<<40, 0, spAdminName+"group") },
		},
		26: {
			client:   []spAttack{{"abort the transaction", func(e *spEnv) kmsg.Request { return spEndTxn(e.txn, e.pid, e.epoch) }, spDeny(spTxnDenied, "ErrorCode")}},
			harmless: func(*spEnv) kmsg.Request { return spEndTxn(spAdminName+"txn", 1<<40, 0) },
		},
		27: {
			client: []spAttack{{"write an abort marker into the topic", func(e *spEnv) kmsg.Request { return spWriteTxnMarkers(e.topic, e.pid, e.epoch) },
				spDeny(spClusterDenied, "Markers[*].Topics[*].Partitions[*].ErrorCode")}},
			// A topic that does not exist: no marker is written.
			harmless: func(*spEnv) kmsg.Request { return spWriteTxnMarkers(spAdminName+"none", 1<<40, 0) },
			mutation: true,
		},
		28: {
			client: []spAttack{{"commit the group's offset in the transaction", func(e *spEnv) kmsg.Request { return spTxnOffsetCommit(e, e.txn, e.group, e.pid, e.epoch) },
				spDeny(spTxnDenied, "Topics[*].Partitions[*].ErrorCode")}},
			// A pending offset of admin's own group under a producer id
			// no one has.
			harmless: func(e *spEnv) kmsg.Request {
				return spTxnOffsetCommit(e, spAdminName+"txn", spAdminName+"group", 1<<40, 0)
			},
		},
		29: {
			client: []spAttack{{"describe every ACL", func(*spEnv) kmsg.Request { return spDescribeAllACLs() }, spDeny(spClusterDenied, "ErrorCode").with(func(_ *spEnv, r kmsg.Response) string {
				if rs := r.(*kmsg.DescribeACLsResponse).Resources; len(rs) > 0 {
					return fmt.Sprintf("ACLs shown to a principal refused: %+v", rs)
				}
				return ""
			})}},
			harmless: func(*spEnv) kmsg.Request { return spDescribeAllACLs() },
			harmlessCheck: func(e *spEnv, r kmsg.Response) string {
				for _, res := range r.(*kmsg.DescribeACLsResponse).Resources {
					if res.ResourceName == e.topic && len(res.ACLs) == 1 && res.ACLs[0].Principal == "User:carol" {
						return ""
					}
				}
				return "admin's DescribeAcls does not show the set-up's ACL"
			},
		},
		30: {
			client: []spAttack{{"grant User:mallory ALL on the cluster", func(*spEnv) kmsg.Request {
				return spCreateACL(kmsg.ACLResourceTypeCluster, "kafka-cluster", "User:mallory", kmsg.ACLOperationAll)
			}, spDeny(spClusterDenied, "Results[*].ErrorCode")}},
			harmless: func(*spEnv) kmsg.Request { return spThrowawayACL() },
			harmlessCheck: func(_ *spEnv, r kmsg.Response) string {
				if rs := r.(*kmsg.CreateACLsResponse).Results; len(rs) != 1 || rs[0].ErrorCode != 0 {
					return fmt.Sprintf("admin's throwaway ACL was not created: %+v", rs)
				}
				return ""
			},
			mutation: true,
		},
		31: {
			client: []spAttack{{"delete every ACL", func(*spEnv) kmsg.Request { return spDeleteACLs(nil) }, spDeny(spClusterDenied, "Results[*].ErrorCode")}},
			harmless: func(*spEnv) kmsg.Request {
				c := spThrowawayACL().Creations[0]
				return spDeleteACLs(&c)
			},
			harmlessCheck: func(_ *spEnv, r kmsg.Response) string {
				if rs := r.(*kmsg.DeleteACLsResponse).Results; len(rs) != 1 || rs[0].ErrorCode != 0 || len(rs[0].MatchingACLs) != 1 {
					return fmt.Sprintf("admin's throwaway ACL was not deleted (exactly): %+v", rs)
				}
				return ""
			},
			mutation: true,
		},
		32: {
			client: []spAttack{{"describe the cluster default, broker 1 and topic configs", spDescribeConfigs,
				spByResource("Resources", spNoConfigs)}},
			harmless: spDescribeConfigs,
		},
		33: {
			client: []spAttack{{"set super.users and the topic's retention.ms (AlterConfigs)", func(e *spEnv) kmsg.Request { return spAlterConfigs(e, false) },
				spByResource("Resources", nil)}},
			harmless: func(e *spEnv) kmsg.Request { return spAlterConfigs(e, true) },
			mutation: true,
		},
		34: {
			client: []spAttack{{"move the topic's partition to /tmp/mallory", func(e *spEnv) kmsg.Request { return spAlterReplicaLogDirs("/tmp/mallory", e.topic) },
				spDeny(spClusterDenied, "Topics[*].Partitions[*].ErrorCode")}},
			harmless: func(*spEnv) kmsg.Request { return spAlterReplicaLogDirs("/probe/admin/none", spAdminName+"none") },
			mutation: true,
		},
		35: {
			client: []spAttack{{"describe every log dir", func(*spEnv) kmsg.Request { return kmsg.NewPtrDescribeLogDirsRequest() }, spDeny(spClusterDenied, "ErrorCode").with(func(_ *spEnv, r kmsg.Response) string {
				if ds := r.(*kmsg.DescribeLogDirsResponse).Dirs; len(ds) > 0 {
					return fmt.Sprintf("log dirs shown to a principal refused: %+v", ds)
				}
				return ""
			})}},
			harmless: func(*spEnv) kmsg.Request { return kmsg.NewPtrDescribeLogDirsRequest() },
		},
		36: {
			// Needs no ACL; after authentication Kafka answers
			// ILLEGAL_SASL_STATE.
			client:   []spAttack{{"SASL authenticate as alice again", spSASLAuthenticate, spAllowed}},
			harmless: spSASLAuthenticate,
		},
		37: {
			client:   []spAttack{{"grow the topic to 5 partitions", func(e *spEnv) kmsg.Request { return spCreatePartitions(e.topic, 5, false) }, spDeny(spTopicDenied, "Topics[*].ErrorCode")}},
			harmless: func(e *spEnv) kmsg.Request { return spCreatePartitions(e.topic, 3, true) },
			mutation: true,
		},
		42: {
			client:   []spAttack{{"delete the group", func(e *spEnv) kmsg.Request { return spDeleteGroups(e.group) }, spDeny(spGroupDenied, "Groups[*].ErrorCode")}},
			harmless: func(*spEnv) kmsg.Request { return spDeleteGroups(spAdminName + "none") },
			mutation: true,
		},
		43: {
			client:   []spAttack{{"an unclean election on the topic", func(e *spEnv) kmsg.Request { return spElectLeaders(e.topic, 1) }, spDeny(spClusterDenied, "ErrorCode")}},
			harmless: func(e *spEnv) kmsg.Request { return spElectLeaders(e.topic, 0) }, // preferred: ELECTION_NOT_NEEDED
			mutation: true,
		},
		44: {
			client: []spAttack{{"set super.users and the topic's retention.ms (IncrementalAlterConfigs)", func(e *spEnv) kmsg.Request { return spIncrementalAlterConfigs(e, false) },
				spByResource("Resources", nil)}},
			harmless: func(e *spEnv) kmsg.Request { return spIncrementalAlterConfigs(e, true) },
			mutation: true,
		},
		45: {
			client: []spAttack{{"reassign the topic's partition to broker 99", func(e *spEnv) kmsg.Request { return spAlterReassignments(e.topic, []int32{99}) },
				spDeny(spClusterDenied, "ErrorCode")}},
			harmless: func(e *spEnv) kmsg.Request { return spAlterReassignments(e.topic, nil) }, // cancel: NO_REASSIGNMENT_IN_PROGRESS
			mutation: true,
		},
		46: {
			client: []spAttack{{"list every reassignment", func(*spEnv) kmsg.Request { return kmsg.NewPtrListPartitionReassignmentsRequest() },
				spDeny(spClusterDenied, "ErrorCode").with(func(_ *spEnv, r kmsg.Response) string {
					if ts := r.(*kmsg.ListPartitionReassignmentsResponse).Topics; len(ts) > 0 {
						return fmt.Sprintf("reassignments shown to a principal refused: %+v", ts)
					}
					return ""
				})}},
			harmless: func(*spEnv) kmsg.Request { return kmsg.NewPtrListPartitionReassignmentsRequest() },
		},
		47: {
			client:   []spAttack{{"delete the group's offset", func(e *spEnv) kmsg.Request { return spOffsetDelete(e.group, e.topic) }, spDeny(spGroupDenied, "ErrorCode")}},
			harmless: func(e *spEnv) kmsg.Request { return spOffsetDelete(spAdminName+"none", e.topic) },
			mutation: true,
		},
		48: {
			client: []spAttack{{"describe every quota", func(*spEnv) kmsg.Request { return kmsg.NewPtrDescribeClientQuotasRequest() }, spDeny(spClusterDenied, "ErrorCode").with(func(_ *spEnv, r kmsg.Response) string {
				if es := r.(*kmsg.DescribeClientQuotasResponse).Entries; len(es) > 0 {
					return fmt.Sprintf("quotas shown to a principal refused: %+v", es)
				}
				return ""
			})}},
			harmless: func(*spEnv) kmsg.Request { return kmsg.NewPtrDescribeClientQuotasRequest() },
			harmlessCheck: func(e *spEnv, r kmsg.Response) string {
				if len(r.(*kmsg.DescribeClientQuotasResponse).Entries) == 0 {
					return "admin's DescribeClientQuotas shows no quota"
				}
				return ""
			},
		},
		49: {
			client: []spAttack{{"unlimit mallory and lift the probe user's quota", func(e *spEnv) kmsg.Request { return spAlterQuotas(e, false) },
				spDeny(spClusterDenied, "Entries[0].ErrorCode", "Entries[1].ErrorCode")}},
			harmless: func(e *spEnv) kmsg.Request { return spAlterQuotas(e, true) },
			mutation: true,
		},
		50: {
			client: []spAttack{{"describe every SCRAM credential", func(*spEnv) kmsg.Request { return kmsg.NewPtrDescribeUserSCRAMCredentialsRequest() },
				spDeny(spClusterDenied, "ErrorCode").with(func(_ *spEnv, r kmsg.Response) string {
					for _, res := range r.(*kmsg.DescribeUserSCRAMCredentialsResponse).Results {
						if len(res.CredentialInfos) > 0 {
							return fmt.Sprintf("credentials shown to a principal refused: %+v", res)
						}
					}
					return ""
				})}},
			harmless: func(*spEnv) kmsg.Request { return kmsg.NewPtrDescribeUserSCRAMCredentialsRequest() },
		},
		51: {
			client: []spAttack{{"create mallory's SCRAM credential and delete the probe user's", func(e *spEnv) kmsg.Request { return spAlterSCRAM("mallory", e.user) },
				spDeny(spClusterDenied, "Results[0].ErrorCode", "Results[1].ErrorCode")}},
			harmless: func(*spEnv) kmsg.Request { return spAlterSCRAM("", spAdminName+"none") }, // RESOURCE_NOT_FOUND
			mutation: true,
		},
		56: {
			// ControllerApis: CLUSTER_ACTION, top level.
			ctl:      []spAttack{{"shrink the topic's ISR to broker 99", spAlterPartition, spDeny(spClusterDenied, "ErrorCode")}},
			mutation: true,
		},
		// Fjord's private RemoteLogSegment (tiered storage): a leader's
		// remote segment metadata, CLUSTER_ACTION as AlterPartition. Kafka
		// has no such key (its RLMM is a topic), so no Kafka answer to
		// match: the same as AlterPartition's.
		spRemoteLogSegmentKey: {
			ctl:      []spAttack{{"record a remote segment of the topic as broker 99's upload", spRemoteLogSegment, spDeny(spClusterDenied, "ErrorCode")}},
			mutation: true,
		},
		57: {
			client: []spAttack{{"downgrade metadata.version to 1 (unsafe)", func(e *spEnv) kmsg.Request { return spUpdateFeatures(1, 3, false) },
				spDeny(spClusterDenied, "ErrorCode")}},
			harmless: func(e *spEnv) kmsg.Request { return spUpdateFeatures(e.mvLevel, 1, true) },
			mutation: true,
		},
		59: {
			ctl: []spAttack{{"fetch the metadata snapshot", spFetchSnapshot, spDeny(spClusterDenied, "ErrorCode").with(func(_ *spEnv, r kmsg.Response) string {
				for _, tp := range r.(*kmsg.FetchSnapshotResponse).Topics {
					for _, p := range tp.Partitions {
						if len(p.Bytes) > 0 {
							return fmt.Sprintf("%d bytes of the metadata snapshot handed out", len(p.Bytes))
						}
					}
				}
				return ""
			})}},
		},
		60: {
			// KafkaApis.handleDescribeCluster checks no ACL.
			client:   []spAttack{{"describe the brokers", spDescribeCluster(1), spAllowed}},
			harmless: spDescribeCluster(1),
			harmlessCheck: func(_ *spEnv, r kmsg.Response) string {
				if bs := r.(*kmsg.DescribeClusterResponse).Brokers; len(bs) != 1 || bs[0].NodeID != 1 {
					return fmt.Sprintf("admin's DescribeCluster lists %+v, want broker 1", bs)
				}
				return ""
			},
			// Kafka's ControllerApis.handleDescribeCluster asks ALTER on
			// the cluster ("unlike on the broker"), top level.
			ctl: []spAttack{{"describe the controllers", spDescribeCluster(2), spDeny(spClusterDenied, "ErrorCode").with(func(_ *spEnv, r kmsg.Response) string {
				if bs := r.(*kmsg.DescribeClusterResponse).Brokers; len(bs) > 0 {
					return fmt.Sprintf("controllers shown to a principal refused: %+v", bs)
				}
				return ""
			})}},
		},
		61: {
			client:   []spAttack{{"describe the topic's producers", spDescribeProducers, spDeny(spTopicDenied, "Topics[*].Partitions[*].ErrorCode")}},
			harmless: spDescribeProducers,
		},
		62: {
			ctl:      []spAttack{{"register broker 99", spBrokerRegistration, spDeny(spClusterDenied, "ErrorCode")}},
			mutation: true,
		},
		63: {
			ctl: []spAttack{{"fence broker 1 by its heartbeat", func(*spEnv) kmsg.Request {
				hb := kmsg.NewPtrBrokerHeartbeatRequest()
				hb.BrokerID, hb.BrokerEpoch, hb.WantFence = 1, 0, true
				return hb
			}, spDeny(spClusterDenied, "ErrorCode")}},
			mutation: true,
		},
		65: {
			client: []spAttack{{"describe the transaction", func(e *spEnv) kmsg.Request { return spDescribeTransactions(e.txn) },
				spDeny(spTxnDenied, "TransactionStates[*].ErrorCode").with(func(e *spEnv, r kmsg.Response) string {
					for _, x := range r.(*kmsg.DescribeTransactionsResponse).TransactionStates {
						if x.ProducerID == e.pid || x.State != "" || len(x.Topics) > 0 {
							return fmt.Sprintf("a refused transaction is described: %+v", x)
						}
					}
					return ""
				})}},
			harmless: func(e *spEnv) kmsg.Request { return spDescribeTransactions(e.txn) },
		},
		66: {
			// Kafka lists only the transactional ids the principal may describe.
			client: []spAttack{{"list the transactions", func(*spEnv) kmsg.Request { return kmsg.NewPtrListTransactionsRequest() }, spAllowed.with(func(_ *spEnv, r kmsg.Response) string {
				if xs := r.(*kmsg.ListTransactionsResponse).TransactionStates; len(xs) > 0 {
					return fmt.Sprintf("lists %+v to a principal that may describe no transactional id", xs)
				}
				return ""
			})}},
			harmless: func(*spEnv) kmsg.Request { return kmsg.NewPtrListTransactionsRequest() },
			harmlessCheck: func(e *spEnv, r kmsg.Response) string {
				if !slices.ContainsFunc(r.(*kmsg.ListTransactionsResponse).TransactionStates, func(x kmsg.ListTransactionsResponseTransactionState) bool {
					return x.TransactionalID == e.txn
				}) {
					return "admin's ListTransactions does not list the transaction"
				}
				return ""
			},
		},
		67: {
			ctl: []spAttack{{"allocate producer ids as broker 1", func(*spEnv) kmsg.Request {
				ap := kmsg.NewPtrAllocateProducerIDsRequest()
				ap.BrokerID, ap.BrokerEpoch = 1, 0
				return ap
			}, spDeny(spClusterDenied, "ErrorCode")}},
			mutation: true,
		},
		71: {
			// KIP-714: no ACL.
			client:   []spAttack{{"telemetry subscriptions", spGetTelemetry, spAllowed}},
			harmless: spGetTelemetry,
		},
		72: {
			client:   []spAttack{{"push telemetry", spPushTelemetry, spAllowed}},
			harmless: spPushTelemetry,
		},
		75: {
			client:   []spAttack{{"describe the topic's partitions", spDescribeTopicPartitions, spDeny(spTopicDenied, "Topics[*].ErrorCode")}},
			harmless: spDescribeTopicPartitions,
		},
		// KIP-848 and KIP-932 (issue 26). The admin's requests name groups
		// of its own (spAdminName*), which the snapshot leaves out.
		68: {
			client:   []spAttack{{"join the group with the consumer protocol", func(e *spEnv) kmsg.Request { return spConsumerHeartbeat(e.group, e.topic, 0) }, spDeny(spGroupDenied, "ErrorCode")}},
			harmless: func(e *spEnv) kmsg.Request { return spConsumerHeartbeat(spAdminName+"-848", e.topic, 1) },
		},
		69: {
			client:   []spAttack{{"describe the consumer group", func(e *spEnv) kmsg.Request { return spConsumerDescribe(e.group) }, spDeny(spGroupDenied, "Groups[*].ErrorCode")}},
			harmless: func(e *spEnv) kmsg.Request { return spConsumerDescribe(spAdminName + "-848") },
		},
		76: {
			client:   []spAttack{{"join a share group", func(e *spEnv) kmsg.Request { return spShareHeartbeat(e.group, e.topic, 0) }, spDeny(spGroupDenied, "ErrorCode")}},
			harmless: func(e *spEnv) kmsg.Request { return spShareHeartbeat(spAdminName+"-share", e.topic, 1) },
		},
		77: {
			client:   []spAttack{{"describe a share group", func(e *spEnv) kmsg.Request { return spShareDescribe(e.group) }, spDeny(spGroupDenied, "Groups[*].ErrorCode")}},
			harmless: func(e *spEnv) kmsg.Request { return spShareDescribe(spAdminName + "-share") },
		},
		78: {
			client:   []spAttack{{"share-fetch the topic", func(e *spEnv) kmsg.Request { return spShareFetch(e.group, e.topicID, 0) }, spDeny(spGroupDenied, "ErrorCode")}},
			harmless: func(e *spEnv) kmsg.Request { return spShareFetch(spAdminName+"-share", e.topicID, -1) },
		},
		79: {
			client:   []spAttack{{"acknowledge share records", func(e *spEnv) kmsg.Request { return spShareAck(e.group) }, spDeny(spGroupDenied, "ErrorCode")}},
			harmless: func(e *spEnv) kmsg.Request { return spShareAck(spAdminName + "-share") },
		},
		90: {
			client: []spAttack{{"describe share-group offsets", func(e *spEnv) kmsg.Request {
				req := kmsg.NewPtrDescribeShareGroupOffsetsRequest()
				rg := kmsg.NewDescribeShareGroupOffsetsRequestGroup()
				rg.GroupID = e.group
				req.Groups = append(req.Groups, rg)
				return req
			}, spDeny(spGroupDenied, "Groups[*].ErrorCode")}},
			harmless: func(e *spEnv) kmsg.Request {
				req := kmsg.NewPtrDescribeShareGroupOffsetsRequest()
				rg := kmsg.NewDescribeShareGroupOffsetsRequestGroup()
				rg.GroupID = spAdminName + "-share"
				req.Groups = append(req.Groups, rg)
				return req
			},
		},
		91: {
			client: []spAttack{{"alter share-group offsets", func(e *spEnv) kmsg.Request {
				req := kmsg.NewPtrAlterShareGroupOffsetsRequest()
				req.GroupID = e.group
				return req
			}, spDeny(spGroupDenied, "ErrorCode")}},
			harmless: func(e *spEnv) kmsg.Request {
				req := kmsg.NewPtrAlterShareGroupOffsetsRequest()
				req.GroupID = spAdminName + "-share"
				return req
			},
			mutation: true,
		},
		92: {
			client: []spAttack{{"delete share-group offsets", func(e *spEnv) kmsg.Request {
				req := kmsg.NewPtrDeleteShareGroupOffsetsRequest()
				req.GroupID = e.group
				return req
			}, spDeny(spGroupDenied, "ErrorCode")}},
			harmless: func(e *spEnv) kmsg.Request {
				req := kmsg.NewPtrDeleteShareGroupOffsetsRequest()
				req.GroupID = spAdminName + "-share"
				return req
			},
			mutation: true,
		},
	}
	// The share coordinator's state RPCs (83-87) are inter-broker:
	// CLUSTER_ACTION, every named partition refused.
	for k, mk := range map[int16]func() kmsg.Request{
		83: func() kmsg.Request { return kmsg.NewPtrInitializeShareGroupStateRequest() },
		84: func() kmsg.Request { return kmsg.NewPtrReadShareGroupStateRequest() },
		85: func() kmsg.Request { return kmsg.NewPtrWriteShareGroupStateRequest() },
		86: func() kmsg.Request { return kmsg.NewPtrDeleteShareGroupStateRequest() },
		87: func() kmsg.Request { return kmsg.NewPtrReadShareGroupStateSummaryRequest() },
	} {
		t[k] = spKey{
			client:   []spAttack{{"share-group state", func(e *spEnv) kmsg.Request { return spShareState(mk(), e.group) }, spDeny(spClusterDenied, "Topics[*].Partitions[*].ErrorCode")}},
			harmless: func(e *spEnv) kmsg.Request { return spShareState(mk(), spAdminName+"-share") },
			mutation: k == 83 || k == 85 || k == 86,
		}
	}
	// The keys the CONTROLLER listener answers as the broker's listener
	// does: Kafka's ControllerApis runs the same checks as KafkaApis for
	// these (CreateTopics, DeleteTopics, the ACL, config, partition,
	// election, reassignment, quota and SCRAM requests) and the SASL keys
	// need no ACL anywhere.
	for _, k := range []int16{17, 19, 20, 30, 31, 33, 36, 37, 43, 44, 45, 46, 49, 51} {
		r := t[k]
		r.ctl = r.client
		t[k] = r
	}
	return t
}

// spByResource: a denial of config resources, per resource as Kafka
// answers (ConfigHelper, ControllerApis): CLUSTER_AUTHORIZATION_FAILED for
// broker resources, TOPIC_AUTHORIZATION_FAILED for topics; Kafka answers
// the refused resources apart from the allowed ones, so the order is not
// the request's. field names the response's resource list.
func spByResource(field string, check func(*spEnv, kmsg.Response) string) spOutcome {
	return spOutcome{check: func(e *spEnv, r kmsg.Response) string {
		type res struct {
			typ  kmsg.ConfigResourceType
			name string
			code int16
		}
		var got []res
		switch r := r.(type) {
		case *kmsg.DescribeConfigsResponse:
			for _, x := range r.Resources {
				got = append(got, res{x.ResourceType, x.ResourceName, x.ErrorCode})
			}
		case *kmsg.AlterConfigsResponse:
			for _, x := range r.Resources {
				got = append(got, res{x.ResourceType, x.ResourceName, x.ErrorCode})
			}
		case *kmsg.IncrementalAlterConfigsResponse:
			for _, x := range r.Resources {
				got = append(got, res{x.ResourceType, x.ResourceName, x.ErrorCode})
			}
		default:
			return fmt.Sprintf("%T is not a config response", r)
		}
		if len(got) == 0 {
			return fmt.Sprintf("no %s in the answer", field)
		}
		for _, x := range got {
			want := spClusterDenied
			if x.typ == kmsg.ConfigResourceTypeTopic {
				want = spTopicDenied
			}
			if x.code != want {
				return fmt.Sprintf("%s %s %q: %s, Kafka answers %s", field, x.typ, x.name, spCodeName(x.code), spCodeName(want))
			}
		}
		if check != nil {
			return check(e, r)
		}
		return ""
	}}
}

func spNoConfigs(_ *spEnv, r kmsg.Response) string {
	for _, x := range r.(*kmsg.DescribeConfigsResponse).Resources {
		if len(x.Configs) > 0 {
			return fmt.Sprintf("%d configs of %s %q shown to a principal refused", len(x.Configs), x.ResourceType, x.ResourceName)
		}
	}
	return ""
}

func spNoRecords(_ *spEnv, r kmsg.Response) string {
	for _, tp := range r.(*kmsg.FetchResponse).Topics {
		for _, p := range tp.Partitions {
			if len(p.RecordBatches) > 0 {
				return fmt.Sprintf("%d bytes of records handed to a principal refused", len(p.RecordBatches))
			}
		}
	}
	return ""
}

// The requests. Each builds a fresh request: kgo sets the version on it.

func spProduce(e *spEnv) kmsg.Request {
	req := kmsg.NewPtrProduceRequest()
	req.Acks, req.TimeoutMillis = -1, 5000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic, rt.TopicID = e.topic, e.topicID
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition, rp.Records = 0, e.batch
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return req
}

// spFetch fetches the topic's partition 0 from offset 0 as replica
// (-1: a consumer).
func spFetch(replica int32) func(*spEnv) kmsg.Request {
	return func(e *spEnv) kmsg.Request {
		req := kmsg.NewPtrFetchRequest()
		req.ReplicaID, req.ReplicaState.ID = replica, replica
		req.MaxWaitMillis, req.MinBytes, req.MaxBytes = 100, 1, 1<<20
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic, rt.TopicID = e.topic, e.topicID
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes = 0, 0, 1<<20
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		return req
	}
}

func spFetchMetadataLog(*spEnv) kmsg.Request {
	req := kmsg.NewPtrFetchRequest()
	req.ReplicaID, req.ReplicaState.ID = 99, 99
	req.MaxWaitMillis, req.MaxBytes = 100, 1<<20
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = "__cluster_metadata"
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.PartitionMaxBytes = 1 << 20
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return req
}

func spFetchSnapshot(*spEnv) kmsg.Request {
	req := kmsg.NewPtrFetchSnapshotRequest()
	req.ReplicaID = 99
	rt := kmsg.NewFetchSnapshotRequestTopic()
	rt.Topic = "__cluster_metadata"
	rt.Partitions = append(rt.Partitions, kmsg.NewFetchSnapshotRequestTopicPartition())
	req.Topics = append(req.Topics, rt)
	return req
}

func spListOffsets(e *spEnv) kmsg.Request {
	req := kmsg.NewPtrListOffsetsRequest()
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = e.topic
	rp := kmsg.NewListOffsetsRequestTopicPartition()
	rp.Timestamp = -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return req
}

func spMetadata(autoCreate bool, topics ...string) *kmsg.MetadataRequest {
	req := kmsg.NewPtrMetadataRequest()
	req.AllowAutoTopicCreation = autoCreate
	for _, n := range topics {
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(n)
		req.Topics = append(req.Topics, rt)
	}
	return req
}

func spOffsetCommit(e *spEnv, group string) kmsg.Request {
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Group, req.Generation = group, -1
	rt := kmsg.NewOffsetCommitRequestTopic()
	rt.Topic = e.topic
	rp := kmsg.NewOffsetCommitRequestTopicPartition()
	rp.Partition, rp.Offset = 0, 0
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return req
}

func spOffsetFetch(e *spEnv) kmsg.Request {
	req := kmsg.NewPtrOffsetFetchRequest()
	g := kmsg.NewOffsetFetchRequestGroup()
	g.Group = e.group
	req.Groups = append(req.Groups, g)
	return req
}

// spFindCoordinator asks the coordinator of the group (typ 0) or of the
// transaction (typ 1).
func spFindCoordinator(typ int8) func(*spEnv) kmsg.Request {
	return func(e *spEnv) kmsg.Request {
		req := kmsg.NewPtrFindCoordinatorRequest()
		req.CoordinatorType = typ
		req.CoordinatorKey = e.group
		if typ == 1 {
			req.CoordinatorKey = e.txn
		}
		req.CoordinatorKeys = []string{req.CoordinatorKey}
		return req
	}
}

func spJoinGroup(group string) kmsg.Request {
	req := kmsg.NewPtrJoinGroupRequest()
	req.Group, req.SessionTimeoutMillis, req.RebalanceTimeoutMillis, req.ProtocolType = group, 10000, 10000, "consumer"
	p := kmsg.NewJoinGroupRequestProtocol()
	p.Name, p.Metadata = "range", []byte{}
	req.Protocols = append(req.Protocols, p)
	return req
}

func spHeartbeat(group string) kmsg.Request {
	req := kmsg.NewPtrHeartbeatRequest()
	req.Group, req.Generation, req.MemberID = group, 1, "mallory"
	return req
}

func spLeaveGroup(group string) kmsg.Request {
	req := kmsg.NewPtrLeaveGroupRequest()
	req.Group, req.MemberID = group, "mallory"
	m := kmsg.NewLeaveGroupRequestMember()
	m.MemberID = "mallory"
	req.Members = append(req.Members, m)
	return req
}

func spSyncGroup(group string) kmsg.Request {
	req := kmsg.NewPtrSyncGroupRequest()
	req.Group, req.Generation, req.MemberID = group, 1, "mallory"
	req.ProtocolType, req.Protocol = kmsg.StringPtr("consumer"), kmsg.StringPtr("range")
	return req
}

func spDescribeGroups(e *spEnv) kmsg.Request {
	req := kmsg.NewPtrDescribeGroupsRequest()
	req.Groups = []string{e.group}
	return req
}

func spSASLHandshake(*spEnv) kmsg.Request {
	req := kmsg.NewPtrSASLHandshakeRequest()
	req.Mechanism = "PLAIN"
	return req
}

func spSASLAuthenticate(*spEnv) kmsg.Request {
	req := kmsg.NewPtrSASLAuthenticateRequest()
	req.SASLAuthBytes = []byte("\x00alice\x00alice-secret")
	return req
}

func spApiVersions(*spEnv) kmsg.Request {
	req := kmsg.NewPtrApiVersionsRequest()
	req.ClientSoftwareName, req.ClientSoftwareVersion = "fjord-security-probe", "1.0"
	return req
}

func spCreateTopics(validateOnly bool, name string) kmsg.Request {
	req := kmsg.NewPtrCreateTopicsRequest()
	req.TimeoutMillis, req.ValidateOnly = 5000, validateOnly
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = name, 1, 1
	req.Topics = append(req.Topics, rt)
	return req
}

func spDeleteTopics(name string) kmsg.Request {
	req := kmsg.NewPtrDeleteTopicsRequest()
	req.TimeoutMillis = 5000
	req.TopicNames = []string{name}
	rt := kmsg.NewDeleteTopicsRequestTopic()
	rt.Topic = kmsg.StringPtr(name)
	req.Topics = append(req.Topics, rt)
	return req
}

// spDeleteRecords deletes the topic's records below offset (-1: the high
// watermark, all of them).
func spDeleteRecords(e *spEnv, offset int64) kmsg.Request {
	req := kmsg.NewPtrDeleteRecordsRequest()
	req.TimeoutMillis = 5000
	rt := kmsg.NewDeleteRecordsRequestTopic()
	rt.Topic = e.topic
	rp := kmsg.NewDeleteRecordsRequestTopicPartition()
	rp.Partition, rp.Offset = 0, offset
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return req
}

func spInitProducerID(txn *string) kmsg.Request {
	req := kmsg.NewPtrInitProducerIDRequest()
	req.TransactionalID, req.TransactionTimeoutMillis = txn, 60000
	return req
}

func spOffsetForLeaderEpoch(e *spEnv) kmsg.Request {
	req := kmsg.NewPtrOffsetForLeaderEpochRequest()
	req.ReplicaID = -1 // a consumer
	rt := kmsg.NewOffsetForLeaderEpochRequestTopic()
	rt.Topic = e.topic
	rp := kmsg.NewOffsetForLeaderEpochRequestTopicPartition()
	rp.Partition, rp.CurrentLeaderEpoch, rp.LeaderEpoch = 0, -1, 0
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return req
}

func spAddPartitionsToTxn(txn string, pid int64, epoch int16, verifyOnly bool) kmsg.Request {
	req := kmsg.NewPtrAddPartitionsToTxnRequest()
	req.TransactionalID, req.ProducerID, req.ProducerEpoch = txn, pid, epoch // v0-3
	x := kmsg.NewAddPartitionsToTxnRequestTransaction()
	x.TransactionalID, x.ProducerID, x.ProducerEpoch, x.VerifyOnly = txn, pid, epoch, verifyOnly
	xt := kmsg.NewAddPartitionsToTxnRequestTransactionTopic()
	xt.Topic, xt.Partitions = spTopic, []int32{0}
	x.Topics = append(x.Topics, xt)
	req.Transactions = append(req.Transactions, x)
	rt := kmsg.NewAddPartitionsToTxnRequestTopic()
	rt.Topic, rt.Partitions = spTopic, []int32{0}
	req.Topics = append(req.Topics, rt)
	return req
}

func spAddOffsetsToTxn(txn string, pid int64, epoch int16, group string) kmsg.Request {
	req := kmsg.NewPtrAddOffsetsToTxnRequest()
	req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Group = txn, pid, epoch, group
	return req
}

func spEndTxn(txn string, pid int64, epoch int16) kmsg.Request {
	req := kmsg.NewPtrEndTxnRequest()
	req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Commit = txn, pid, epoch, false
	return req
}

func spWriteTxnMarkers(topic string, pid int64, epoch int16) kmsg.Request {
	req := kmsg.NewPtrWriteTxnMarkersRequest()
	m := kmsg.NewWriteTxnMarkersRequestMarker()
	m.ProducerID, m.ProducerEpoch, m.Committed = pid, epoch, false
	mt := kmsg.NewWriteTxnMarkersRequestMarkerTopic()
	mt.Topic, mt.Partitions = topic, []int32{0}
	m.Topics = append(m.Topics, mt)
	req.Markers = append(req.Markers, m)
	return req
}

func spTxnOffsetCommit(e *spEnv, txn, group string, pid int64, epoch int16) kmsg.Request {
	req := kmsg.NewPtrTxnOffsetCommitRequest()
	req.TransactionalID, req.Group, req.ProducerID, req.ProducerEpoch, req.Generation = txn, group, pid, epoch, -1
	rt := kmsg.NewTxnOffsetCommitRequestTopic()
	rt.Topic = e.topic
	rp := kmsg.NewTxnOffsetCommitRequestTopicPartition()
	rp.Partition, rp.Offset = 0, 0
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return req
}

func spDescribeAllACLs() *kmsg.DescribeACLsRequest {
	req := kmsg.NewPtrDescribeACLsRequest()
	req.ResourceType, req.ResourcePatternType = kmsg.ACLResourceTypeAny, kmsg.ACLResourcePatternTypeAny
	req.Operation, req.PermissionType = kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
	return req
}

func spCreateACL(rt kmsg.ACLResourceType, name, principal string, op kmsg.ACLOperation) *kmsg.CreateACLsRequest {
	req := kmsg.NewPtrCreateACLsRequest()
	c := kmsg.NewCreateACLsRequestCreation()
	c.ResourceType, c.ResourceName, c.ResourcePatternType = rt, name, kmsg.ACLResourcePatternTypeLiteral
	c.Principal, c.Host, c.Operation, c.PermissionType = principal, "*", op, kmsg.ACLPermissionTypeAllow
	req.Creations = append(req.Creations, c)
	return req
}

// spThrowawayACL is the binding admin creates and deletes again.
func spThrowawayACL() *kmsg.CreateACLsRequest {
	return spCreateACL(kmsg.ACLResourceTypeTopic, spAdminName+"throwaway", "User:probe-throwaway", kmsg.ACLOperationRead)
}

// spDeleteACLs deletes what matches c exactly, or (nil) every ACL.
func spDeleteACLs(c *kmsg.CreateACLsRequestCreation) kmsg.Request {
	req := kmsg.NewPtrDeleteACLsRequest()
	f := kmsg.NewDeleteACLsRequestFilter()
	f.ResourceType, f.ResourcePatternType = kmsg.ACLResourceTypeAny, kmsg.ACLResourcePatternTypeAny
	f.Operation, f.PermissionType = kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
	if c != nil {
		f.ResourceType, f.ResourceName, f.ResourcePatternType = c.ResourceType, &c.ResourceName, c.ResourcePatternType
		f.Principal, f.Host, f.Operation, f.PermissionType = &c.Principal, &c.Host, c.Operation, c.PermissionType
	}
	req.Filters = append(req.Filters, f)
	return req
}

func spDescribeConfigs(e *spEnv) kmsg.Request {
	req := kmsg.NewPtrDescribeConfigsRequest()
	for _, r := range []struct {
		typ  kmsg.ConfigResourceType
		name string
	}{{kmsg.ConfigResourceTypeBroker, ""}, {kmsg.ConfigResourceTypeBroker, "1"}, {kmsg.ConfigResourceTypeTopic, e.topic}} {
		rr := kmsg.NewDescribeConfigsRequestResource()
		rr.ResourceType, rr.ResourceName = r.typ, r.name
		req.Resources = append(req.Resources, rr)
	}
	return req
}

// spAlterConfigs: the attack sets super.users for the cluster and the
// topic's retention.ms to 1; admin's harmless version validates the
// topic's current retention.ms only.
func spAlterConfigs(e *spEnv, harmless bool) kmsg.Request {
	req := kmsg.NewPtrAlterConfigsRequest()
	add := func(typ kmsg.ConfigResourceType, name, key, value string) {
		rr := kmsg.NewAlterConfigsRequestResource()
		rr.ResourceType, rr.ResourceName = typ, name
		rc := kmsg.NewAlterConfigsRequestResourceConfig()
		rc.Name, rc.Value = key, kmsg.StringPtr(value)
		rr.Configs = append(rr.Configs, rc)
		req.Resources = append(req.Resources, rr)
	}
	if harmless {
		req.ValidateOnly = true
		add(kmsg.ConfigResourceTypeTopic, e.topic, "retention.ms", e.retention)
		return req
	}
	add(kmsg.ConfigResourceTypeBroker, "", "super.users", "User:admin;User:mallory")
	add(kmsg.ConfigResourceTypeTopic, e.topic, "retention.ms", "1")
	return req
}

func spIncrementalAlterConfigs(e *spEnv, harmless bool) kmsg.Request {
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	add := func(typ kmsg.ConfigResourceType, name, key, value string) {
		rr := kmsg.NewIncrementalAlterConfigsRequestResource()
		rr.ResourceType, rr.ResourceName = typ, name
		rc := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
		rc.Name, rc.Op, rc.Value = key, kmsg.IncrementalAlterConfigOpSet, kmsg.StringPtr(value)
		rr.Configs = append(rr.Configs, rc)
		req.Resources = append(req.Resources, rr)
	}
	if harmless {
		req.ValidateOnly = true
		add(kmsg.ConfigResourceTypeTopic, e.topic, "retention.ms", e.retention)
		return req
	}
	add(kmsg.ConfigResourceTypeBroker, "", "super.users", "User:admin;User:mallory")
	add(kmsg.ConfigResourceTypeTopic, e.topic, "retention.ms", "1")
	return req
}

func spAlterReplicaLogDirs(dir, topic string) kmsg.Request {
	req := kmsg.NewPtrAlterReplicaLogDirsRequest()
	d := kmsg.NewAlterReplicaLogDirsRequestDir()
	d.Dir = dir
	dt := kmsg.NewAlterReplicaLogDirsRequestDirTopic()
	dt.Topic, dt.Partitions = topic, []int32{0}
	d.Topics = append(d.Topics, dt)
	req.Dirs = append(req.Dirs, d)
	return req
}

func spCreatePartitions(topic string, count int32, validateOnly bool) kmsg.Request {
	req := kmsg.NewPtrCreatePartitionsRequest()
	req.TimeoutMillis, req.ValidateOnly = 5000, validateOnly
	rt := kmsg.NewCreatePartitionsRequestTopic()
	rt.Topic, rt.Count = topic, count
	req.Topics = append(req.Topics, rt)
	return req
}

func spDeleteGroups(group string) kmsg.Request {
	req := kmsg.NewPtrDeleteGroupsRequest()
	req.Groups = []string{group}
	return req
}

func spElectLeaders(topic string, typ int8) kmsg.Request {
	req := kmsg.NewPtrElectLeadersRequest()
	req.ElectionType, req.TimeoutMillis = typ, 5000
	rt := kmsg.NewElectLeadersRequestTopic()
	rt.Topic, rt.Partitions = topic, []int32{0, 1}
	req.Topics = append(req.Topics, rt)
	return req
}

// spAlterReassignments moves the topic's partition 0 to replicas, or
// (nil) cancels its reassignment.
func spAlterReassignments(topic string, replicas []int32) kmsg.Request {
	req := kmsg.NewPtrAlterPartitionAssignmentsRequest()
	req.TimeoutMillis = 5000
	rt := kmsg.NewAlterPartitionAssignmentsRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewAlterPartitionAssignmentsRequestTopicPartition()
	rp.Partition, rp.Replicas = 0, replicas
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return req
}

func spOffsetDelete(group, topic string) kmsg.Request {
	req := kmsg.NewPtrOffsetDeleteRequest()
	req.Group = group
	rt := kmsg.NewOffsetDeleteRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewOffsetDeleteRequestTopicPartition()
	rp.Partition = 0
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return req
}

// spAlterQuotas: the attack lifts mallory's producer rate to 1 TB/s and
// removes the probe user's quota; admin's harmless version validates a
// new rate for the probe user only.
func spAlterQuotas(e *spEnv, harmless bool) kmsg.Request {
	req := kmsg.NewPtrAlterClientQuotasRequest()
	add := func(user string, value float64, remove bool) {
		en := kmsg.NewAlterClientQuotasRequestEntry()
		ent := kmsg.NewAlterClientQuotasRequestEntryEntity()
		ent.Type, ent.Name = "user", kmsg.StringPtr(user)
		en.Entity = append(en.Entity, ent)
		op := kmsg.NewAlterClientQuotasRequestEntryOp()
		op.Key, op.Value, op.Remove = "producer_byte_rate", value, remove
		en.Ops = append(en.Ops, op)
		req.Entries = append(req.Entries, en)
	}
	if harmless {
		req.ValidateOnly = true
		add(e.user, 2<<20, false)
		return req
	}
	add("mallory", 1e12, false)
	add(e.user, 0, true)
	return req
}

// spAlterSCRAM upserts a SCRAM-SHA-256 credential for upsert (unless "")
// and deletes del's.
func spAlterSCRAM(upsert, del string) kmsg.Request {
	req := kmsg.NewPtrAlterUserSCRAMCredentialsRequest()
	if upsert != "" {
		u := kmsg.NewAlterUserSCRAMCredentialsRequestUpsertion()
		u.Name, u.Mechanism, u.Iterations, u.Salt, u.SaltedPassword = upsert, 1, 4096, []byte("mallory-salt"), make([]byte, 32)
		req.Upsertions = append(req.Upsertions, u)
	}
	d := kmsg.NewAlterUserSCRAMCredentialsRequestDeletion()
	d.Name, d.Mechanism = del, 1
	req.Deletions = append(req.Deletions, d)
	return req
}

func spAlterPartition(e *spEnv) kmsg.Request {
	req := kmsg.NewPtrAlterPartitionRequest()
	req.BrokerID, req.BrokerEpoch = 1, 0
	rt := kmsg.NewAlterPartitionRequestTopic()
	rt.Topic, rt.TopicID = e.topic, e.topicID
	rp := kmsg.NewAlterPartitionRequestTopicPartition()
	rp.Partition, rp.LeaderEpoch, rp.NewISR = 0, 0, []int32{99}
	isr := kmsg.NewAlterPartitionRequestTopicPartitionNewEpochISR()
	isr.BrokerID, isr.BrokerEpoch = 99, -1
	rp.NewEpochISR = append(rp.NewEpochISR, isr)
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return req
}

func spUpdateFeatures(level int16, upgradeType int8, validateOnly bool) kmsg.Request {
	req := kmsg.NewPtrUpdateFeaturesRequest()
	req.TimeoutMillis, req.ValidateOnly = 5000, validateOnly
	u := kmsg.NewUpdateFeaturesRequestFeatureUpdate()
	u.Feature, u.MaxVersionLevel, u.UpgradeType, u.AllowDowngrade = "metadata.version", level, upgradeType, upgradeType != 1
	req.FeatureUpdates = append(req.FeatureUpdates, u)
	return req
}

// spDescribeCluster asks for the brokers (1) or the controllers (2).
func spDescribeCluster(endpoint int8) func(*spEnv) kmsg.Request {
	return func(*spEnv) kmsg.Request {
		req := kmsg.NewPtrDescribeClusterRequest()
		req.EndpointType, req.IncludeClusterAuthorizedOperations = endpoint, true
		return req
	}
}

func spDescribeProducers(e *spEnv) kmsg.Request {
	req := kmsg.NewPtrDescribeProducersRequest()
	rt := kmsg.NewDescribeProducersRequestTopic()
	rt.Topic, rt.Partitions = e.topic, []int32{0}
	req.Topics = append(req.Topics, rt)
	return req
}

func spBrokerRegistration(e *spEnv) kmsg.Request {
	req := kmsg.NewPtrBrokerRegistrationRequest()
	req.BrokerID, req.ClusterID, req.IncarnationID = 99, e.clusterID, [16]byte{9, 9}
	// The layout's listener names, so that DescribeCluster on either
	// client listener would show broker 99.
	for _, name := range []string{"SASL_PLAINTEXT_HOST", "SASL_PLAINTEXT"} {
		l := kmsg.NewBrokerRegistrationRequestListener()
		l.Name, l.Host, l.Port, l.SecurityProtocol = name, "127.0.0.1", 9, 2
		req.Listeners = append(req.Listeners, l)
	}
	f := kmsg.NewBrokerRegistrationRequestFeature()
	f.Name, f.MinSupportedVersion, f.MaxSupportedVersion = "metadata.version", 1, e.mvLevel
	req.Features = append(req.Features, f)
	req.PreviousBrokerEpoch = -1
	return req
}

func spDescribeTransactions(txn string) kmsg.Request {
	req := kmsg.NewPtrDescribeTransactionsRequest()
	req.TransactionalIDs = []string{txn}
	return req
}

func spGetTelemetry(*spEnv) kmsg.Request {
	return kmsg.NewPtrGetTelemetrySubscriptionsRequest()
}

func spPushTelemetry(*spEnv) kmsg.Request {
	req := kmsg.NewPtrPushTelemetryRequest()
	req.ClientInstanceID = [16]byte{1, 2, 3}
	return req
}

func spDescribeTopicPartitions(e *spEnv) kmsg.Request {
	req := kmsg.NewPtrDescribeTopicPartitionsRequest()
	req.ResponsePartitionLimit = 100
	rt := kmsg.NewDescribeTopicPartitionsRequestTopic()
	rt.Topic = e.topic
	req.Topics = append(req.Topics, rt)
	return req
}

func spConsumerHeartbeat(group, topic string, epoch int32) kmsg.Request {
	req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	req.Group, req.MemberID, req.MemberEpoch, req.RebalanceTimeoutMillis = group, "sp-member-00000000000000", epoch, 30000
	req.SubscribedTopicNames, req.Topics = []string{topic}, []kmsg.ConsumerGroupHeartbeatRequestTopic{}
	return req
}

func spConsumerDescribe(group string) kmsg.Request {
	req := kmsg.NewPtrConsumerGroupDescribeRequest()
	req.Groups = []string{group}
	return req
}

func spShareHeartbeat(group, topic string, epoch int32) kmsg.Request {
	req := kmsg.NewPtrShareGroupHeartbeatRequest()
	req.GroupID, req.MemberID, req.MemberEpoch, req.SubscribedTopicNames = group, "sp-member-00000000000000", epoch, []string{topic}
	return req
}

func spShareDescribe(group string) kmsg.Request {
	req := kmsg.NewPtrShareGroupDescribeRequest()
	req.GroupIDs = []string{group}
	return req
}

func spShareFetch(group string, topicID [16]byte, epoch int32) kmsg.Request {
	req := kmsg.NewPtrShareFetchRequest()
	req.GroupID, req.MemberID, req.ShareSessionEpoch = kmsg.StringPtr(group), kmsg.StringPtr("sp-member-00000000000000"), epoch
	if epoch == 0 {
		rt := kmsg.NewShareFetchRequestTopic()
		rt.TopicID = topicID
		rp := kmsg.NewShareFetchRequestTopicPartition()
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
	}
	return req
}

func spShareAck(group string) kmsg.Request {
	req := kmsg.NewPtrShareAcknowledgeRequest()
	req.GroupID, req.MemberID, req.ShareSessionEpoch = kmsg.StringPtr(group), kmsg.StringPtr("sp-member-00000000000000"), 1
	return req
}

// spShareState names one partition of a topic id nobody has in a share
// state RPC for group.
func spShareState(req kmsg.Request, group string) kmsg.Request {
	v := reflect.ValueOf(req).Elem()
	v.FieldByName("GroupID").SetString(group)
	topics := v.FieldByName("Topics")
	topic := reflect.New(topics.Type().Elem()).Elem()
	parts := topic.FieldByName("Partitions")
	parts.Set(reflect.Append(parts, reflect.New(parts.Type().Elem()).Elem()))
	topics.Set(reflect.Append(topics, topic))
	return req
}
