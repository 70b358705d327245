package group

import (
	"bytes"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// JoinMeta is what the connection knows about the client sending a
// JoinGroup: its client id (request header) and remote host. The group
// keeps them for DescribeGroups and uses the client id as the prefix of
// generated member ids.
type JoinMeta struct {
	ClientID   string
	ClientHost string
}

// parked is a request whose response is not ready yet: a JoinGroup waiting
// for the join phase to end or a SyncGroup waiting for the leader.
type parked struct {
	token   any   // the caller's, returned in the Reply
	version int16 // the request's version, given to the response
}

// member is one member of the group.
//
// Strings and byte slices are copies owned by the group: requests decoded
// from a reused buffer may alias it. Byte slices are replaced, never
// modified in place, so replies may share them.
type member struct {
	id         string
	instanceID *string // group.instance.id; nil for a dynamic member
	clientID   string
	clientHost string

	// sessionTimeoutMs and rebalanceTimeoutMs come from the member's latest
	// JoinGroup. Invariant: sessionTimeoutMs within the configured bounds;
	// rebalanceTimeoutMs >= 1.
	sessionTimeoutMs   int32
	rebalanceTimeoutMs int32

	// protocols are the member's protocols in its order of preference, from
	// its latest JoinGroup. Invariant: non-empty.
	protocols []kmsg.JoinGroupRequestProtocol

	// assignment is what the leader's SyncGroup gave this member; nil before.
	assignment []byte

	// join is the member's parked JoinGroup.
	// Invariant: non-nil only in PreparingRebalance.
	join *parked
	// sync is the member's parked SyncGroup.
	// Invariant: non-nil only in CompletingRebalance.
	sync *parked

	// sessionDeadline is when the member is evicted for silence: Tick at
	// now >= sessionDeadline removes it, unless join or sync is parked: a
	// member waiting on the coordinator satisfies its session, as in Kafka.
	// Refreshed by heartbeats and by every response that completes a
	// JoinGroup or SyncGroup.
	sessionDeadline int64

	// forced counts the rebalances this member's joins forced since the
	// group was last Stable. Use: Config.MaxRebalanceAttempts.
	forced int

	// replaced is the member id this static member fenced when it took the
	// instance id over ("" if none); it is the member's entry in
	// Group.fenced, deleted with the member.
	replaced string
}

// waiting reports whether the member has a request parked, which exempts it
// from session expiry.
func (m *member) waiting() bool { return m.join != nil || m.sync != nil }

func (m *member) refreshSession(now int64) {
	m.sessionDeadline = now + int64(m.sessionTimeoutMs)
}

// supports reports whether the member lists protocol name.
func (m *member) supports(name string) bool {
	for i := range m.protocols {
		if m.protocols[i].Name == name {
			return true
		}
	}
	return false
}

// metadata is the member's metadata for protocol name (nil if it lacks it).
func (m *member) metadata(name string) []byte {
	for i := range m.protocols {
		if m.protocols[i].Name == name {
			return m.protocols[i].Metadata
		}
	}
	return nil
}

// matches reports whether protocols are exactly the member's current ones,
// names and metadata, in the same order: a rejoin that changes nothing.
func (m *member) matches(protocols []kmsg.JoinGroupRequestProtocol) bool {
	if len(protocols) != len(m.protocols) {
		return false
	}
	for i := range protocols {
		if protocols[i].Name != m.protocols[i].Name || !bytes.Equal(protocols[i].Metadata, m.protocols[i].Metadata) {
			return false
		}
	}
	return true
}

// update takes the member's settings from a JoinGroup.
func (m *member) update(req *kmsg.JoinGroupRequest, meta JoinMeta) {
	m.protocols = copyProtocols(req.Protocols)
	m.sessionTimeoutMs = req.SessionTimeoutMillis
	m.rebalanceTimeoutMs = rebalanceTimeout(req)
	m.clientID = strings.Clone(meta.ClientID)
	m.clientHost = strings.Clone(meta.ClientHost)
}

// rebalanceTimeout is the request's rebalance timeout; v0 has none and uses
// the session timeout, as Kafka does, and so does a non-positive value.
func rebalanceTimeout(req *kmsg.JoinGroupRequest) int32 {
	if req.Version < 1 || req.RebalanceTimeoutMillis <= 0 {
		return req.SessionTimeoutMillis
	}
	return req.RebalanceTimeoutMillis
}

// instanceID returns the request's group.instance.id, or nil when absent
// or when the version cannot carry it.
func instanceID(id *string, version, since int16) *string {
	if id == nil || version < since {
		return nil
	}
	s := strings.Clone(*id)
	return &s
}

func copyProtocols(ps []kmsg.JoinGroupRequestProtocol) []kmsg.JoinGroupRequestProtocol {
	out := make([]kmsg.JoinGroupRequestProtocol, len(ps))
	for i, p := range ps {
		out[i] = kmsg.JoinGroupRequestProtocol{
			Name:     strings.Clone(p.Name),
			Metadata: bytes.Clone(p.Metadata),
		}
	}
	return out
}

// newMemberID returns prefix-[nonce-]n with n from the group's counter.
// Ids are unique within the group: the text after the last '-' is the
// counter, never reused.
func (g *Group) newMemberID(prefix string) string {
	g.nextID++
	n := strconv.FormatUint(g.nextID, 10)
	if g.cfg.MemberIDNonce != "" {
		return prefix + "-" + g.cfg.MemberIDNonce + "-" + n
	}
	return prefix + "-" + n
}

// who names m in the rebalance timeline: its instance id when static
// (stable across its member ids), else its member id.
func (m *member) who() string {
	if m.instanceID != nil {
		return *m.instanceID
	}
	return m.id
}
