package coordinator

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordlog/fjord/broker/acl"
	"github.com/fjordlog/fjord/broker/api"
	"github.com/fjordlog/fjord/group"
)

// DescribeGroups: v0-6
//
// Behaviour: state, protocol and members (with assignments) of each group
// (a KIP-848 consumer group or a share group as Kafka describes one to
// this API: Dead, and from v6 GROUP_ID_NOT_FOUND, "Group <id> is not a
// classic group.");
// a group with only committed offsets is Empty. An unknown group is Dead
// with no error before v6, as Kafka answers those versions; from v6
// (KIP-1043) it is GROUP_ID_NOT_FOUND, still Dead, with Kafka's message
// ("Group <id> not found."). v3+ asked for authorized operations (KIP-430)
// get the operations the principal may perform on the group, from the
// authorizer, when the group is described without an error
// (-2147483648 otherwise, and when not asked).
//
// Version notes: v1: throttle; v3: authorized operations; v4: group
// instance id; v5: flexible; v6: per-group error message, unknown groups
// GROUP_ID_NOT_FOUND (KIP-1043)
func describeGroupsEntry(h APIHost) api.Entry {
	return api.Entry{
		Key: 15, Client: api.Versions(0, 6), Handle: bindTo(h, handleDescribeGroups),
		Rule: api.Needs("DESCRIBE on GROUP", 0, checkDescribeGroups),
	}
}

func handleDescribeGroups(h APIHost, cc *api.Conn, kreq kmsg.Request, respond func(kmsg.Response)) {
	req := kreq.(*kmsg.DescribeGroupsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeGroupsResponse)
	for _, id := range req.Groups {
		var d kmsg.DescribeGroupsResponseGroup
		if code := requestCode(h, id); code != 0 {
			d = kmsg.NewDescribeGroupsResponseGroup()
			d.Group, d.ErrorCode = id, code
		} else if !h.Coordinator().With(id, false, func(g *group.Group) []group.Reply {
			d = g.Describe()
			return nil
		}) {
			d = kmsg.NewDescribeGroupsResponseGroup()
			d.Group, d.State = id, "Dead"
			switch t := h.Coordinator().GroupType(id); {
			case t == ConsumerGroupType || t == ShareGroupType:
				// Kafka's answer for a group of another type: from v6
				// GROUP_ID_NOT_FOUND with its message, before it Dead.
				if req.Version >= 6 {
					d.ErrorCode = kerr.GroupIDNotFound.Code
					m := fmt.Sprintf("Group %s is not a classic group.", id)
					d.ErrorMessage = &m
				}
			case len(h.Coordinator().Offsets(id)) > 0:
				d.State = "Empty"
			}
		}
		if req.Version >= 6 {
			if d.ErrorCode == 0 && d.State == "Dead" {
				d.ErrorCode = kerr.GroupIDNotFound.Code
				m := fmt.Sprintf("Group %s not found.", id)
				d.ErrorMessage = &m
			} else if d.ErrorMessage == nil {
				d.ErrorMessage = errorMessage(d.ErrorCode)
			}
		}
		if req.IncludeAuthorizedOperations && d.ErrorCode == 0 {
			// Kafka's KafkaApis tells the operations of a group only
			// when it describes it without an error.
			d.AuthorizedOperations = h.AuthorizedOps(cc, acl.ResourceGroup, id)
		}
		resp.Groups = append(resp.Groups, d)
	}
	respond(resp)
}

func checkDescribeGroups(z *api.Authz, kreq kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
	req := kreq.(*kmsg.DescribeGroupsRequest)
	keep, denied := api.SiftGroups(z, acl.OpDescribe, req.Groups)
	if len(denied) > 0 {
		req.Groups = keep
	}
	// Never answered without the handler, even with every group denied:
	// the handler answers the empty list.
	return nil, api.Amend(len(denied), func(resp *kmsg.DescribeGroupsResponse) {
		for _, g := range denied {
			rg := kmsg.NewDescribeGroupsResponseGroup()
			rg.Group, rg.ErrorCode = g, api.GroupDenied
			if resp.Version >= 6 {
				rg.ErrorMessage = errorMessage(rg.ErrorCode)
			}
			resp.Groups = append(resp.Groups, rg)
		}
	})
}
