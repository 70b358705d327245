package group

import "github.com/twmb/franz-go/pkg/kmsg"

// Heartbeat handles a Heartbeat (v0-4); its response is always immediate.
//
// Checks, in Kafka's order: group Dead (COORDINATOR_NOT_AVAILABLE); member
// (UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID); generation (ILLEGAL_GENERATION).
// A valid heartbeat refreshes the member's session; during
// PreparingRebalance it answers REBALANCE_IN_PROGRESS so that the member
// rejoins.
func (g *Group) Heartbeat(now int64, req *kmsg.HeartbeatRequest) *kmsg.HeartbeatResponse {
	resp := req.ResponseKind().(*kmsg.HeartbeatResponse)
	resp.ErrorCode = ErrorCode(g.heartbeat(now, req))
	return resp
}

func (g *Group) heartbeat(now int64, req *kmsg.HeartbeatRequest) error {
	if g.state == stateDead {
		return ErrGroupDead
	}
	m, err := g.validateMember(req.MemberID, instanceID(req.InstanceID, req.Version, 3))
	if err != nil {
		return err
	}
	if req.Generation != g.generation {
		return ErrIllegalGeneration
	}
	m.refreshSession(now)
	if g.state == statePreparingRebalance {
		return ErrRebalanceInProgress
	}
	return nil
}
