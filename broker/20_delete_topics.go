package broker

import (
	"github.com/fjordlog/fjord/controller"
	"github.com/fjordlog/fjord/controller/active"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// DeleteTopics: v0-6
//
// Behaviour:
//   - Forwarded to the active controller, which commits the deletion to the
//     metadata log; the answer comes once this broker's image no longer has
//     the topic and every other live broker answers Metadata for its id
//     with UNKNOWN_TOPIC_ID (deletebarrier.go), within the request's
//     timeout: after the answer no broker lists it, and every broker
//     deletes its replicas' files. Kafka lets the other brokers lag. Unknown
//     names are UNKNOWN_TOPIC_OR_PARTITION and unknown ids UNKNOWN_TOPIC_ID;
//     delete.topic.enable=false (on the controller) gives
//     TOPIC_DELETION_DISABLED.
//
// Version notes:
//   - v4: flexible; v5: error messages; v6: topic ids (KIP-516)
func init() { regKey(20, 0, 6, handleDeleteTopics) }

func handleDeleteTopics(b *Broker, cc *connCtx, kreq kmsg.Request, respond func(kmsg.Response)) {
	req := kreq.(*kmsg.DeleteTopicsRequest)
	b.goLoop(func() {
		ctx, cancel := adminCtx(cc.ctx, req.TimeoutMillis)
		defer cancel()
		kresp, err := b.ctl.call(ctx, req)
		if err != nil {
			kresp = active.ErrorResponse(req, kerr.RequestTimedOut.Code)
		}
		resp := kresp.(*kmsg.DeleteTopicsResponse)
		resp.Version = req.Version
		var deleted [][16]byte
		for _, st := range resp.Topics {
			if st.ErrorCode == 0 && st.TopicID != [16]byte{} {
				id := st.TopicID
				b.waitImage(ctx, func(img *controller.Image) bool { return img.TopicByID(id) == nil })
				deleted = append(deleted, id)
			}
		}
		if lagging := b.awaitPeersForgot(ctx, deleted); len(lagging) > 0 {
			b.log.Warn().Ints32("brokers", lagging).Int("topics", len(deleted)).
				Msg("deleted topics: answering before these brokers confirmed they dropped them (request timeout); they drop them when they catch up")
		}
		respond(resp)
	})
}
