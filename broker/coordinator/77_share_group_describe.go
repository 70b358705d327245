package coordinator

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordlog/fjord/broker/api"
	"github.com/fjordlog/fjord/group/share"
)

// ShareGroupDescribe: v1
//
// Behaviour: each KIP-932 share group's state, epochs, assignor
// ("simple") and members with their subscriptions and assignments, as
// package group/share describes them. A group id that is not a share
// group answers GROUP_ID_NOT_FOUND ("Group <id> not found." or, for
// another type's group, "Group <id> is not a share group."), as Kafka
// does. Authorized operations (KIP-430) are told when asked and the group
// is described without an error.
//
// Version notes: v0 was Kafka 4.0's early access; v1 (4.1+) is served
func shareGroupDescribeEntry(h APIHost) api.Entry {
	return api.Entry{
		Key: 77, Client: api.Versions(1, 1), Handle: bindTo(h, handleShareGroupDescribe),
		Rule: api.Needs("DESCRIBE on GROUP", 0, deniedGroups(
			func(r kmsg.Request) *[]string { return &r.(*kmsg.ShareGroupDescribeRequest).GroupIDs },
			func(r kmsg.Response, g string) {
				resp := r.(*kmsg.ShareGroupDescribeResponse)
				rg := kmsg.NewShareGroupDescribeResponseGroup()
				rg.GroupID, rg.ErrorCode, rg.AuthorizedOperations = g, api.GroupDenied, -2147483648
				rg.ErrorMessage = errorMessage(rg.ErrorCode)
				resp.Groups = append(resp.Groups, rg)
			})),
	}
}

func handleShareGroupDescribe(h APIHost, cc *api.Conn, kreq kmsg.Request, respond func(kmsg.Response)) {
	req := kreq.(*kmsg.ShareGroupDescribeRequest)
	resp := req.ResponseKind().(*kmsg.ShareGroupDescribeResponse)
	for _, id := range req.GroupIDs {
		d := kmsg.NewShareGroupDescribeResponseGroup()
		if code := requestCode(h, id); code != 0 {
			d.ErrorCode = code
		} else {
			exists, _, err := h.Coordinator().Share(id, false, func(g *share.Group, img *share.Image, _ int64) []share.Record {
				d = g.Describe(img)
				return nil
			})
			if code, msg := describeOutcome(id, ShareGroupType, exists, err); code != 0 {
				d.ErrorCode, d.ErrorMessage = code, msg
			}
		}
		if d.ErrorCode == 0 && !mayDescribeAll(h, cc, shareGroupTopics(d)) {
			d = kmsg.NewShareGroupDescribeResponseGroup()
			d.ErrorCode, d.ErrorMessage = hiddenTopicsError()
		}
		d.GroupID = id
		d.AuthorizedOperations = describedOps(h, cc, req.IncludeAuthorizedOperations, d.ErrorCode, id)
		resp.Groups = append(resp.Groups, d)
	}
	respond(resp)
}

// shareGroupTopics are the topics of a described share group's members'
// assignments.
func shareGroupTopics(d kmsg.ShareGroupDescribeResponseGroup) []string {
	var ts []string
	for _, m := range d.Members {
		for _, t := range m.Assignment.TopicPartitions {
			ts = append(ts, t.Topic)
		}
	}
	return ts
}
