package group

import (
	"slices"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// supportsProtocols reports whether a JoinGroup from member self (""
// for a new member) with this protocol type and these protocols may join:
// type and protocols non-empty; if the group has members, the same type;
// and at least one protocol that every other member supports. This keeps
// the invariant that some protocol is supported by every member, so
// selectProtocol always finds one.
//
// Unlike Kafka, self's current protocols are not counted: Kafka requires a
// protocol supported by as many members as the group has, self's old
// protocols included, so a sole member cannot switch protocols.
func (g *Group) supportsProtocols(self, protocolType string, protocols []kmsg.JoinGroupRequestProtocol) bool {
	if protocolType == "" || len(protocols) == 0 {
		return false
	}
	if len(g.members) > 0 && protocolType != g.protocolType {
		return false
	}
	for i := range protocols {
		if g.supportedByOthers(self, protocols[i].Name) {
			return true
		}
	}
	return false
}

func (g *Group) supportedByOthers(self, name string) bool {
	for _, m := range g.order {
		if m.id != self && !m.supports(name) {
			return false
		}
	}
	return true
}

// selectProtocol chooses the group's protocol as Kafka does: the candidates
// are the protocols every member supports; each member votes for the
// candidate it prefers most; most votes wins. A tie goes to the candidate
// the leader prefers (Kafka leaves ties to hash map order). "" without
// members.
func (g *Group) selectProtocol() string {
	if len(g.order) == 0 {
		return ""
	}
	ref := g.members[g.leader]
	if ref == nil {
		ref = g.order[0]
	}
	// Every candidate is in ref's list, so ref's order ranks them.
	var candidates []string
	for _, p := range ref.protocols {
		if g.supportedByOthers("", p.Name) && !slices.Contains(candidates, p.Name) {
			candidates = append(candidates, p.Name)
		}
	}
	votes := make(map[string]int, len(candidates))
	for _, m := range g.order {
		for _, p := range m.protocols {
			if slices.Contains(candidates, p.Name) {
				votes[p.Name]++
				break
			}
		}
	}
	best := ""
	for _, c := range candidates {
		if best == "" || votes[c] > votes[best] {
			best = c
		}
	}
	return best
}
