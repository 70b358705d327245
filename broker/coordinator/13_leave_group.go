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

// LeaveGroup: v0-5
//
// Behaviour: removes the member (v0-2) or members (v3+, by member id or
// group instance id, each with its own error) and rebalances the rest. In
// a KIP-848 consumer group it removes classic members (package
// group/consumer), answered once the removal is committed.
//
// Version notes: v3: batch leave (KIP-345); v4: flexible; v5: reason
func leaveGroupEntry(h APIHost) api.Entry {
	return api.Entry{
		Key: 13, Client: api.Versions(0, 5), Handle: bindTo(h, handleLeaveGroup),
		Rule: api.Needs("READ on GROUP", 1, api.GroupTop(acl.OpRead, func(r kmsg.Request) string { return r.(*kmsg.LeaveGroupRequest).Group })),
	}
}

func handleLeaveGroup(h APIHost, cc *api.Conn, kreq kmsg.Request, respond func(kmsg.Response)) {
	req := kreq.(*kmsg.LeaveGroupRequest)
	var resp kmsg.Response
	fail := func(code int16) {
		r := req.ResponseKind().(*kmsg.LeaveGroupResponse)
		r.ErrorCode = code
		respond(r)
	}
	if code := requestCode(h, req.Group); code != 0 {
		fail(code)
		return
	}
	var cresp kmsg.Response
	exists, wait, err := h.Coordinator().WithClassic(req.Group, false, func(g *group.Group) []group.Reply {
		replies, r := g.Leave(time.Now().UnixMilli(), req)
		resp = r
		return replies
	}, func(g *consumer.Group, img *consumer.Image, now int64) []consumer.Record {
		r, recs := g.ClassicLeave(now, img, req)
		cresp = r
		return recs
	})
	switch {
	case !exists:
		fail(kerr.UnknownMemberID.Code)
	case cresp != nil:
		finishClassic(h, req.Group, wait, err, fail, func() { respond(cresp) })
	default:
		respond(resp)
	}
}
