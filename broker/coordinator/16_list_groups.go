package coordinator

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordlog/fjord/broker/acl"
	"github.com/fjordlog/fjord/broker/api"
)

// ListGroups: v0-5
//
// Behaviour: every group with members or committed offsets; v4 filters by
// state (KIP-518), case-insensitively as Kafka does. v5 (KIP-848) answers
// each group's type ("classic" for JoinGroup groups, "consumer" for
// KIP-848 groups) and filters by type, compared case-insensitively as
// Kafka's GroupType.parse does (a type Kafka does not know matches
// nothing).
//
// Version notes: v3: flexible; v4: states filter; v5: types filter and
// group type
func listGroupsEntry(h APIHost) api.Entry {
	return api.Entry{
		Key: 16, Client: api.Versions(0, 5), Handle: bindTo(h, handleListGroups),
		Rule: api.Needs("DESCRIBE on GROUP (others are not listed)", 0, checkListGroups),
	}
}

func handleListGroups(h APIHost, cc *api.Conn, kreq kmsg.Request, respond func(kmsg.Response)) {
	req := kreq.(*kmsg.ListGroupsRequest)
	resp := req.ResponseKind().(*kmsg.ListGroupsResponse)
	for _, s := range h.Coordinator().ListGroups() {
		if len(req.StatesFilter) > 0 && !containsFold(req.StatesFilter, s.State) ||
			len(req.TypesFilter) > 0 && !containsFold(req.TypesFilter, s.Type) {
			continue
		}
		g := kmsg.NewListGroupsResponseGroup()
		g.Group, g.ProtocolType, g.GroupState, g.GroupType = s.ID, s.ProtocolType, s.State, s.Type
		resp.Groups = append(resp.Groups, g)
	}
	respond(resp)
}

func containsFold(list []string, s string) bool {
	for _, x := range list {
		if len(x) == len(s) && equalFold(x, s) {
			return true
		}
	}
	return false
}

func equalFold(a, b string) bool {
	for i := 0; i < len(a); i++ {
		x, y := a[i], b[i]
		if 'A' <= x && x <= 'Z' {
			x += 'a' - 'A'
		}
		if 'A' <= y && y <= 'Z' {
			y += 'a' - 'A'
		}
		if x != y {
			return false
		}
	}
	return true
}

// checkListGroups: with DESCRIBE on the cluster every group is listed,
// else only the groups the principal may describe (Kafka's behaviour).
func checkListGroups(z *api.Authz, _ kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
	if z.Az.Authorize(z.Conn.Principal, z.Conn.ClientHost, acl.OpDescribe, acl.ResourceCluster, acl.ClusterName) {
		return nil, nil
	}
	return nil, func(r kmsg.Response) {
		resp := r.(*kmsg.ListGroupsResponse)
		resp.Groups = api.Visible(z, acl.ResourceGroup, resp.Groups, func(g kmsg.ListGroupsResponseGroup) string { return g.Group })
	}
}
