package active

import (
	"context"
	"encoding/binary"
	"reflect"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// The CONTROLLER listener's Kafka half serves brokers, not clients: broker
// registration and heartbeats, producer-id blocks, and the admin requests
// brokers forward, all decided by the Controller (Call); and, on any voter,
// the metadata log for broker-only nodes to follow (metalog.go); and, for
// admin clients given bootstrap.controllers, DescribeCluster of the
// controllers (describe.go). Which keys and versions it serves, who may
// send them, and what is audited are the broker's registry's
// (broker/registry.go, Config.KafkaHandler): the broker's dispatch
// authorizes a request and then hands it to Answer.

// Answer answers one request of the listener's Kafka half, already
// authorized by the caller: the metadata log's Fetch and FetchSnapshot and
// DescribeCluster from this voter, every other request through Call, its
// answer carrying Call's offset in the OffsetTag field.
// reply gets nil when this node is not the active controller (now), or
// ctx ended or the controller closed first: the caller answers
// NOT_CONTROLLER and the broker retries at the leader. reply is called
// exactly once, from a goroutine Close waits for when the answer waits
// for the quorum: the caller's goroutine (a connection's reader) must not.
func (c *Controller) Answer(ctx context.Context, req kmsg.Request, reply func(kmsg.Response)) {
	switch r := req.(type) {
	case *kmsg.DescribeClusterRequest:
		reply(c.describeControllers(r))
		return
	case *kmsg.FetchSnapshotRequest:
		reply(c.serveMetadataSnapshot(r))
		return
	}
	if !c.spawn(func() {
		if f, ok := req.(*kmsg.FetchRequest); ok {
			reply(c.serveMetadataFetch(ctx, f))
			return
		}
		resp, offset := c.Call(ctx, req)
		if resp != nil && offset > 0 {
			setOffset(resp, offset)
		}
		reply(resp)
	}) {
		reply(nil)
	}
}

// OffsetTag is the tagged field by which an answer on this listener
// carries Call's offset to the broker that forwarded the request: the
// metadata offset from which the records the answer committed are in the
// image, as an unsigned varint, at the top level of the response. Absent
// when the answer committed nothing.
//
// Why a tagged field: the broker needs the offset beside the Kafka
// response, and every response it forwards is flexible at the versions
// the CONTROLLER listener serves at most, which are the versions a
// broker's client (kgo, negotiating the highest both ends serve) sends
// (broker.TestForwardedVersionsFlexible). Flexible versions carry tagged
// fields a receiver does not know, and the protocol requires receivers to
// skip them (KIP-482); kmsg keeps them in UnknownTags when it decodes and
// writes them back when it encodes. So the offset crosses the wire with no
// change to the framing, the listener's encoder or kgo's decoder.
// Rejected: Kafka's Envelope (key 58), a second framing on both sides for
// one number; a follow-up request for the controller's applied offset,
// a second round trip that can also see later records.
//
// The broker takes the field out (TakeOffset) before it answers its own
// client, so Kafka clients never see it; an admin client that sends a
// request straight to this listener (bootstrap.controllers) sees a tag it
// skips. Kafka numbers a structure's tags from 0, so one this large is
// never Kafka's.
const OffsetTag = 0x464a4f52 // "FJOR"

// setOffset puts offset into resp's OffsetTag field. A response with no
// tags (no flexible version) is left alone.
func setOffset(resp kmsg.Response, offset uint64) {
	if t := unknownTags(resp); t != nil {
		t.Set(OffsetTag, binary.AppendUvarint(nil, offset))
	}
}

// TakeOffset returns the offset resp's OffsetTag field carries, and
// removes the field, so resp can be answered to a Kafka client as it is.
// ok is false when resp has none (it committed nothing) or it does not
// parse.
func TakeOffset(resp kmsg.Response) (offset uint64, ok bool) {
	t := unknownTags(resp)
	if t == nil || t.Len() == 0 {
		return 0, false
	}
	var rest kmsg.Tags
	t.Each(func(key uint32, val []byte) {
		if key != OffsetTag {
			rest.Set(key, val)
			return
		}
		if v, n := binary.Uvarint(val); n == len(val) {
			offset, ok = v, true
		}
	})
	*t = rest
	return offset, ok
}

// unknownTags is resp's top-level UnknownTags, which every kmsg response
// struct has (kmsg offers no method for it); nil for anything else.
func unknownTags(resp kmsg.Response) *kmsg.Tags {
	v := reflect.ValueOf(resp)
	if v.Kind() != reflect.Pointer || v.IsNil() || v.Elem().Kind() != reflect.Struct {
		return nil
	}
	f := v.Elem().FieldByName("UnknownTags")
	if !f.IsValid() || !f.CanAddr() {
		return nil
	}
	t, _ := f.Addr().Interface().(*kmsg.Tags)
	return t
}
