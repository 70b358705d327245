package discovery

import (
	"fmt"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordlog/fjord/broker/coordinator"
	"github.com/fjordlog/fjord/controller"
)

// catalogImage is an image with brokers 1 (unfenced) and 2 (fenced) and
// topics of the given partition counts, replicas [1 2], leader 1.
func catalogImage(t *testing.T, topics map[string]int) *controller.Image {
	t.Helper()
	img := &controller.Image{}
	idx := uint64(0)
	apply := func(b controller.Body) {
		idx++
		next, err := img.Apply(idx, controller.NewRecord(b))
		if err != nil {
			t.Fatalf("apply %T: %v", b, err)
		}
		img = next
	}
	for _, id := range []int32{1, 2} {
		apply(controller.RegisterBroker{ID: id, Endpoints: []controller.Endpoint{{Name: "PLAINTEXT", Host: "127.0.0.1", Port: 9000 + id}}})
	}
	b1, _ := img.Broker(1)
	apply(controller.UnfenceBroker{ID: 1, Epoch: b1.Epoch})
	n := byte(0)
	for name, parts := range topics {
		n++
		id := [16]byte{n}
		apply(controller.CreateTopic{Name: name, ID: id})
		for p := range parts {
			apply(controller.CreatePartition{TopicID: id, Partition: int32(p), Replicas: []int32{1, 2}, ISR: []int32{1}, Leader: 1})
		}
	}
	return img
}

// page is a compact rendering of an answer: topic:partitions... then the
// cursor, e.g. "a:0,1 b:0 next=b/1".
func page(resp *kmsg.DescribeTopicPartitionsResponse) string {
	var parts []string
	for _, st := range resp.Topics {
		s := deref(st.Topic) + ":"
		if st.ErrorCode != 0 {
			s += kerr.ErrorForCode(st.ErrorCode).(*kerr.Error).Message
		}
		var ps []string
		for _, sp := range st.Partitions {
			ps = append(ps, fmt.Sprint(sp.Partition))
		}
		parts = append(parts, s+strings.Join(ps, ","))
	}
	if c := resp.NextCursor; c != nil {
		parts = append(parts, fmt.Sprintf("next=%s/%d", c.Topic, c.Partition))
	}
	return strings.Join(parts, " ")
}

func deref(s *string) string {
	if s == nil {
		return "<nil>"
	}
	return *s
}

func describeReq(limit int32, cursor *kmsg.DescribeTopicPartitionsRequestCursor, names ...string) *kmsg.DescribeTopicPartitionsRequest {
	req := kmsg.NewPtrDescribeTopicPartitionsRequest()
	req.ResponsePartitionLimit = limit
	req.Cursor = cursor
	for _, n := range names {
		rt := kmsg.NewDescribeTopicPartitionsRequestTopic()
		rt.Topic = n
		req.Topics = append(req.Topics, rt)
	}
	return req
}

func cursor(topic string, p int32) *kmsg.DescribeTopicPartitionsRequestCursor {
	return &kmsg.DescribeTopicPartitionsRequestCursor{Topic: topic, Partition: p}
}

// TestDescribeTopicPartitionsPaging checks Kafka's paging rules: sorted
// names, the limit cutting inside a topic (cursor at the first partition
// left out) or exactly at its end (cursor at the next topic, partition 0),
// the cursor's own topic starting at its partition, unknown and invalid
// names, and the cursor's validation.
func TestDescribeTopicPartitionsPaging(t *testing.T) {
	img := catalogImage(t, map[string]int{"c": 1, "a": 3, "b": 2})
	for _, tc := range []struct {
		name string
		req  *kmsg.DescribeTopicPartitionsRequest
		want string
	}{
		{"all", describeReq(2000, nil), "a:0,1,2 b:0,1 c:0"},
		{"limit inside a topic", describeReq(2, nil), "a:0,1 next=a/2"},
		{"limit at a topic's end", describeReq(3, nil), "a:0,1,2 next=b/0"},
		{"limit across topics", describeReq(4, nil), "a:0,1,2 b:0 next=b/1"},
		{"cursor resumes", describeReq(2, cursor("a", 2)), "a:2 b:0 next=b/1"},
		{"cursor before every name", describeReq(10, cursor("0", 0)), "a:0,1,2 b:0,1 c:0"},
		{"cursor on a missing topic when listing all", describeReq(10, cursor("bb", 0)), "c:0"},
		{"last page", describeReq(2, cursor("b", 1)), "b:1 c:0"},
		{"cursor past the topic's partitions", describeReq(5, cursor("a", 7)), "a: b:0,1 c:0"},
		{"limit 0 means 1", describeReq(0, nil), "a:0 next=a/1"},
		{"named, sorted, deduplicated", describeReq(100, nil, "c", "a", "c"), "a:0,1,2 c:0"},
		{"named unknown and invalid", describeReq(100, nil, "zz", "a", "bad name"),
			"a:0,1,2 bad name:" + kerr.InvalidTopicException.Message + " zz:" + kerr.UnknownTopicOrPartition.Message},
		{"named with cursor", describeReq(2, cursor("b", 1), "a", "b", "c"), "b:1 c:0"},
		{"named: limit stops before an unknown topic", describeReq(3, nil, "a", "nope"), "a:0,1,2 next=nope/0"},
		{"cursor topic not named", describeReq(10, cursor("b", 0), "a", "c"),
			"a:" + kerr.InvalidRequest.Message + " c:" + kerr.InvalidRequest.Message},
		{"negative cursor partition", describeReq(10, cursor("a", -1)), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := page(describeTopicPartitions(img, "PLAINTEXT", tc.req)); got != tc.want {
				t.Errorf("got  %q\nwant %q", got, tc.want)
			}
		})
	}
}

// TestDescribeTopicPartitionsPagesCoverAll walks every limit from 1 to
// past the total: following the cursors yields every partition exactly
// once, in order.
func TestDescribeTopicPartitionsPagesCoverAll(t *testing.T) {
	img := catalogImage(t, map[string]int{"a": 3, "b": 1, "c": 4, "d": 2})
	const want = "a/0 a/1 a/2 b/0 c/0 c/1 c/2 c/3 d/0 d/1"
	for limit := int32(1); limit <= 11; limit++ {
		var got []string
		var cur *kmsg.DescribeTopicPartitionsRequestCursor
		for pages := 0; ; pages++ {
			if pages > 20 {
				t.Fatalf("limit %d: cursors do not end", limit)
			}
			resp := describeTopicPartitions(img, "PLAINTEXT", describeReq(limit, cur))
			n := 0
			for _, st := range resp.Topics {
				for _, sp := range st.Partitions {
					got = append(got, fmt.Sprintf("%s/%d", *st.Topic, sp.Partition))
					n++
				}
			}
			if n > int(limit) {
				t.Fatalf("limit %d: a page of %d partitions", limit, n)
			}
			if resp.NextCursor == nil {
				break
			}
			cur = cursor(resp.NextCursor.Topic, resp.NextCursor.Partition)
		}
		if s := strings.Join(got, " "); s != want {
			t.Errorf("limit %d: got %q, want %q", limit, s, want)
		}
	}
}

// TestDescribeTopicPartitionsFields checks one partition's fields: the
// fenced replica offline, ELR fields empty (never null), topic id,
// internal flag and operations.
func TestDescribeTopicPartitionsFields(t *testing.T) {
	img := catalogImage(t, map[string]int{"x": 1, coordinator.OffsetsTopic: 1})
	resp := describeTopicPartitions(img, "PLAINTEXT", describeReq(10, nil))
	if len(resp.Topics) != 2 {
		t.Fatalf("topics: %s", page(resp))
	}
	off, x := resp.Topics[0], resp.Topics[1]
	if !off.IsInternal || x.IsInternal {
		t.Errorf("internal flags: %s=%v %s=%v", *off.Topic, off.IsInternal, *x.Topic, x.IsInternal)
	}
	if x.TopicID != img.Topic("x").ID {
		t.Errorf("topic id %x", x.TopicID)
	}
	p := x.Partitions[0]
	if p.LeaderID != 1 || fmt.Sprint(p.Replicas) != "[1 2]" || fmt.Sprint(p.ISR) != "[1]" ||
		fmt.Sprint(p.OfflineReplicas) != "[2]" || p.EligibleLeaderReplicas == nil || p.LastKnownELR == nil ||
		len(p.EligibleLeaderReplicas)+len(p.LastKnownELR) != 0 {
		t.Errorf("partition: %+v", p)
	}
	// On a listener broker 1 lacks, every replica is offline and there is
	// no leader to reach.
	q := describeTopicPartitions(img, "OTHER", describeReq(10, nil, "x")).Topics[0].Partitions[0]
	if fmt.Sprint(q.OfflineReplicas) != "[1 2]" || q.LeaderID != -1 {
		t.Errorf("on another listener: offline %v, leader %d", q.OfflineReplicas, q.LeaderID)
	}
}
