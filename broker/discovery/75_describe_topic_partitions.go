package discovery

import (
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordlog/fjord/broker/acl"
	"github.com/fjordlog/fjord/broker/api"
	"github.com/fjordlog/fjord/broker/coordinator"
	"github.com/fjordlog/fjord/broker/sharecoord"
	"github.com/fjordlog/fjord/broker/txncoord"
	"github.com/fjordlog/fjord/controller"
)

// DescribeTopicPartitions: v0
//
// Behaviour (KIP-966's paged topic description, as Kafka's broker answers
// it; an admin client's describeTopics uses it from Kafka 3.8):
//   - Answered from this broker's image, like Metadata.
//   - Topics: every topic when the list is empty, else the named ones
//     (duplicates once). Either way only names at or after the cursor's
//     topic, sorted by name. A named topic that does not exist is listed
//     with UNKNOWN_TOPIC_OR_PARTITION (INVALID_TOPIC_EXCEPTION for a name
//     Kafka could never hold) and a zero topic id; listing all topics never
//     shows errors.
//   - Paging: at most ResponsePartitionLimit partitions, capped at 2,000
//     (Kafka's max.request.partition.size.limit default) and at least 1.
//     The cursor's topic starts at the cursor's partition, every later topic
//     at 0. When the limit stops the answer inside a topic, NextCursor names
//     that topic and its first partition left out; when it stops exactly at
//     a topic's end and more topics follow, NextCursor names the next topic
//     at partition 0 (that topic may turn out not to exist). No NextCursor:
//     nothing is left.
//   - A cursor whose topic is not among the named topics, or whose
//     partition is negative, is INVALID_REQUEST on every named topic
//     (Kafka's error response for the request).
//   - Per partition: leader (-1 while none, or when it has no endpoint on
//     the request's listener, with no error code, as Kafka),
//     leader epoch, replicas, ISR, the replicas on fenced or unknown brokers
//     as offline. Eligible leader replicas and last known ELR are always
//     empty: Fjord never empties an ISR (the last member stays in it, see
//     controller.Partition), which is the guarantee KIP-966's ELR exists to
//     restore, so it has no ELR to report.
//   - Topic authorized operations: always filled (v0 has no flag to ask for
//     them; Kafka fills them always): the operations the principal may
//     perform on the topic, from the authorizer (KIP-430).
//
// Version notes:
//   - v0: flexible, the only version (KIP-966, Kafka 3.8).
func describeTopicPartitionsEntry(h Host) api.Entry {
	return api.Entry{
		Key: 75, Client: api.Versions(0, 0), Handle: bindTo(h, handleDescribeTopicPartitions),
		Rule: api.Needs("DESCRIBE on TOPIC", 0, checkDescribeTopicPartitions),
	}
}

// maxDescribePartitions is Kafka's max.request.partition.size.limit
// default: the most partitions one DescribeTopicPartitions answer holds.
const maxDescribePartitions = 2000

func handleDescribeTopicPartitions(h Host, cc *api.Conn, kreq kmsg.Request, respond func(kmsg.Response)) {
	req := kreq.(*kmsg.DescribeTopicPartitionsRequest)
	listener := h.ListenerName(cc)
	resp := describeTopicPartitions(h.Image(), listener, req)
	for i := range resp.Topics {
		if t := &resp.Topics[i]; t.ErrorCode == 0 && t.Topic != nil {
			t.AuthorizedOperations = h.AuthorizedOps(cc, acl.ResourceTopic, *t.Topic)
		}
	}
	respond(resp)
}

// describeTopicPartitions answers req from img; listener is the request's
// listener, for telling which replicas are offline. Pure, for unit tests.
func describeTopicPartitions(img *controller.Image, listener string, req *kmsg.DescribeTopicPartitionsRequest) *kmsg.DescribeTopicPartitionsResponse {
	resp := req.ResponseKind().(*kmsg.DescribeTopicPartitionsResponse)
	all := len(req.Topics) == 0
	after := ""
	if req.Cursor != nil {
		after = req.Cursor.Topic
	}
	var names []string
	if all {
		for _, t := range img.Topics() {
			if t.Name >= after {
				names = append(names, t.Name)
			}
		}
	} else {
		for _, rt := range req.Topics {
			if rt.Topic >= after {
				names = append(names, rt.Topic)
			}
		}
		slices.Sort(names)
		names = slices.Compact(names)
	}
	if c := req.Cursor; c != nil && (c.Partition < 0 || !all && !slices.Contains(names, c.Topic)) {
		for _, rt := range req.Topics {
			st := kmsg.NewDescribeTopicPartitionsResponseTopic()
			name := rt.Topic
			st.Topic, st.ErrorCode = &name, kerr.InvalidRequest.Code
			resp.Topics = append(resp.Topics, st)
		}
		return resp
	}

	remaining := int(min(max(req.ResponsePartitionLimit, 1), maxDescribePartitions))
	for _, name := range names {
		if remaining == 0 {
			// Every partition so far fit exactly: the next page starts at
			// this topic.
			resp.NextCursor = &kmsg.DescribeTopicPartitionsResponseNextCursor{Topic: name}
			break
		}
		t := img.Topic(name)
		if t == nil {
			if !all {
				st := kmsg.NewDescribeTopicPartitionsResponseTopic()
				n := name
				st.Topic = &n
				st.ErrorCode = kerr.UnknownTopicOrPartition.Code
				if controller.InvalidTopicName(name) != "" {
					st.ErrorCode = kerr.InvalidTopicException.Code
				}
				st.IsInternal = IsInternalTopic(name)
				resp.Topics = append(resp.Topics, st)
			}
			continue
		}
		start := 0
		if req.Cursor != nil && name == req.Cursor.Topic {
			start = int(req.Cursor.Partition)
		}
		end := min(len(t.Partitions), start+remaining)
		resp.Topics = append(resp.Topics, describeTopicPage(img, listener, t, start, end))
		if end < len(t.Partitions) {
			resp.NextCursor = &kmsg.DescribeTopicPartitionsResponseNextCursor{Topic: name, Partition: int32(end)}
			break
		}
		remaining -= max(end-start, 0)
	}
	return resp
}

// describeTopicPage describes partitions [start, end) of t (none if
// start >= end).
func describeTopicPage(img *controller.Image, listener string, t *controller.Topic, start, end int) kmsg.DescribeTopicPartitionsResponseTopic {
	st := kmsg.NewDescribeTopicPartitionsResponseTopic()
	name := t.Name
	st.Topic, st.TopicID = &name, t.ID
	st.IsInternal = IsInternalTopic(name)
	st.Partitions = []kmsg.DescribeTopicPartitionsResponseTopicPartition{}
	for i := start; i < end; i++ {
		p := t.Partitions[i]
		sp := kmsg.NewDescribeTopicPartitionsResponseTopicPartition()
		sp.Partition = int32(i)
		sp.LeaderID, sp.LeaderEpoch = p.Leader, p.LeaderEpoch
		if _, ok := img.Endpoint(p.Leader, listener); !ok {
			sp.LeaderID = -1 // unreachable on this listener, as Kafka reports it
		}
		sp.Replicas, sp.ISR = p.Replicas, p.ISR
		sp.EligibleLeaderReplicas, sp.LastKnownELR = []int32{}, []int32{}
		sp.OfflineReplicas = []int32{}
		for _, r := range p.Replicas {
			if _, ok := img.Endpoint(r, listener); !ok || !liveBroker(img, r) {
				sp.OfflineReplicas = append(sp.OfflineReplicas, r)
			}
		}
		st.Partitions = append(st.Partitions, sp)
	}
	return st
}

// liveBroker reports whether id is a registered, unfenced broker in img.
func liveBroker(img *controller.Image, id int32) bool {
	bs, ok := img.Broker(id)
	return ok && !bs.Fenced
}

// IsInternalTopic is Kafka's Topic.isInternal: the topics the
// coordinators keep their state in (groups, transactions, share-group
// state).
func IsInternalTopic(name string) bool {
	return name == coordinator.OffsetsTopic || name == txncoord.Topic || name == sharecoord.Topic
}

func checkDescribeTopicPartitions(z *api.Authz, kreq kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
	req := kreq.(*kmsg.DescribeTopicPartitionsRequest)
	var denied []kmsg.DescribeTopicPartitionsRequestTopic
	listAll := len(req.Topics) == 0
	req.Topics, denied = api.Split(z, acl.OpDescribe, req.Topics, func(t kmsg.DescribeTopicPartitionsRequestTopic) string { return t.Topic })
	if !listAll && len(denied) == 0 {
		return nil, nil
	}
	if !listAll && len(req.Topics) == 0 {
		resp := req.ResponseKind().(*kmsg.DescribeTopicPartitionsResponse)
		for _, t := range denied {
			rt := kmsg.NewDescribeTopicPartitionsResponseTopic()
			name := t.Topic
			rt.Topic, rt.ErrorCode = &name, api.TopicDenied
			resp.Topics = append(resp.Topics, rt)
		}
		return resp, nil
	}
	return nil, func(r kmsg.Response) {
		resp := r.(*kmsg.DescribeTopicPartitionsResponse)
		if listAll {
			kept := resp.Topics[:0]
			for _, t := range resp.Topics {
				if t.Topic != nil && z.Quiet(acl.OpDescribe, acl.ResourceTopic, *t.Topic) {
					kept = append(kept, t)
				}
			}
			resp.Topics = kept
		}
		for _, t := range denied {
			rt := kmsg.NewDescribeTopicPartitionsResponseTopic()
			name := t.Topic
			rt.Topic, rt.ErrorCode = &name, api.TopicDenied
			resp.Topics = append(resp.Topics, rt)
		}
	}
}
