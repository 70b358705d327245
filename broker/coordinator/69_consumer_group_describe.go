package coordinator

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordlog/fjord/broker/acl"
	"github.com/fjordlog/fjord/broker/api"
	"github.com/fjordlog/fjord/group/consumer"
)

// ConsumerGroupDescribe: v0-1
//
// Behaviour: each KIP-848 group's state, epochs, assignor, and members
// with their subscriptions, assignments and target assignments, as
// package group/consumer describes them. A group id that is not a
// consumer group answers GROUP_ID_NOT_FOUND ("Group <id> not found." or,
// for a classic group, "Group <id> is not a consumer group."), as Kafka
// does. Authorized operations (KIP-430) are told when asked and the
// group is described without an error.
//
// Version notes: v1: member type (classic or consumer member)
func consumerGroupDescribeEntry(h APIHost) api.Entry {
	return api.Entry{
		Key: 69, Client: api.Versions(0, 1), Handle: bindTo(h, handleConsumerGroupDescribe),
		Rule: api.Needs("DESCRIBE on GROUP", 0, checkConsumerGroupDescribe),
	}
}

func handleConsumerGroupDescribe(h APIHost, cc *api.Conn, kreq kmsg.Request, respond func(kmsg.Response)) {
	req := kreq.(*kmsg.ConsumerGroupDescribeRequest)
	resp := req.ResponseKind().(*kmsg.ConsumerGroupDescribeResponse)
	for _, id := range req.Groups {
		d := kmsg.NewConsumerGroupDescribeResponseGroup()
		d.Group = id
		if code := requestCode(h, id); code != 0 {
			d.ErrorCode = code
			resp.Groups = append(resp.Groups, d)
			continue
		}
		exists, _, err := h.Coordinator().Consumer(id, false, func(g *consumer.Group, img *consumer.Image, _ int64) []consumer.Record {
			d = g.Describe(img)
			return nil
		})
		switch {
		case err != nil:
			d.ErrorCode = kerr.GroupIDNotFound.Code
			m := fmt.Sprintf("Group %s is not a consumer group.", id)
			d.ErrorMessage = &m
		case !exists:
			d.ErrorCode = kerr.GroupIDNotFound.Code
			m := fmt.Sprintf("Group %s not found.", id)
			d.ErrorMessage = &m
		}
		d.Group, d.AuthorizedOperations = id, -2147483648
		if req.IncludeAuthorizedOperations && d.ErrorCode == 0 {
			d.AuthorizedOperations = h.AuthorizedOps(cc, acl.ResourceGroup, id)
		}
		resp.Groups = append(resp.Groups, d)
	}
	respond(resp)
}

func checkConsumerGroupDescribe(z *api.Authz, kreq kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
	req := kreq.(*kmsg.ConsumerGroupDescribeRequest)
	keep, denied := api.SiftGroups(z, acl.OpDescribe, req.Groups)
	if len(denied) > 0 {
		req.Groups = keep
	}
	return nil, api.Amend(len(denied), func(resp *kmsg.ConsumerGroupDescribeResponse) {
		for _, g := range denied {
			rg := kmsg.NewConsumerGroupDescribeResponseGroup()
			rg.Group, rg.ErrorCode, rg.AuthorizedOperations = g, api.GroupDenied, -2147483648
			rg.ErrorMessage = errorMessage(rg.ErrorCode)
			resp.Groups = append(resp.Groups, rg)
		}
	})
}
