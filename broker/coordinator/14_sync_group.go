package coordinator

import (
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordlog/fjord/broker/acl"
	"github.com/fjordlog/fjord/broker/api"
	"github.com/fjordlog/fjord/group"
)

// SyncGroup: v0-5
//
// Behaviour: followers wait until the leader sends the assignment; then all
// get theirs and the group is Stable (package group).
//
// Version notes:
//   - v3: group instance id; v4: flexible; v5: protocol type and name
func syncGroupEntry(h APIHost) api.Entry {
	return api.Entry{
		Key: 14, Client: api.Versions(0, 5), Handle: bindTo(h, handleSyncGroup),
		Rule: api.Needs("READ on GROUP", 1, api.GroupTop(acl.OpRead, func(r kmsg.Request) string { return r.(*kmsg.SyncGroupRequest).Group })),
	}
}

func handleSyncGroup(h APIHost, cc *api.Conn, kreq kmsg.Request, respond func(kmsg.Response)) {
	req := kreq.(*kmsg.SyncGroupRequest)
	code := requestCode(h, req.Group)
	if code == 0 && !h.Coordinator().With(req.Group, false, func(g *group.Group) []group.Reply {
		return g.Sync(time.Now().UnixMilli(), req, Respond(respond))
	}) {
		code = kerr.UnknownMemberID.Code
	}
	if code != 0 {
		resp := req.ResponseKind().(*kmsg.SyncGroupResponse)
		resp.ErrorCode = code
		respond(resp)
	}
}
