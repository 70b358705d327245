package discovery

import (
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordlog/fjord/broker/acl"
	"github.com/fjordlog/fjord/broker/api"
	"github.com/fjordlog/fjord/broker/coordinator"
	"github.com/fjordlog/fjord/broker/replicamgr"
	"github.com/fjordlog/fjord/broker/txncoord"
	"github.com/fjordlog/fjord/controller"
)

// Metadata: v0-13
//
// Behaviour:
//   - Answered from this broker's own metadata image: every broker of the
//     cluster is equally able to answer.
//   - Brokers: the unfenced brokers, at their advertised address on the
//     listener the request arrived on.
//   - Topics: all topics when the list is null (v1+) or empty (v0); else the
//     named ones (by name, or by id from v10 with a null name).
//   - An unknown topic is created through the active controller when
//     auto.create.topics.enable is on and the request allows it (always
//     before v4). The request that created it is answered for that topic
//     with LEADER_NOT_AVAILABLE, no partitions, a zero topic id and the
//     internal flag of its name; the next request sees its partitions.
//     Clients retry that code (franz-go, sarama, librdkafka, kafka-python,
//     kafka-go), and a client that reads "no partitions" as "not there
//     yet" (kafka-go's DeleteTopics test reads the partitions of topics it
//     just deleted, with auto-creation on) sees what it sees on Kafka.
//     Kafka's KRaft brokers send the creation to the controller without
//     waiting and answer UNKNOWN_TOPIC_OR_PARTITION
//     (AutoTopicCreationManager.sendCreateTopicRequest); its ZooKeeper
//     brokers answered LEADER_NOT_AVAILABLE. Fjord waits for the
//     controller, so the topic does exist: LEADER_NOT_AVAILABLE says so,
//     and every client retries it without counting it as an unknown topic
//     (franz-go gives up on a topic after a few UNKNOWN_TOPIC_OR_PARTITION
//     answers). A creation the controller refused answers its error
//     (INVALID_REPLICATION_FACTOR, POLICY_VIOLATION …); an invalid name
//     INVALID_TOPIC_EXCEPTION.
//   - The internal topics (__consumer_offsets, __transaction_state) are
//     auto-created as FindCoordinator creates them, with their own
//     partition count, replication factor and configs (Kafka's
//     AutoTopicCreationManager does the same), never with the defaults of
//     an ordinary topic.
//   - A name whose topic was just deleted is auto-created like any unknown
//     name: a new topic with a new id (Kafka's KRaft behaviour). Once
//     DeleteTopics has answered no broker still has the old topic, so none
//     answers with it instead (broker/admin/20_delete_topics.go); before that answer a
//     broker that has not applied the deletion still lists the old topic.
//   - Partitions: leader (-1 while none: LEADER_NOT_AVAILABLE), leader
//     epoch, replicas, ISR and the replicas on fenced brokers as offline.
//   - Authorized operations (KIP-430, v8+): when asked, the bit set of
//     the operations the principal may perform on each topic (and, v8-10,
//     on the cluster, 0 without DESCRIBE on it), from the authorizer;
//     -2147483648 when not asked.
//   - ControllerID: the active controller's node id when it is a live broker
//     (a combined node), else this broker's: admin requests sent to it are
//     forwarded to the active controller either way.
//   - Top-level ErrorCode (v13): always 0. Kafka sets it only to ask a
//     client to rebootstrap (REBOOTSTRAP_REQUIRED, KIP-1102), which no
//     state of a Fjord broker calls for.
//
// Version notes:
//   - v1: null topics = all, controller id, rack, internal flag
//   - v2: cluster id; v4: allow auto topic creation; v5: offline replicas
//   - v7: leader epoch (KIP-320); v8: authorized operations (KIP-430)
//   - v9: flexible; v10: topic ids (KIP-516); v11: cluster ops dropped
//   - v13: top-level error code (KIP-1102)
func metadataEntry(h Host) api.Entry {
	return api.Entry{
		Key: 3, Client: api.Versions(0, 13), Handle: bindTo(h, handleMetadata),
		Rule: api.Needs("DESCRIBE on TOPIC (others are not listed); auto-creation: CREATE on CLUSTER or TOPIC", 0, checkWith(h, checkMetadata)),
	}
}

func handleMetadata(h Host, cc *api.Conn, kreq kmsg.Request, respond func(kmsg.Response)) {
	req := kreq.(*kmsg.MetadataRequest)
	autoCreate := h.AutoCreateTopics() && (req.Version < 4 || req.AllowAutoTopicCreation)
	var missing []string
	if img := h.Image(); req.Topics != nil && autoCreate {
		for _, rt := range req.Topics {
			if rt.Topic != nil && img.Topic(*rt.Topic) == nil && controller.InvalidTopicName(*rt.Topic) == "" &&
				!slices.Contains(missing, *rt.Topic) {
				missing = append(missing, *rt.Topic)
			}
		}
	}
	if len(missing) == 0 {
		respond(metadata(h, cc, req, nil))
		return
	}
	// Creating waits for the controller; the reader goroutine must not.
	if !h.Go(func() {
		codes := map[string]int16{}
		for _, name := range missing {
			codes[name] = createMissing(h, cc, name)
		}
		respond(metadata(h, cc, req, codes))
	}) {
		respond(metadata(h, cc, req, nil)) // closing: unknown topics stay unknown
	}
}

// createMissing creates the unknown topic name for a Metadata request and
// answers its creation code (0: created, or created meanwhile by
// another request). The internal topics are created as their
// coordinators need them, whose failures FindCoordinator retries; their
// code is 0, so the client retries too.
func createMissing(h Host, cc *api.Conn, name string) int16 {
	switch name {
	case coordinator.OffsetsTopic:
		h.EnsureOffsetsTopic()
		return 0
	case txncoord.Topic:
		h.EnsureTxnTopic()
		return 0
	}
	return h.AutoCreate(cc.Ctx, name)
}

// metadata builds the response from the current image; createCodes holds
// the outcome of topics just auto-created.
func metadata(h Host, cc *api.Conn, req *kmsg.MetadataRequest, createCodes map[string]int16) *kmsg.MetadataResponse {
	resp := req.ResponseKind().(*kmsg.MetadataResponse)
	img := h.Image()
	// A peer waiting for this broker to apply a metadata change asks for
	// the version of the image answered from (replicamgr/peerbarrier.go).
	replicamgr.PutImageVersion(req, resp, img.Version())
	listener := h.ListenerName(cc)
	for _, bs := range img.LiveBrokers() {
		e, ok := img.Endpoint(bs.ID, listener)
		if !ok {
			continue
		}
		mb := kmsg.NewMetadataResponseBroker()
		mb.NodeID, mb.Host, mb.Port = bs.ID, e.Host, e.Port
		if bs.Rack != "" {
			r := bs.Rack
			mb.Rack = &r
		}
		resp.Brokers = append(resp.Brokers, mb)
	}
	cid := h.ClusterID()
	resp.ClusterID = &cid
	resp.ControllerID = h.ControllerID(img)
	if req.IncludeClusterAuthorizedOperations && req.Version >= 8 && req.Version <= 10 {
		resp.AuthorizedOperations = h.ClusterOps(cc) // the cluster's, v8-10
	}
	var ops func(topic string) int32
	if req.IncludeTopicAuthorizedOperations {
		ops = func(topic string) int32 { return h.AuthorizedOps(cc, acl.ResourceTopic, topic) }
	}

	if req.Topics == nil || (req.Version == 0 && len(req.Topics) == 0) {
		for _, t := range img.Topics() {
			resp.Topics = append(resp.Topics, describeTopic(img, t, ops))
		}
		return resp
	}
	for _, rt := range req.Topics {
		var t *controller.Topic
		var name string
		switch {
		case rt.Topic != nil:
			name = *rt.Topic
			if code, tried := createCodes[name]; tried {
				resp.Topics = append(resp.Topics, createdTopic(name, code))
				continue
			}
			t = img.Topic(name)
		case rt.TopicID != [16]byte{}:
			if t = img.TopicByID(rt.TopicID); t == nil {
				mt := kmsg.NewMetadataResponseTopic()
				mt.TopicID = rt.TopicID
				mt.ErrorCode = kerr.UnknownTopicID.Code
				resp.Topics = append(resp.Topics, mt)
				continue
			}
		}
		if t == nil {
			mt := kmsg.NewMetadataResponseTopic()
			mt.Topic = &name
			mt.IsInternal = IsInternalTopic(name)
			mt.ErrorCode = kerr.UnknownTopicOrPartition.Code
			if controller.InvalidTopicName(name) != "" {
				mt.ErrorCode = kerr.InvalidTopicException.Code
			}
			resp.Topics = append(resp.Topics, mt)
			continue
		}
		resp.Topics = append(resp.Topics, describeTopic(img, t, ops))
	}
	return resp
}

// createdTopic is the answer for a topic this request auto-created (code
// 0) or failed to: Kafka's shape, with no partitions and no topic id,
// whatever the image shows by now.
func createdTopic(name string, code int16) kmsg.MetadataResponseTopic {
	mt := kmsg.NewMetadataResponseTopic()
	mt.Topic = &name
	mt.IsInternal = IsInternalTopic(name)
	mt.ErrorCode = code
	if code == 0 {
		mt.ErrorCode = kerr.LeaderNotAvailable.Code
	}
	return mt
}

// describeTopic is t's entry; ops, when the request asked for KIP-430's
// authorized operations, gives them (else they stay Kafka's "not asked",
// -2147483648).
func describeTopic(img *controller.Image, t *controller.Topic, ops func(topic string) int32) kmsg.MetadataResponseTopic {
	mt := kmsg.NewMetadataResponseTopic()
	name := t.Name
	mt.Topic = &name
	mt.TopicID = t.ID
	mt.IsInternal = IsInternalTopic(t.Name)
	if ops != nil {
		mt.AuthorizedOperations = ops(t.Name)
	}
	for i, p := range t.Partitions {
		mp := kmsg.NewMetadataResponseTopicPartition()
		mp.Partition = int32(i)
		mp.Leader = p.Leader
		mp.LeaderEpoch = p.LeaderEpoch
		mp.Replicas = p.Replicas
		mp.ISR = p.ISR
		for _, r := range p.Replicas {
			if bs, ok := img.Broker(r); !ok || bs.Fenced {
				mp.OfflineReplicas = append(mp.OfflineReplicas, r)
			}
		}
		if p.Leader == -1 {
			mp.ErrorCode = kerr.LeaderNotAvailable.Code
		}
		mt.Partitions = append(mt.Partitions, mp)
	}
	return mt
}

// checkMetadata: a named topic the principal may not describe is answered
// TOPIC_AUTHORIZATION_FAILED; one that does not exist and would be
// auto-created needs CREATE on the cluster or the topic, else it is
// answered TOPIC_AUTHORIZATION_FAILED too (Kafka's behaviour). A request
// for all topics lists only those the principal may describe.
func checkMetadata(h Host, z *api.Authz, kreq kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
	req := kreq.(*kmsg.MetadataRequest)
	if req.Topics == nil {
		return nil, func(r kmsg.Response) {
			resp := r.(*kmsg.MetadataResponse)
			kept := resp.Topics[:0]
			for _, t := range resp.Topics {
				if t.Topic != nil && z.Quiet(acl.OpDescribe, acl.ResourceTopic, *t.Topic) {
					kept = append(kept, t)
				}
			}
			resp.Topics = kept
		}
	}
	autoCreate := h.AutoCreateTopics() && (req.Version < 4 || req.AllowAutoTopicCreation)
	canCreateAll := autoCreate && z.Az.Authorize(z.Conn.Principal, z.Conn.ClientHost, acl.OpCreate, acl.ResourceCluster, acl.ClusterName)
	img := h.Image()
	keep := make([]kmsg.MetadataRequestTopic, 0, len(req.Topics))
	var denied []kmsg.MetadataRequestTopic
	for _, t := range req.Topics {
		name := ""
		if t.Topic != nil {
			name = *t.Topic
		} else {
			name = h.TopicName("", t.TopicID)
		}
		allowed := z.Ok(acl.OpDescribe, acl.ResourceTopic, name)
		if allowed && autoCreate && !canCreateAll && img != nil && img.Topic(name) == nil &&
			!z.Ok(acl.OpCreate, acl.ResourceTopic, name) {
			allowed = false
		}
		if allowed {
			keep = append(keep, t)
		} else {
			denied = append(denied, t)
		}
	}
	req.Topics = keep
	if len(denied) == 0 {
		return nil, nil
	}
	return nil, func(r kmsg.Response) {
		resp := r.(*kmsg.MetadataResponse)
		for _, t := range denied {
			rt := kmsg.NewMetadataResponseTopic()
			rt.Topic, rt.TopicID, rt.ErrorCode = t.Topic, t.TopicID, api.TopicDenied
			resp.Topics = append(resp.Topics, rt)
		}
	}
}
