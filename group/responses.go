package group

import "github.com/twmb/franz-go/pkg/kmsg"

// joinError is a failed JoinGroup response: generation -1, no protocol.
// memberID is echoed (or, for MEMBER_ID_REQUIRED, the id to rejoin with).
func joinError(version int16, memberID string, err error) *kmsg.JoinGroupResponse {
	r := kmsg.NewPtrJoinGroupResponse()
	r.Version = version
	r.ErrorCode = ErrorCode(err)
	r.MemberID = memberID
	return r
}

// joinOK is a successful JoinGroup response for m in the current generation.
// The leader gets every member's metadata for the chosen protocol (in join
// order) when withMembers is set; everyone else gets an empty list.
func (g *Group) joinOK(m *member, version int16, leader string, withMembers bool) *kmsg.JoinGroupResponse {
	r := kmsg.NewPtrJoinGroupResponse()
	r.Version = version
	r.Generation = g.generation
	r.ProtocolType = kmsg.StringPtr(g.protocolType)
	r.Protocol = kmsg.StringPtr(g.protocol)
	r.LeaderID = leader
	r.MemberID = m.id
	if withMembers {
		r.Members = g.memberMetadata()
	}
	return r
}

// memberMetadata lists every member's metadata for the chosen protocol.
func (g *Group) memberMetadata() []kmsg.JoinGroupResponseMember {
	out := make([]kmsg.JoinGroupResponseMember, 0, len(g.order))
	for _, m := range g.order {
		jm := kmsg.NewJoinGroupResponseMember()
		jm.MemberID = m.id
		jm.InstanceID = m.instanceID
		jm.ProtocolMetadata = m.metadata(g.protocol)
		out = append(out, jm)
	}
	return out
}

func syncError(version int16, err error) *kmsg.SyncGroupResponse {
	r := kmsg.NewPtrSyncGroupResponse()
	r.Version = version
	r.ErrorCode = ErrorCode(err)
	return r
}

func (g *Group) syncOK(m *member, version int16) *kmsg.SyncGroupResponse {
	r := kmsg.NewPtrSyncGroupResponse()
	r.Version = version
	r.ProtocolType = kmsg.StringPtr(g.protocolType)
	r.Protocol = kmsg.StringPtr(g.protocol)
	r.MemberAssignment = m.assignment
	return r
}
