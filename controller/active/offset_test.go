package active

import (
	"errors"
	"testing"
	"testing/synctest"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Call's offset is the image version from which the records its answer
// committed are applied: the last round's index for a request of several
// rounds, 0 when nothing was proposed or the proposal failed.
func TestCallOffset(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newFakeMember()
		c := start(t, testConfig(), m)
		join(t, c, 1)

		create := func(names ...string) *kmsg.CreateTopicsRequest {
			req := kmsg.NewPtrCreateTopicsRequest()
			for _, n := range names {
				rt := kmsg.NewCreateTopicsRequestTopic()
				rt.Topic, rt.NumPartitions, rt.ReplicationFactor = n, 1, 1
				req.Topics = append(req.Topics, rt)
			}
			return req
		}
		resp, offset := c.Call(t.Context(), create("a", "b"))
		if r := resp.(*kmsg.CreateTopicsResponse); r.Topics[0].ErrorCode != 0 || r.Topics[1].ErrorCode != 0 {
			t.Fatalf("create: %+v", r.Topics)
		}
		if v := m.Image().Version(); offset == 0 || offset != v || m.Image().Topic("b") == nil {
			t.Fatalf("create: offset %d, image version %d", offset, v)
		}

		// Nothing proposed: an existing topic, a validation.
		if _, offset := c.Call(t.Context(), create("a")); offset != 0 {
			t.Fatalf("existing topic: offset %d", offset)
		}
		vo := create("c")
		vo.ValidateOnly = true
		if _, offset := c.Call(t.Context(), vo); offset != 0 {
			t.Fatalf("validate only: offset %d", offset)
		}

		// CreatePartitions is one round per topic: the offset is the last
		// round's, after which both topics have grown.
		grow := kmsg.NewPtrCreatePartitionsRequest()
		for _, n := range []string{"a", "b"} {
			rt := kmsg.NewCreatePartitionsRequestTopic()
			rt.Topic, rt.Count = n, 2
			grow.Topics = append(grow.Topics, rt)
		}
		before := m.Image().Version()
		_, offset = c.Call(t.Context(), grow)
		if v := m.Image().Version(); offset != v || v != before+2 {
			t.Fatalf("create partitions: offset %d, image version %d, before %d", offset, v, before)
		}

		// A failed proposal commits nothing the broker could wait for.
		m.set(func(f *fakeMember) { f.fail = errors.New("disk full") })
		resp, offset = c.Call(t.Context(), create("d"))
		if r := resp.(*kmsg.CreateTopicsResponse); r.Topics[0].ErrorCode != kerr.RequestTimedOut.Code || offset != 0 {
			t.Fatalf("failed proposal: %+v, offset %d", r.Topics, offset)
		}
	})
}

// Answer carries Call's offset in the OffsetTag field through kmsg's
// encoding; TakeOffset reads it and takes it out, leaving the response a
// Kafka client would get. An answer that committed nothing has no field.
func TestAnswerOffsetTag(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newFakeMember()
		c := start(t, testConfig(), m)
		join(t, c, 1)
		answer := func(req kmsg.Request) kmsg.Response {
			got := make(chan kmsg.Response, 1)
			c.Answer(t.Context(), req, func(r kmsg.Response) { got <- r })
			return <-got
		}
		req := kmsg.NewPtrCreateTopicsRequest()
		req.Version = 7 // flexible
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic, rt.NumPartitions, rt.ReplicationFactor = "t", 1, 1
		req.Topics = append(req.Topics, rt)
		resp := answer(req).(*kmsg.CreateTopicsResponse)

		// Over the wire: encoded by the listener, decoded by the broker.
		wire := resp.AppendTo(nil)
		got := kmsg.NewPtrCreateTopicsResponse()
		got.Version = 7
		if err := got.ReadFrom(wire); err != nil {
			t.Fatal(err)
		}
		offset, ok := TakeOffset(got)
		if !ok || offset != m.Image().Version() {
			t.Fatalf("offset %d, %v; image version %d", offset, ok, m.Image().Version())
		}
		if _, ok := TakeOffset(got); ok || got.UnknownTags.Len() != 0 {
			t.Fatal("the field is still there after TakeOffset")
		}
		plain := *resp
		plain.UnknownTags = kmsg.Tags{}
		if string(got.AppendTo(nil)) != string(plain.AppendTo(nil)) {
			t.Fatal("the answer without the field differs from the controller's")
		}

		// Another tag the broker does not know is kept.
		other := kmsg.NewPtrCreateTopicsResponse()
		other.Version = 7
		other.UnknownTags.Set(3, []byte{1})
		setOffset(other, 9)
		if offset, ok := TakeOffset(other); !ok || offset != 9 || other.UnknownTags.Len() != 1 {
			t.Fatalf("with another tag: %d, %v, %d tags left", offset, ok, other.UnknownTags.Len())
		}

		// Nothing committed: no field.
		if _, ok := TakeOffset(answer(req)); ok {
			t.Fatal("TOPIC_ALREADY_EXISTS carries an offset")
		}
	})
}

// TakeOffset of what is not a kmsg response struct finds nothing.
func TestTakeOffsetOfNothing(t *testing.T) {
	var nilResp *kmsg.CreateTopicsResponse
	for _, r := range []kmsg.Response{nil, nilResp} {
		if _, ok := TakeOffset(r); ok {
			t.Fatalf("%T: an offset", r)
		}
	}
}
