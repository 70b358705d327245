package coordinator

import (
	"errors"
	"fmt"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordlog/fjord/broker/acl"
	"github.com/fjordlog/fjord/broker/api"
	"github.com/fjordlog/fjord/group"
)

// What the next-generation heartbeats (68 ConsumerGroupHeartbeat, 76
// ShareGroupHeartbeat) do alike: answer once the step's records are
// committed, map a group of another type and a missing group to Kafka's
// codes, and refuse topics the member may not describe.

// finishHeartbeat answers a heartbeat whose step ran (or did not) in a
// group of type kind: send once wait says the records are committed,
// else fail with the code and message Kafka gives.
func finishHeartbeat(h APIHost, id, kind string, exists bool, wait func() error, err error,
	fail func(code int16, msg string), send func()) {
	var refused interface{ KafkaMessage() string }
	switch {
	case errors.As(err, &refused):
		// An online upgrade refused (policy, protocol type, size, or the
		// classic members' metadata), with Kafka's code and message.
		fail(group.ErrorCode(err), refused.KafkaMessage())
		return
	case errors.Is(err, ErrOtherGroupType):
		fail(kerr.GroupIDNotFound.Code, fmt.Sprintf("Group %s is not a %s group.", id, kind))
		return
	case !exists:
		// As in Kafka: a heartbeat from a member of a group the
		// coordinator does not have (deleted, or expired) is an unknown
		// member, which rejoins with a new id.
		fail(kerr.UnknownMemberID.Code, fmt.Sprintf("%s group %s not found.", strings.ToUpper(kind[:1])+kind[1:], id))
		return
	case err != nil:
		fail(CommitErrorCode(err, h.Code), "")
		return
	case wait == nil:
		send()
		return
	}
	h.Go(func() {
		if err := wait(); err != nil {
			h.Log().Warn().Err(err).Str("group", id).Str("type", kind).Msg("group heartbeat not persisted")
			fail(CommitErrorCode(err, h.Code), "")
			return
		}
		send()
	})
}

// finishClassic answers a classic-protocol request that ran on a
// consumer group's classic member: send once wait says its records are
// committed, else fail with the code the commit's error maps to.
func finishClassic(h APIHost, id string, wait func() error, err error, fail func(code int16), send func()) {
	switch {
	case err != nil:
		fail(CommitErrorCode(err, h.Code))
	case wait == nil:
		send()
	default:
		h.Go(func() {
			if err := wait(); err != nil {
				h.Log().Warn().Err(err).Str("group", id).Msg("classic member's records not persisted")
				fail(CommitErrorCode(err, h.Code))
				return
			}
			send()
		})
	}
}

// subscribedTopicsDenied is a heartbeat's rule that the topics a member
// subscribes to by name are ones it may describe; Kafka answers
// TOPIC_AUTHORIZATION_FAILED naming them.
func subscribedTopicsDenied(names func(kmsg.Request) []string, setErr func(resp kmsg.Response, msg string)) api.Check {
	return func(z *api.Authz, req kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
		_, denied := api.Split(z, acl.OpDescribe, names(req), func(t string) string { return t })
		if len(denied) == 0 {
			return nil, nil
		}
		resp := api.TopErrorResponse(req, api.TopicDenied)
		setErr(resp, "Topic authorization failed for topics: "+strings.Join(denied, ", "))
		return resp, nil
	}
}

// describeOutcome is the error a describe of group id as a group of type
// kind answers, Kafka's way: GROUP_ID_NOT_FOUND with "Group <id> is not
// a <kind> group." for another type's group, "Group <id> not found." for
// none; 0 when it was described.
func describeOutcome(id, kind string, exists bool, err error) (int16, *string) {
	var m string
	switch {
	case err != nil:
		m = fmt.Sprintf("Group %s is not a %s group.", id, kind)
	case !exists:
		m = fmt.Sprintf("Group %s not found.", id)
	default:
		return 0, nil
	}
	return kerr.GroupIDNotFound.Code, &m
}

// describedOps is KIP-430's answer for a described group: the operations
// cc's principal may perform on it, told only when asked and the group
// was described without an error (-2147483648 otherwise).
func describedOps(h APIHost, cc *api.Conn, asked bool, code int16, id string) int32 {
	if !asked || code != 0 {
		return -2147483648
	}
	return h.AuthorizedOps(cc, acl.ResourceGroup, id)
}

// deniedGroups is a describe's rule: the groups the principal may not
// describe are answered GROUP_AUTHORIZATION_FAILED by add, the others
// are described.
func deniedGroups(groups func(kmsg.Request) *[]string, add func(resp kmsg.Response, group string)) api.Check {
	return func(z *api.Authz, req kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
		gs := groups(req)
		keep, denied := api.SiftGroups(z, acl.OpDescribe, *gs)
		if len(denied) == 0 {
			return nil, nil
		}
		*gs = keep
		return nil, func(resp kmsg.Response) {
			for _, g := range denied {
				add(resp, g)
			}
		}
	}
}

// mayDescribeAll reports whether cc's principal may DESCRIBE every one of
// topics. A group described to a principal that may not describe some
// topic its members are assigned is answered hiddenTopicsError instead,
// as Kafka does (KAFKA-18813): the description would tell that topic's
// name and partitions.
func mayDescribeAll(h APIHost, cc *api.Conn, topics []string) bool {
	may := h.MayDescribeTopics(cc)
	for _, t := range topics {
		if !may(t) {
			return false
		}
	}
	return true
}

// hiddenTopicsError is Kafka's answer for a described group that uses
// topics the describer may not describe.
func hiddenTopicsError() (int16, *string) {
	m := "The described group uses topics that the client is not authorized to describe."
	return kerr.TopicAuthorizationFailed.Code, &m
}
