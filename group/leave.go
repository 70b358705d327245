package group

import (
	"strings"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Leave handles a LeaveGroup (v0-5). Its own response is immediate; the
// replies are for other members' parked requests that the departures
// released (a join phase that was only waiting for the leavers ends).
//
// v0-2 name one member id; its error is the response's. v3+ (KIP-345) name
// a batch, each by member id, or by group.instance.id with an empty member
// id (how admin clients remove static members), and each gets its own
// error: UNKNOWN_MEMBER_ID, or FENCED_INSTANCE_ID for a member id that is
// not the instance's current one; the response's own error is then NONE.
// A pending member id (MEMBER_ID_REQUIRED) may leave too. A group left
// without members ends its join phase and becomes Empty.
//
// Static members leave only this way (or by session timeout): closing a
// connection is not leaving, and the caller must not turn it into one.
func (g *Group) Leave(now int64, req *kmsg.LeaveGroupRequest) ([]Reply, *kmsg.LeaveGroupResponse) {
	g.out = nil
	resp := req.ResponseKind().(*kmsg.LeaveGroupResponse)
	if g.state == stateDead {
		resp.ErrorCode = ErrorCode(ErrGroupDead)
		return nil, resp
	}
	if req.Version < 3 {
		resp.ErrorCode = ErrorCode(g.leave(now, req.MemberID, nil))
		return g.flush(), resp
	}
	for _, rm := range req.Members {
		lm := kmsg.NewLeaveGroupResponseMember()
		lm.MemberID = rm.MemberID
		lm.InstanceID = rm.InstanceID
		lm.ErrorCode = ErrorCode(g.leave(now, rm.MemberID, rm.InstanceID))
		resp.Members = append(resp.Members, lm)
	}
	return g.flush(), resp
}

func (g *Group) leave(now int64, memberID string, inst *string) error {
	if inst != nil {
		s := strings.Clone(*inst)
		inst = &s
	}
	if memberID == "" {
		if inst == nil || g.static[*inst] == nil {
			return ErrUnknownMember
		}
		g.removeMember(now, g.static[*inst], CauseMemberLeft)
		return nil
	}
	if _, ok := g.pending[memberID]; ok && inst == nil {
		delete(g.pending, memberID)
		g.maybeCompleteJoin(now)
		return nil
	}
	m, err := g.validateMember(memberID, inst)
	if err != nil {
		return err
	}
	g.removeMember(now, m, CauseMemberLeft)
	return nil
}
