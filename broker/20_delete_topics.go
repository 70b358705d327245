package broker

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// DeleteTopics: v0-6
//
// Behaviour:
//   - Deletes each named topic (v0-5 by name; v6 by name or by id) durably
//     before answering; unknown names are UNKNOWN_TOPIC_OR_PARTITION and
//     unknown ids UNKNOWN_TOPIC_ID. delete.topic.enable=false gives
//     TOPIC_DELETION_DISABLED.
//
// Version notes:
//   - v4: flexible; v5: error messages; v6: topic ids (KIP-516)
func init() { regKey(20, 0, 6, handleDeleteTopics) }

func handleDeleteTopics(b *Broker, cc *connCtx, kreq kmsg.Request, respond func(kmsg.Response)) {
	req := kreq.(*kmsg.DeleteTopicsRequest)
	resp := req.ResponseKind().(*kmsg.DeleteTopicsResponse)
	type target struct {
		name *string
		id   [16]byte
	}
	var targets []target
	if req.Version < 6 {
		for _, n := range req.TopicNames {
			targets = append(targets, target{name: &n})
		}
	} else {
		for _, t := range req.Topics {
			targets = append(targets, target{name: t.Topic, id: t.TopicID})
		}
	}
	for _, tg := range targets {
		st := kmsg.NewDeleteTopicsResponseTopic()
		st.Topic, st.TopicID = tg.name, tg.id
		var name string
		switch {
		case tg.name != nil:
			name = *tg.name
		default:
			t := b.lookupID(tg.id)
			if t == nil {
				st.ErrorCode = kerr.UnknownTopicID.Code
				resp.Topics = append(resp.Topics, st)
				continue
			}
			name = t.name
			st.Topic = &name
		}
		if t := b.lookup(name); t != nil {
			st.TopicID = t.meta.ID
		}
		if err := b.deleteTopic(name); err != nil {
			st.ErrorCode = errorCode(err)
			st.ErrorMessage = errMessage(err)
		}
		resp.Topics = append(resp.Topics, st)
	}
	respond(resp)
}
