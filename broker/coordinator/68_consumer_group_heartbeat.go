package coordinator

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordlog/fjord/broker/acl"
	"github.com/fjordlog/fjord/broker/api"
	"github.com/fjordlog/fjord/group/consumer"
)

// ConsumerGroupHeartbeat: v0-1
//
// Behaviour: KIP-848's consumer group protocol, run by package
// group/consumer (see its documentation for epochs, reconciliation and
// the forced exits). The coordinator assigns the partitions itself, with
// the server-side assignor the member names (group.consumer.assignors).
// The answer is sent once the records the heartbeat produced are
// committed on the offsets partition (consumers.go says why). A join
// to a classic group with members upgrades it online (KIP-848, as Kafka
// 4.x: group.consumer.migration.policy allows it, its protocol type is
// "consumer", it fits group.consumer.max.size and its members' metadata
// parses): its members carry on as classic members of the consumer group.
// Otherwise it answers GROUP_ID_NOT_FOUND with Kafka's message ("Group
// <id> is not a consumer group.", or why the upgrade failed); an empty
// classic group is converted. When the last member using this API leaves
// or is removed while classic members remain, the group becomes a
// classic group again (downgrade).
// Subscribing by topic name needs DESCRIBE on every topic named
// (TOPIC_AUTHORIZATION_FAILED otherwise, as in Kafka); a regular
// expression resolves only to topics the principal of the heartbeat that
// resolves it may DESCRIBE (consumer.Visibility).
//
// Version notes: v0: Kafka 3.7's early access (the coordinator names the
// member id); v1: client-generated member ids, regular-expression
// subscriptions (KIP-848 as shipped in Kafka 4.0)
func consumerGroupHeartbeatEntry(h APIHost) api.Entry {
	return api.Entry{
		Key: 68, Client: api.Versions(0, 1), Handle: bindTo(h, handleConsumerGroupHeartbeat),
		Rule: api.Needs("READ on GROUP and DESCRIBE on the TOPICs subscribed by name", 1, api.All(
			api.GroupTop(acl.OpRead, func(r kmsg.Request) string { return r.(*kmsg.ConsumerGroupHeartbeatRequest).Group }),
			subscribedTopicsDenied(func(r kmsg.Request) []string { return r.(*kmsg.ConsumerGroupHeartbeatRequest).SubscribedTopicNames },
				func(r kmsg.Response, m string) { r.(*kmsg.ConsumerGroupHeartbeatResponse).ErrorMessage = &m }))),
	}
}

func handleConsumerGroupHeartbeat(h APIHost, cc *api.Conn, kreq kmsg.Request, respond func(kmsg.Response)) {
	req := kreq.(*kmsg.ConsumerGroupHeartbeatRequest)
	fail := func(code int16, msg string) {
		resp := req.ResponseKind().(*kmsg.ConsumerGroupHeartbeatResponse)
		resp.ErrorCode, resp.MemberEpoch = code, req.MemberEpoch
		if msg != "" {
			resp.ErrorMessage = &msg
		}
		respond(resp)
	}
	if code := requestCode(h, req.Group); code != 0 {
		fail(code, "")
		return
	}
	var resp *kmsg.ConsumerGroupHeartbeatResponse
	// A join (epoch 0) creates the group; anything else needs it.
	may := h.MayDescribeTopics(cc)
	exists, wait, err := h.Coordinator().Consumer(req.Group, req.MemberEpoch == 0, may,
		func(g *consumer.Group, img *consumer.Image, now int64) []consumer.Record {
			var recs []consumer.Record
			resp, recs = g.HeartbeatFrom(now, img, req, consumer.Client{ID: cc.ClientID, Host: cc.ClientHost, MayDescribe: may})
			return recs
		})
	finishHeartbeat(h, req.Group, ConsumerGroupType, exists, wait, err, fail, func() { respond(resp) })
}
