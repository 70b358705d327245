package broker

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// CreateTopics: v0-7
//
// Behaviour:
//   - Each topic is validated (name, partitions, replication factor, replica
//     assignment, configs) and created durably before the response.
//   - An existing name is TOPIC_ALREADY_EXISTS whatever the partition count:
//     never merged. A name given twice in one request is INVALID_REQUEST for
//     both, as in Kafka.
//   - ValidateOnly (v1+) checks everything and creates nothing.
//
// Version notes:
//   - v1: validate only, error messages; v5: flexible, returns partitions,
//     replication factor and configs (KIP-525); v7: topic id (KIP-516)
func init() { regKey(19, 0, 7, handleCreateTopics) }

func handleCreateTopics(b *Broker, cc *connCtx, kreq kmsg.Request, respond func(kmsg.Response)) {
	req := kreq.(*kmsg.CreateTopicsRequest)
	resp := req.ResponseKind().(*kmsg.CreateTopicsResponse)
	seen := map[string]int{}
	for _, rt := range req.Topics {
		seen[rt.Topic]++
	}
	for _, rt := range req.Topics {
		st := kmsg.NewCreateTopicsResponseTopic()
		st.Topic = rt.Topic
		st.NumPartitions, st.ReplicationFactor = -1, -1
		sp := createSpec{name: rt.Topic, partitions: rt.NumPartitions, replication: rt.ReplicationFactor, configs: map[string]string{}}
		var err error
		if seen[rt.Topic] > 1 {
			err = fmt.Errorf("%w: topic %q appears more than once", errInvalidRequest, rt.Topic)
		}
		for _, a := range rt.ReplicaAssignment {
			if sp.assignment == nil {
				sp.assignment = map[int32][]int32{}
			}
			sp.assignment[a.Partition] = a.Replicas
		}
		for _, c := range rt.Configs {
			if c.Value == nil {
				err = fmt.Errorf("%w: config %q has a null value", errInvalidConfig, c.Name)
				break
			}
			sp.configs[c.Name] = *c.Value
		}
		if len(sp.configs) == 0 {
			sp.configs = nil
		}
		var t *topic
		if err == nil {
			if req.ValidateOnly {
				err = b.checkCreate(&sp)
			} else {
				t, err = b.createTopic(sp)
			}
		}
		if err != nil {
			st.ErrorCode = errorCode(err)
			st.ErrorMessage = errMessage(err)
		} else {
			st.NumPartitions = sp.partitions
			st.ReplicationFactor = sp.replication
			if t != nil {
				st.TopicID = t.meta.ID
			}
			for _, d := range topicConfigDefs {
				v, override := effectiveValue(&b.cfg, sp.configs, &d)
				c := kmsg.NewCreateTopicsResponseTopicConfig()
				c.Name = d.name
				c.Value = &v
				c.Source = int8(kmsg.ConfigSourceDefaultConfig)
				if override {
					c.Source = int8(kmsg.ConfigSourceDynamicTopicConfig)
				}
				st.Configs = append(st.Configs, c)
			}
		}
		resp.Topics = append(resp.Topics, st)
	}
	respond(resp)
}
