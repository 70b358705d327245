package consumer

import (
	"fmt"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordlog/fjord/group/internal/ptr"
)

// Describe returns the group as ConsumerGroupDescribe v0-v1 reports it
// (Kafka's ConsumerGroup.asDescribedGroup): state, epochs, the preferred
// assignor, and every member with its subscription, its current and its
// target assignment, topics named from img (topics img does not know are
// left out, as Kafka does). Members are sorted by id, topics by name.
// AuthorizedOperations is left at kmsg's default for the caller. A group
// that does not exist answers GROUP_ID_NOT_FOUND.
func (g *Group) Describe(img *Image) kmsg.ConsumerGroupDescribeResponseGroup {
	d := kmsg.NewConsumerGroupDescribeResponseGroup()
	d.Group = g.id
	if !g.exists() {
		d.ErrorCode = kerr.GroupIDNotFound.Code
		msg := fmt.Sprintf("Group %s not found.", g.id)
		d.ErrorMessage = &msg
		return d
	}
	d.State = g.State()
	d.Epoch = g.epoch
	d.AssignmentEpoch = g.assignmentEpoch
	d.AssignorName = g.preferredAssignor()
	for _, m := range g.sortedMembers() {
		dm := kmsg.NewConsumerGroupDescribeResponseGroupMember()
		dm.MemberID = m.id
		dm.InstanceID = ptr.Clone(m.meta.instanceID)
		dm.RackID = ptr.Clone(m.meta.rackID)
		dm.MemberEpoch = m.cur.epoch
		dm.ClientID = m.meta.clientID
		dm.ClientHost = m.meta.clientHost
		dm.SubscribedTopics = slices.Clone(m.meta.topics)
		dm.SubscribedTopicRegex = ptr.Clone(m.meta.regex)
		dm.Assignment = describeAssignment(m.cur.assigned, img)
		dm.TargetAssignment = describeAssignment(g.target[m.id], img)
		dm.MemberType = 1 // a consumer-protocol member
		if m.meta.classic != nil {
			dm.MemberType = 0
		}
		d.Members = append(d.Members, dm)
	}
	return d
}

func describeAssignment(a assignment, img *Image) kmsg.Assignment {
	da := kmsg.NewAssignment()
	da.TopicPartitions = []kmsg.AssignmentTopicPartition{}
	for t, ps := range a {
		topic, ok := img.ByID(t)
		if !ok {
			continue
		}
		tp := kmsg.NewAssignmentTopicPartition()
		tp.TopicID, tp.Topic, tp.Partitions = t, topic.Name, slices.Clone(ps)
		da.TopicPartitions = append(da.TopicPartitions, tp)
	}
	slices.SortFunc(da.TopicPartitions, func(x, y kmsg.AssignmentTopicPartition) int { return strings.Compare(x.Topic, y.Topic) })
	return da
}

// DescribeClassic is what DescribeGroups answers for a consumer group.
// Kafka 4.x describes only classic groups there
// (GroupMetadataManager.describeGroups): any other group is "not found",
// answered as GROUP_ID_NOT_FOUND with the message "Group <id> is not a
// classic group." and state Dead. That is the v6+ (KIP-1043) form returned
// here; for DescribeGroups v0-v5 the caller clears ErrorCode and
// ErrorMessage, leaving state Dead, as Kafka answers older versions.
func (g *Group) DescribeClassic() kmsg.DescribeGroupsResponseGroup {
	d := kmsg.NewDescribeGroupsResponseGroup()
	d.Group = g.id
	d.State = "Dead"
	d.ErrorCode = kerr.GroupIDNotFound.Code
	msg := fmt.Sprintf("Group %s is not a classic group.", g.id)
	if !g.exists() {
		msg = fmt.Sprintf("Group %s not found.", g.id)
	}
	d.ErrorMessage = &msg
	return d
}
