package broker

import (
	"time"

	"github.com/fjordlog/fjord/group"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Heartbeat: v0-4
//
// Behaviour: refreshes the member's session; REBALANCE_IN_PROGRESS tells it
// to rejoin; UNKNOWN_MEMBER_ID / ILLEGAL_GENERATION / FENCED_INSTANCE_ID as
// package group decides.
//
// Version notes: v3: group instance id; v4: flexible
func init() { regKey(12, 0, 4, handleHeartbeat) }

func handleHeartbeat(b *Broker, cc *connCtx, kreq kmsg.Request, respond func(kmsg.Response)) {
	req := kreq.(*kmsg.HeartbeatRequest)
	var resp kmsg.Response
	code := b.groupRequestCode(req.Group)
	if code == 0 && !b.coord.With(req.Group, false, func(g *group.Group) []group.Reply {
		resp = g.Heartbeat(time.Now().UnixMilli(), req)
		return nil
	}) {
		code = kerr.UnknownMemberID.Code
	}
	if code != 0 {
		r := req.ResponseKind().(*kmsg.HeartbeatResponse)
		r.ErrorCode = code
		resp = r
	}
	respond(resp)
}
