package coordinator

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordlog/fjord/broker/api"
	"github.com/fjordlog/fjord/group/consumer"
)

// ConsumerGroupDescribe: v0-1
//
// Behaviour: each KIP-848 group's state, epochs, assignor, and members
// with their subscriptions, assignments and target assignments, as
// package group/consumer describes them. A group id that is not a
// consumer group answers GROUP_ID_NOT_FOUND ("Group <id> not found." or,
// for another type's group, "Group <id> is not a consumer group."), as
// Kafka does. Authorized operations (KIP-430) are told when asked and the
// group is described without an error.
//
// Version notes: v1: member type (classic or consumer member)
func consumerGroupDescribeEntry(h APIHost) api.Entry {
	return api.Entry{
		Key: 69, Client: api.Versions(0, 1), Handle: bindTo(h, handleConsumerGroupDescribe),
		Rule: api.Needs("DESCRIBE on GROUP", 0, deniedGroups(
			func(r kmsg.Request) *[]string { return &r.(*kmsg.ConsumerGroupDescribeRequest).Groups },
			func(r kmsg.Response, g string) {
				resp := r.(*kmsg.ConsumerGroupDescribeResponse)
				rg := kmsg.NewConsumerGroupDescribeResponseGroup()
				rg.Group, rg.ErrorCode, rg.AuthorizedOperations = g, api.GroupDenied, -2147483648
				rg.ErrorMessage = errorMessage(rg.ErrorCode)
				resp.Groups = append(resp.Groups, rg)
			})),
	}
}

func handleConsumerGroupDescribe(h APIHost, cc *api.Conn, kreq kmsg.Request, respond func(kmsg.Response)) {
	req := kreq.(*kmsg.ConsumerGroupDescribeRequest)
	resp := req.ResponseKind().(*kmsg.ConsumerGroupDescribeResponse)
	for _, id := range req.Groups {
		d := kmsg.NewConsumerGroupDescribeResponseGroup()
		if code := requestCode(h, id); code != 0 {
			d.ErrorCode = code
		} else {
			exists, _, err := h.Coordinator().Consumer(id, false, nil, func(g *consumer.Group, img *consumer.Image, _ int64) []consumer.Record {
				d = g.Describe(img)
				return nil
			})
			if code, msg := describeOutcome(id, ConsumerGroupType, exists, err); code != 0 {
				d.ErrorCode, d.ErrorMessage = code, msg
			}
		}
		if d.ErrorCode == 0 && !mayDescribeAll(h, cc, consumerGroupTopics(d)) {
			d = kmsg.NewConsumerGroupDescribeResponseGroup()
			d.ErrorCode, d.ErrorMessage = hiddenTopicsError()
		}
		d.Group = id
		d.AuthorizedOperations = describedOps(h, cc, req.IncludeAuthorizedOperations, d.ErrorCode, id)
		resp.Groups = append(resp.Groups, d)
	}
	respond(resp)
}

// consumerGroupTopics are the topics of a described group's members'
// assignments and target assignments, the ones Kafka checks.
func consumerGroupTopics(d kmsg.ConsumerGroupDescribeResponseGroup) []string {
	var ts []string
	for _, m := range d.Members {
		for _, t := range m.Assignment.TopicPartitions {
			ts = append(ts, t.Topic)
		}
		for _, t := range m.TargetAssignment.TopicPartitions {
			ts = append(ts, t.Topic)
		}
	}
	return ts
}
