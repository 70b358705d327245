package coordinator

import (
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordlog/fjord/broker/acl"
	"github.com/fjordlog/fjord/broker/api"
	"github.com/fjordlog/fjord/group"
	"github.com/fjordlog/fjord/group/consumer"
)

// JoinGroup: v0-9
//
// Behaviour: the classic group protocol, run by package group (see its
// documentation for the state machine and every forced exit). The response
// is held until the join phase completes, which may take up to the
// rebalance timeout; it is sent from whichever request or timeout
// completes the phase. To a KIP-848 consumer group with members the
// member joins as a classic-protocol member (package group/consumer's
// ClassicJoin: answered at once, with its member epoch as the
// generation, once its records are committed); an empty consumer group
// is converted to a classic group. A share group holds its id
// (INCONSISTENT_GROUP_PROTOCOL).
//
// Version notes:
//   - v1: rebalance timeout; v4: member id required round trip (KIP-394);
//     v5: group instance id (KIP-345); v6: flexible; v7: protocol type and
//     name in the response; v8: reason; v9: skip assignment (KIP-814, set
//     when a static leader restarts)
func joinGroupEntry(h APIHost) api.Entry {
	return api.Entry{
		Key: 11, Client: api.Versions(0, 9), Handle: bindTo(h, handleJoinGroup),
		Rule: api.Needs("READ on GROUP", 1, api.GroupTop(acl.OpRead, func(r kmsg.Request) string { return r.(*kmsg.JoinGroupRequest).Group })),
	}
}

func handleJoinGroup(h APIHost, cc *api.Conn, kreq kmsg.Request, respond func(kmsg.Response)) {
	req := kreq.(*kmsg.JoinGroupRequest)
	if code := requestCode(h, req.Group); code != 0 {
		resp := req.ResponseKind().(*kmsg.JoinGroupResponse)
		resp.ErrorCode, resp.Generation, resp.LeaderID, resp.MemberID = code, -1, "", req.MemberID
		respond(resp)
		return
	}
	meta := group.JoinMeta{ClientID: cc.ClientID, ClientHost: cc.ClientHost}
	fail := func(code int16) {
		resp := req.ResponseKind().(*kmsg.JoinGroupResponse)
		resp.ErrorCode, resp.Generation, resp.MemberID = code, -1, req.MemberID
		respond(resp)
	}
	var cresp *kmsg.JoinGroupResponse // the consumer group's answer
	exists, wait, err := h.Coordinator().WithClassic(req.Group, true, func(g *group.Group) []group.Reply {
		return g.Join(time.Now().UnixMilli(), req, meta, Respond(respond))
	}, func(g *consumer.Group, img *consumer.Image, now int64) []consumer.Record {
		var recs []consumer.Record
		cresp, recs = g.ClassicJoin(now, img, req, consumer.Client{ID: cc.ClientID, Host: cc.ClientHost})
		return recs
	})
	switch {
	case !exists:
		// A share group holds the id.
		fail(kerr.InconsistentGroupProtocol.Code)
	case cresp != nil:
		finishClassic(h, req.Group, wait, err, fail, func() { respond(cresp) })
	}
}
