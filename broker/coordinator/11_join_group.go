package coordinator

import (
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordlog/fjord/broker/acl"
	"github.com/fjordlog/fjord/broker/api"
	"github.com/fjordlog/fjord/group"
)

// JoinGroup: v0-9
//
// Behaviour: the classic group protocol, run by package group (see its
// documentation for the state machine and every forced exit). The response
// is held until the join phase completes, which may take up to the
// rebalance timeout; it is sent from whichever request or timeout
// completes the phase. A KIP-848 consumer group with members holds its id
// against classic members (INCONSISTENT_GROUP_PROTOCOL: no online
// migration between the protocols yet); an empty one is converted.
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
	if !h.Coordinator().With(req.Group, true, func(g *group.Group) []group.Reply {
		return g.Join(time.Now().UnixMilli(), req, meta, Respond(respond))
	}) {
		// A KIP-848 consumer group with members holds the id, and Fjord
		// does not migrate groups between protocols online yet.
		resp := req.ResponseKind().(*kmsg.JoinGroupResponse)
		resp.ErrorCode, resp.Generation, resp.MemberID = kerr.InconsistentGroupProtocol.Code, -1, req.MemberID
		respond(resp)
	}
}
