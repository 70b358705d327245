package coordinator

import (
	"context"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordlog/fjord/broker/acl"
	"github.com/fjordlog/fjord/broker/api"
	"github.com/fjordlog/fjord/group/share"
	"github.com/fjordlog/fjord/group/sharepart"
)

// DescribeShareGroupOffsets: v0-1
//
// Behaviour (Kafka 4.2's KafkaApis and GroupCoordinatorService): per
// group, each share-partition's start offset (SPSO) and leader epoch, read
// from the share coordinator (ReadShareGroupStateSummary, through
// ShareStates), and from v1 its lag (KIP-1226): the partition's end
// offset (its leader's high watermark, asked with ListOffsets) less the
// start offset less the records after it whose delivery is complete.
//   - Topics null: every partition the group lists as initialized, of the
//     topics the metadata still has; this node must coordinate the group
//     (NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS). A group that does
//     not exist, or is not a share group, has no topics.
//   - Topics named: asked of the share coordinator whether the group
//     exists or not, and wherever it is coordinated, as Kafka does; a
//     topic the metadata does not have answers start offset -1 for its
//     partitions, listed after the others.
//   - No state, or a summary that failed: start offset -1 (leader epoch
//     -1, or 0 after a failure) and lag -1, without an error: absence of
//     data, as Kafka treats it. Lag -1 too while the start offset or the
//     delivery-complete count is unknown. An end offset that could not be
//     had is the partition's error (start offset and leader epoch 0).
//   - DESCRIBE on GROUP, else GROUP_AUTHORIZATION_FAILED for the group;
//     DESCRIBE on each TOPIC: a named topic denied answers
//     TOPIC_AUTHORIZATION_FAILED on its partitions (start offset -1), and
//     with topics null a topic denied is left out. An empty group id is
//     INVALID_GROUP_ID.
//
// Version notes: v0 (KIP-932, Kafka 4.1); v1 (Kafka 4.2, KIP-1226): lag
func describeShareGroupOffsetsEntry(h APIHost) api.Entry {
	return api.Entry{
		Key: 90, Client: api.Versions(0, 1), Handle: bindTo(h, handleDescribeShareGroupOffsets),
		Rule: api.Needs("DESCRIBE on GROUP and DESCRIBE on TOPIC (others are not listed)", 0, checkDescribeShareGroupOffsets),
	}
}

func handleDescribeShareGroupOffsets(h APIHost, cc *api.Conn, kreq kmsg.Request, respond func(kmsg.Response)) {
	req := kreq.(*kmsg.DescribeShareGroupOffsetsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeShareGroupOffsetsResponse)
	if len(req.Groups) == 0 {
		respond(resp)
		return
	}
	h.Go(func() {
		ctx, cancel := context.WithTimeout(cc.Ctx, shareStateTimeout)
		defer cancel()
		for i := range req.Groups {
			resp.Groups = append(resp.Groups, describeShareOffsets(ctx, h, &req.Groups[i], req.Version >= 1))
		}
		respond(resp)
	})
}

// shareTopicAsk is one topic of a describe, resolved.
type shareTopicAsk struct {
	name       string
	id         [16]byte
	partitions []int32
}

func describeShareOffsets(ctx context.Context, h APIHost, rg *kmsg.DescribeShareGroupOffsetsRequestGroup, lag bool) kmsg.DescribeShareGroupOffsetsResponseGroup {
	out := kmsg.NewDescribeShareGroupOffsetsResponseGroup()
	out.GroupID = rg.GroupID
	fail := func(code int16) kmsg.DescribeShareGroupOffsetsResponseGroup {
		out.ErrorCode, out.ErrorMessage = code, errorMessage(code)
		return out
	}
	if rg.GroupID == "" {
		return fail(kerr.InvalidGroupID.Code)
	}
	var asks []shareTopicAsk
	var unknown []kmsg.DescribeShareGroupOffsetsResponseGroupTopic
	if rg.Topics == nil {
		if code := requestCode(h, rg.GroupID); code != 0 {
			return fail(code)
		}
		h.Coordinator().Share(rg.GroupID, false, func(g *share.Group, img *share.Image, _ int64) []share.Record {
			for id, ps := range g.Initialized() {
				if t, ok := img.ByID(id); ok {
					asks = append(asks, shareTopicAsk{name: t.Name, id: id, partitions: ps})
				}
			}
			return nil
		})
		slices.SortFunc(asks, func(a, b shareTopicAsk) int { return strings.Compare(a.name, b.name) })
	} else {
		for _, rt := range rg.Topics {
			id := h.TopicID(rt.Topic)
			if id != ([16]byte{}) {
				asks = append(asks, shareTopicAsk{name: rt.Topic, id: id, partitions: rt.Partitions})
				continue
			}
			st := kmsg.NewDescribeShareGroupOffsetsResponseGroupTopic()
			st.Topic = rt.Topic
			for _, p := range rt.Partitions {
				sp := kmsg.NewDescribeShareGroupOffsetsResponseGroupTopicPartition()
				sp.Partition, sp.StartOffset = p, -1
				st.Partitions = append(st.Partitions, sp)
			}
			unknown = append(unknown, st)
		}
	}
	out.Topics = describeShareTopics(ctx, h, rg.GroupID, asks, lag)
	out.Topics = append(out.Topics, unknown...)
	return out
}

// describeShareTopics reads the summaries of asks' share-partitions, and
// with lag the end offsets of those whose lag can be known.
func describeShareTopics(ctx context.Context, h APIHost, group string, asks []shareTopicAsk, lag bool) []kmsg.DescribeShareGroupOffsetsResponseGroupTopic {
	type part struct{ t, p int } // indexes into out
	out := make([]kmsg.DescribeShareGroupOffsetsResponseGroupTopic, len(asks))
	var parts []part
	for i, a := range asks {
		st := &out[i]
		*st = kmsg.NewDescribeShareGroupOffsetsResponseGroupTopic()
		st.Topic, st.TopicID = a.name, a.id
		st.Partitions = make([]kmsg.DescribeShareGroupOffsetsResponseGroupTopicPartition, len(a.partitions))
		for j, p := range a.partitions {
			st.Partitions[j] = kmsg.NewDescribeShareGroupOffsetsResponseGroupTopicPartition()
			st.Partitions[j].Partition = p
			parts = append(parts, part{i, j})
		}
	}
	complete := make([]int32, len(parts)) // delivery-complete counts
	concurrently(h, len(parts), func(k int) {
		sp := &out[parts[k].t].Partitions[parts[k].p]
		key := sharepart.Key{Group: group, TopicID: asks[parts[k].t].id, Partition: sp.Partition}
		s, err := h.ShareStates().Summary(ctx, key)
		if err != nil {
			// Kafka: the absence of data, not an error.
			h.Log().Debug().Err(err).Str("group", group).Str("topic", asks[parts[k].t].name).
				Int32("partition", sp.Partition).Msg("share-partition state summary failed")
			sp.StartOffset, sp.LeaderEpoch, complete[k] = -1, 0, -1
			return
		}
		sp.StartOffset, sp.LeaderEpoch, complete[k] = s.StartOffset, s.LeaderEpoch, s.DeliveryCompleteCount
	})
	if !lag {
		return out
	}
	// The end offsets, topic by topic, of the partitions with a start
	// offset and a delivery-complete count.
	for i, a := range asks {
		var want []int32
		var at []int
		for k, pt := range parts {
			if sp := &out[i].Partitions[pt.p]; pt.t == i && sp.StartOffset != -1 && complete[k] != -1 {
				want, at = append(want, sp.Partition), append(at, k)
			}
		}
		if len(want) == 0 {
			continue
		}
		ends := h.LatestOffsets(ctx, a.name, want)
		for n, k := range at {
			sp := &out[i].Partitions[parts[k].p]
			if n >= len(ends) || ends[n].Code != 0 {
				code := kerr.UnknownServerError.Code
				if n < len(ends) {
					code = ends[n].Code
				}
				p := sp.Partition
				*sp = kmsg.NewDescribeShareGroupOffsetsResponseGroupTopicPartition()
				sp.Partition, sp.ErrorCode, sp.ErrorMessage = p, code, errorMessage(code)
				continue
			}
			sp.Lag = ends[n].Offset - sp.StartOffset - int64(complete[k])
		}
	}
	return out
}

// checkDescribeShareGroupOffsets: DESCRIBE on each group, else
// GROUP_AUTHORIZATION_FAILED for it (listed after the others, and not
// described); of a group described, the named topics without DESCRIBE
// are taken out of the request and answered TOPIC_AUTHORIZATION_FAILED
// after the others, unless the group failed; with topics null, those of
// the answer are left out.
func checkDescribeShareGroupOffsets(z *api.Authz, kreq kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
	req := kreq.(*kmsg.DescribeShareGroupOffsetsRequest)
	type kept struct {
		all    bool
		denied []kmsg.DescribeShareGroupOffsetsRequestGroupTopic
	}
	var deniedGroups []string
	var keep []kept
	groups := req.Groups[:0:0]
	for _, g := range req.Groups {
		if !z.Ok(acl.OpDescribe, acl.ResourceGroup, g.GroupID) {
			deniedGroups = append(deniedGroups, g.GroupID)
			continue
		}
		k := kept{all: g.Topics == nil}
		g.Topics, k.denied = api.Split(z, acl.OpDescribe, g.Topics, func(t kmsg.DescribeShareGroupOffsetsRequestGroupTopic) string { return t.Topic })
		groups, keep = append(groups, g), append(keep, k)
	}
	req.Groups = groups
	return nil, func(r kmsg.Response) {
		resp := r.(*kmsg.DescribeShareGroupOffsetsResponse)
		for i := range min(len(keep), len(resp.Groups)) {
			g, k := &resp.Groups[i], keep[i]
			switch {
			case k.all:
				g.Topics = api.Visible(z, acl.ResourceTopic, g.Topics, func(t kmsg.DescribeShareGroupOffsetsResponseGroupTopic) string { return t.Topic })
			case g.ErrorCode == 0:
				for _, t := range k.denied {
					st := kmsg.NewDescribeShareGroupOffsetsResponseGroupTopic()
					st.Topic = t.Topic
					for _, p := range t.Partitions {
						sp := kmsg.NewDescribeShareGroupOffsetsResponseGroupTopicPartition()
						sp.Partition, sp.StartOffset = p, -1
						sp.ErrorCode, sp.ErrorMessage = api.TopicDenied, errorMessage(api.TopicDenied)
						st.Partitions = append(st.Partitions, sp)
					}
					g.Topics = append(g.Topics, st)
				}
			}
		}
		for _, id := range deniedGroups {
			g := kmsg.NewDescribeShareGroupOffsetsResponseGroup()
			g.GroupID, g.ErrorCode = id, api.GroupDenied
			resp.Groups = append(resp.Groups, g)
		}
	}
}
