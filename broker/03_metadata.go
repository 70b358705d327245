package broker

import (
	"sort"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Metadata: v0-12
//
// Behaviour:
//   - Brokers: this node, at the advertised address of the listener the
//     request arrived on.
//   - Topics: all topics when the list is null (v1+) or empty (v0); else the
//     named ones (by name, or by id from v10 with a null name).
//   - An unknown topic is created when auto.create.topics.enable is on and
//     the request allows it (always before v4), like Kafka; the new topic is
//     returned at once. Invalid names get INVALID_TOPIC_EXCEPTION.
//   - Every partition is led by this node at leader epoch 0; ISR = replicas.
//
// Version notes:
//   - v1: null topics = all, controller id, rack, internal flag
//   - v2: cluster id; v4: allow auto topic creation; v5: offline replicas
//   - v7: leader epoch (KIP-320); v8: authorized operations (KIP-430)
//   - v9: flexible; v10: topic ids (KIP-516); v11: cluster ops dropped
func init() { regKey(3, 0, 12, handleMetadata) }

func handleMetadata(b *Broker, cc *connCtx, kreq kmsg.Request, respond func(kmsg.Response)) {
	req := kreq.(*kmsg.MetadataRequest)
	resp := req.ResponseKind().(*kmsg.MetadataResponse)
	adv := b.advertised[cc.listener]
	resp.Brokers = []kmsg.MetadataResponseBroker{{NodeID: b.cfg.NodeID, Host: adv.Host, Port: adv.Port}}
	cid := b.clusterID()
	resp.ClusterID = &cid
	resp.ControllerID = b.cfg.NodeID

	all := req.Topics == nil || (req.Version == 0 && len(req.Topics) == 0)
	if all {
		topics := b.topicsSnapshot()
		names := make([]string, 0, len(topics))
		for n := range topics {
			names = append(names, n)
		}
		sort.Strings(names)
		for _, n := range names {
			resp.Topics = append(resp.Topics, b.describeTopic(topics[n], req))
		}
		respond(resp)
		return
	}
	autoCreate := b.cfg.AutoCreateTopics && (req.Version < 4 || req.AllowAutoTopicCreation)
	for _, rt := range req.Topics {
		var t *topic
		var name string
		switch {
		case rt.Topic != nil:
			name = *rt.Topic
			t = b.lookup(name)
		case rt.TopicID != [16]byte{}:
			t = b.lookupID(rt.TopicID)
			if t == nil {
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
			if err := validTopicName(name); err != nil {
				mt.ErrorCode = kerr.InvalidTopicException.Code
			} else if !autoCreate {
				mt.ErrorCode = kerr.UnknownTopicOrPartition.Code
			} else {
				created, err := b.createTopic(createSpec{name: name, partitions: -1, replication: -1})
				switch {
				case err == nil:
					t = created
				case errorCode(err) == kerr.TopicAlreadyExists.Code:
					t = b.lookup(name) // created concurrently
				default:
					b.log.Warn().Err(err).Str("topic", name).Msg("auto-creating topic")
					mt.ErrorCode = errorCode(err)
				}
			}
			if t == nil {
				resp.Topics = append(resp.Topics, mt)
				continue
			}
		}
		resp.Topics = append(resp.Topics, b.describeTopic(t, req))
	}
	respond(resp)
}

func (b *Broker) describeTopic(t *topic, req *kmsg.MetadataRequest) kmsg.MetadataResponseTopic {
	mt := kmsg.NewMetadataResponseTopic()
	name := t.name
	mt.Topic = &name
	mt.TopicID = t.meta.ID
	mt.IsInternal = t.meta.Internal
	if req.IncludeTopicAuthorizedOperations {
		mt.AuthorizedOperations = allTopicOperations
	}
	for _, p := range t.parts {
		mp := kmsg.NewMetadataResponseTopicPartition()
		mp.Partition = p.index
		mp.Leader = b.cfg.NodeID
		mp.LeaderEpoch = 0
		mp.Replicas = []int32{b.cfg.NodeID}
		mp.ISR = []int32{b.cfg.NodeID}
		mt.Partitions = append(mt.Partitions, mp)
	}
	return mt
}

// allTopicOperations is the KIP-430 bit set of every topic operation: no
// authorization is configured, so everything is allowed.
const allTopicOperations = 1<<2 | 1<<3 | 1<<4 | 1<<5 | 1<<6 | 1<<7 | 1<<8 | 1<<10 | 1<<11
