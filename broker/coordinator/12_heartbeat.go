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

// Heartbeat: v0-4
//
// Behaviour: refreshes the member's session; REBALANCE_IN_PROGRESS tells it
// to rejoin; UNKNOWN_MEMBER_ID / ILLEGAL_GENERATION / FENCED_INSTANCE_ID as
// package group decides, or, for a classic member of a KIP-848 consumer
// group, package group/consumer (REBALANCE_IN_PROGRESS whenever its
// assignment must change).
//
// Version notes: v3: group instance id; v4: flexible
func heartbeatEntry(h APIHost) api.Entry {
	return api.Entry{
		Key: 12, Client: api.Versions(0, 4), Handle: bindTo(h, handleHeartbeat),
		Rule: api.Needs("READ on GROUP", 1, api.GroupTop(acl.OpRead, func(r kmsg.Request) string { return r.(*kmsg.HeartbeatRequest).Group })),
	}
}

func handleHeartbeat(h APIHost, cc *api.Conn, kreq kmsg.Request, respond func(kmsg.Response)) {
	req := kreq.(*kmsg.HeartbeatRequest)
	var resp kmsg.Response
	code := requestCode(h, req.Group)
	if code == 0 {
		// A heartbeat writes nothing (wait is nil).
		exists, _, _ := h.Coordinator().WithClassic(req.Group, false, func(g *group.Group) []group.Reply {
			resp = g.Heartbeat(time.Now().UnixMilli(), req)
			return nil
		}, func(g *consumer.Group, _ *consumer.Image, now int64) []consumer.Record {
			resp = g.ClassicHeartbeat(now, req)
			return nil
		})
		if !exists {
			code = kerr.UnknownMemberID.Code
		}
	}
	if code != 0 {
		r := req.ResponseKind().(*kmsg.HeartbeatResponse)
		r.ErrorCode = code
		resp = r
	}
	respond(resp)
}
