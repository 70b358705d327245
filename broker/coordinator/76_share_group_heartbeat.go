package coordinator

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordlog/fjord/broker/acl"
	"github.com/fjordlog/fjord/broker/api"
	"github.com/fjordlog/fjord/group/share"
)

// ShareGroupHeartbeat: v1
//
// Behaviour: KIP-932's share group membership, run by package
// group/share: members subscribe to topics by name, the coordinator
// assigns every subscribed partition to one or more members with the
// "simple" assignor (a partition is shared when members outnumber
// partitions), and there is no revocation phase. The answer is sent once
// the records the heartbeat produced are committed on the offsets
// partition, as for KIP-848 groups (nextgen.go). A group id held by a
// group of another type answers GROUP_ID_NOT_FOUND ("Group <id> is not a
// share group."), as Kafka does. Subscribing needs DESCRIBE on every
// topic named (TOPIC_AUTHORIZATION_FAILED otherwise).
//
// Version notes: v0 was Kafka 4.0's early access, which Kafka 4.1 made
// incompatible; only v1 (4.1+) is served, as Kafka 4.2 does
func shareGroupHeartbeatEntry(h APIHost) api.Entry {
	return api.Entry{
		Key: 76, Client: api.Versions(1, 1), Handle: bindTo(h, handleShareGroupHeartbeat),
		Rule: api.Needs("READ on GROUP and DESCRIBE on the TOPICs subscribed", 1, api.All(
			api.GroupTop(acl.OpRead, func(r kmsg.Request) string { return r.(*kmsg.ShareGroupHeartbeatRequest).GroupID }),
			subscribedTopicsDenied(func(r kmsg.Request) []string { return r.(*kmsg.ShareGroupHeartbeatRequest).SubscribedTopicNames },
				func(r kmsg.Response, m string) { r.(*kmsg.ShareGroupHeartbeatResponse).ErrorMessage = &m }))),
	}
}

func handleShareGroupHeartbeat(h APIHost, cc *api.Conn, kreq kmsg.Request, respond func(kmsg.Response)) {
	req := kreq.(*kmsg.ShareGroupHeartbeatRequest)
	fail := func(code int16, msg string) {
		resp := req.ResponseKind().(*kmsg.ShareGroupHeartbeatResponse)
		resp.ErrorCode, resp.MemberEpoch = code, req.MemberEpoch
		if msg != "" {
			resp.ErrorMessage = &msg
		}
		respond(resp)
	}
	if code := requestCode(h, req.GroupID); code != 0 {
		fail(code, "")
		return
	}
	var resp *kmsg.ShareGroupHeartbeatResponse
	exists, wait, err := h.Coordinator().Share(req.GroupID, req.MemberEpoch == 0,
		func(g *share.Group, img *share.Image, now int64) []share.Record {
			var recs []share.Record
			resp, recs = g.HeartbeatFrom(now, img, req, share.Client{ID: cc.ClientID, Host: cc.ClientHost})
			return recs
		})
	finishHeartbeat(h, req.GroupID, ShareGroupType, exists, wait, err, fail, func() { respond(resp) })
}
