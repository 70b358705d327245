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

// SyncGroup: v0-5
//
// Behaviour: followers wait until the leader sends the assignment; then all
// get theirs and the group is Stable (package group). A classic member of
// a KIP-848 consumer group gets its assigned partitions at once, as a
// ConsumerProtocolAssignment (package group/consumer).
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
	if code == 0 {
		var cresp *kmsg.SyncGroupResponse
		exists, _, _ := h.Coordinator().WithClassic(req.Group, false, func(g *group.Group) []group.Reply {
			return g.Sync(time.Now().UnixMilli(), req, Respond(respond))
		}, func(g *consumer.Group, img *consumer.Image, now int64) []consumer.Record {
			cresp = g.ClassicSync(now, img, req)
			return nil
		})
		switch {
		case !exists:
			code = kerr.UnknownMemberID.Code
		case cresp != nil:
			respond(cresp)
		}
	}
	if code != 0 {
		resp := req.ResponseKind().(*kmsg.SyncGroupResponse)
		resp.ErrorCode = code
		respond(resp)
	}
}
