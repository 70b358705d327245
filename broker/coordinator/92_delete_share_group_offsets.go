package coordinator

import (
	"maps"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordlog/fjord/broker/acl"
	"github.com/fjordlog/fjord/broker/api"
	"github.com/fjordlog/fjord/group/share"
)

// DeleteShareGroupOffsets: v0
//
// Behaviour (Kafka 4.2's KafkaApis, GroupCoordinatorService and
// GroupMetadataManager): deletes the share-partition state of each topic
// named, for an existing share group without members: the group records
// the topics as deleting, the share coordinator deletes each initialized
// partition's state (DeleteShareGroupState, through ShareStates), the
// topics deleted leave the group's record, and this node's leaders of the
// group's share-partitions drop what they hold. The answer waits for all
// of it. A later consumer of the topic starts where
// share.auto.offset.reset says.
//   - No such group: GROUP_ID_NOT_FOUND ("Group <id> not found."), one of
//     another type "Group <id> is not a share group.", members:
//     NON_EMPTY_GROUP; each as the top-level error, with nothing else.
//   - A topic the metadata does not have: UNKNOWN_TOPIC_OR_PARTITION; one
//     whose offsets the group does not have, the same with "There is no
//     offset information to delete."; one the share coordinator failed to
//     delete, its error (it stays deleting, and a later delete of it or of
//     the group tries all its partitions again). Topics deleted are listed
//     first, with their ids.
//   - DELETE on GROUP, else GROUP_AUTHORIZATION_FAILED at the top; READ on
//     each TOPIC, else TOPIC_AUTHORIZATION_FAILED on it (listed first).
//
// Version notes: v0 (KIP-932, Kafka 4.1) is the only version
func deleteShareGroupOffsetsEntry(h APIHost) api.Entry {
	return api.Entry{
		Key: 92, Client: api.Versions(0, 0), Handle: bindTo(h, handleDeleteShareGroupOffsets),
		Rule:    api.Needs("DELETE on GROUP and READ on TOPIC", 2, checkDeleteShareGroupOffsets),
		Mutates: true,
		// The group: its GroupID field is not one the audit names.
		AuditDetails: func(r kmsg.Request) []string {
			return []string{"group=" + r.(*kmsg.DeleteShareGroupOffsetsRequest).GroupID}
		},
	}
}

func handleDeleteShareGroupOffsets(h APIHost, cc *api.Conn, kreq kmsg.Request, respond func(kmsg.Response)) {
	req := kreq.(*kmsg.DeleteShareGroupOffsetsRequest)
	resp := req.ResponseKind().(*kmsg.DeleteShareGroupOffsetsResponse)
	if code := requestCode(h, req.GroupID); code != 0 {
		resp.ErrorCode, resp.ErrorMessage = code, errorMessage(code)
		respond(resp)
		return
	}
	h.Go(func() {
		deleteShareOffsets(h, req, resp)
		respond(resp)
	})
}

func deleteShareOffsets(h APIHost, req *kmsg.DeleteShareGroupOffsetsRequest, resp *kmsg.DeleteShareGroupOffsetsResponse) {
	var parts map[share.TopicID][]int32
	var names map[share.TopicID]string
	var refused []kmsg.DeleteShareGroupOffsetsResponseTopic
	code, msg := shareStep(h, req.GroupID, false, func(g *share.Group, img *share.Image) ([]share.Record, error) {
		names = map[share.TopicID]string{}
		var ids []share.TopicID
		for _, rt := range req.Topics {
			t, ok := img.ByName(rt.Topic)
			if !ok {
				refused = append(refused, deletedTopic(rt.Topic, [16]byte{}, kerr.UnknownTopicOrPartition.Code, nil))
				continue
			}
			names[t.ID] = t.Name
			ids = append(ids, t.ID)
		}
		var recs []share.Record
		var err error
		parts, recs, err = g.DeleteOffsets(img, ids)
		if err != nil {
			return nil, err
		}
		for _, rt := range req.Topics {
			if t, ok := img.ByName(rt.Topic); ok && parts[t.ID] == nil {
				refused = append(refused, deletedTopic(rt.Topic, [16]byte{}, kerr.UnknownTopicOrPartition.Code,
					msgf("There is no offset information to delete.")))
			}
		}
		return recs, nil
	})
	if code != 0 {
		resp.ErrorCode, resp.ErrorMessage = code, msg
		return
	}
	if len(parts) == 0 {
		resp.Topics = refused
		return
	}
	ctx, cancel := shareContext()
	defer cancel()
	errs := deleteShareStates(ctx, h, req.GroupID, parts)
	var deleted []share.TopicID
	var failed []kmsg.DeleteShareGroupOffsetsResponseTopic
	for _, t := range slices.SortedFunc(maps.Keys(errs), func(a, b share.TopicID) int { return strings.Compare(names[a], names[b]) }) {
		if err := errs[t]; err != nil {
			failed = append(failed, deletedTopic(names[t], t, h.Code(err), nil))
			continue
		}
		deleted = append(deleted, t)
		resp.Topics = append(resp.Topics, deletedTopic(names[t], t, 0, nil))
	}
	if len(deleted) > 0 {
		if code, msg := shareStep(h, req.GroupID, false, func(g *share.Group, _ *share.Image) ([]share.Record, error) {
			return g.OffsetsDeleted(deleted), nil
		}); code != 0 {
			// The state is gone: the topics stay deleting until a later
			// delete, which finds nothing to delete.
			h.Log().Warn().Int16("code", code).Str("group", req.GroupID).Str("why", deref(msg)).
				Msg("share-partition state deleted, but not recorded so in the group")
		}
	}
	h.UnloadShareGroup(req.GroupID)
	resp.Topics = append(append(resp.Topics, refused...), failed...)
}

// deletedTopic is one topic's answer; msg nil is Kafka's text for code.
func deletedTopic(name string, id [16]byte, code int16, msg *string) kmsg.DeleteShareGroupOffsetsResponseTopic {
	t := kmsg.NewDeleteShareGroupOffsetsResponseTopic()
	t.Topic, t.TopicID, t.ErrorCode, t.ErrorMessage = name, id, code, msg
	if msg == nil {
		t.ErrorMessage = errorMessage(code)
	}
	return t
}

// checkDeleteShareGroupOffsets: DELETE on the group, else
// GROUP_AUTHORIZATION_FAILED at the top (with Kafka's message); READ on
// each topic, else TOPIC_AUTHORIZATION_FAILED on it, listed before the
// topics the handler answers unless the answer is a top-level error. The
// handler runs even when every topic is denied, as in Kafka.
func checkDeleteShareGroupOffsets(z *api.Authz, kreq kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
	req := kreq.(*kmsg.DeleteShareGroupOffsetsRequest)
	if !z.Ok(acl.OpDelete, acl.ResourceGroup, req.GroupID) {
		resp := req.ResponseKind().(*kmsg.DeleteShareGroupOffsetsResponse)
		resp.ErrorCode, resp.ErrorMessage = api.GroupDenied, errorMessage(api.GroupDenied)
		return resp, nil
	}
	var denied []kmsg.DeleteShareGroupOffsetsRequestTopic
	req.Topics, denied = api.Split(z, acl.OpRead, req.Topics, func(t kmsg.DeleteShareGroupOffsetsRequestTopic) string { return t.Topic })
	if len(denied) == 0 {
		return nil, nil
	}
	var topics []kmsg.DeleteShareGroupOffsetsResponseTopic
	for _, t := range denied {
		topics = append(topics, deletedTopic(t.Topic, [16]byte{}, api.TopicDenied, nil))
	}
	return nil, func(r kmsg.Response) {
		if resp := r.(*kmsg.DeleteShareGroupOffsetsResponse); resp.ErrorCode == 0 {
			resp.Topics = append(topics, resp.Topics...)
		}
	}
}
