// Package fjordmsg holds the wire types of Fjord's private API keys:
// requests between Fjord's own nodes that Kafka's protocol has no key
// for. They implement kmsg.Request and kmsg.Response, so the front end
// (protocol.ParseRequest, through RequestForKey), the registry, the
// authorizer and kgo (which sends any kmsg.Request a broker advertises in
// ApiVersions) treat them as any other key.
//
// Private keys are numbered far above Kafka's (under 100 in Kafka 4.x),
// so a future Kafka key cannot collide. Only the CONTROLLER listener
// serves them, and only to principals with CLUSTER_ACTION, like
// AlterPartition; a Kafka client never sends one.
//
// # RemoteLogSegment (key 10405, version 0, flexible)
//
// A partition leader's proposal of one remote log segment metadata record
// (tiered storage, KIP-405; controller/remote.go):
//
//	Request:  BrokerID int32, BrokerEpoch int64, Record compact bytes,
//	          tagged fields
//	Response: ThrottleMillis int32, ErrorCode int16, tagged fields
//
// Record is one controller.RemoteSegment or RemoteSegmentStateChange in
// the metadata log's own encoding (controller.Encode: versioned, with a
// CRC-32C), so the schema is written down once; the controller decodes
// and refuses anything else (INVALID_REQUEST). ErrorCode is the
// controller's decision (controller.DecideRemoteSegment). The response's
// tagged fields carry the controller's metadata offset
// (controller/active.OffsetTag), as every forwarded answer's do.
//
// The number is KIP-405's.
package fjordmsg

import (
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// RemoteLogSegmentKey is the RemoteLogSegment request's API key.
const RemoteLogSegmentKey int16 = 10405

// RequestForKey is a new request of a private key, nil for any other key.
func RequestForKey(key int16) kmsg.Request {
	if key == RemoteLogSegmentKey {
		return &RemoteLogSegmentRequest{}
	}
	return nil
}

// NameForKey names a private key, "" for any other.
func NameForKey(key int16) string {
	if key == RemoteLogSegmentKey {
		return "RemoteLogSegment"
	}
	return ""
}

// AnyRequestForKey is a new request of key, Kafka's (kmsg) or private;
// nil for a key neither knows.
func AnyRequestForKey(key int16) kmsg.Request {
	if r := kmsg.RequestForKey(key); r != nil {
		return r
	}
	return RequestForKey(key)
}

// AnyNameForKey names key, Kafka's (kmsg) or private; "Unknown" (kmsg's
// word) when neither knows it.
func AnyNameForKey(key int16) string {
	if n := NameForKey(key); n != "" {
		return n
	}
	return kmsg.NameForKey(key)
}

var errMalformed = errors.New("fjordmsg: malformed")

// RemoteLogSegmentRequest: see the package doc.
type RemoteLogSegmentRequest struct {
	Version     int16
	BrokerID    int32
	BrokerEpoch int64
	Record      []byte
	UnknownTags kmsg.Tags
}

func (*RemoteLogSegmentRequest) Key() int16           { return RemoteLogSegmentKey }
func (*RemoteLogSegmentRequest) MaxVersion() int16    { return 0 }
func (r *RemoteLogSegmentRequest) SetVersion(v int16) { r.Version = v }
func (r *RemoteLogSegmentRequest) GetVersion() int16  { return r.Version }
func (*RemoteLogSegmentRequest) IsFlexible() bool     { return true }
func (r *RemoteLogSegmentRequest) ResponseKind() kmsg.Response {
	return &RemoteLogSegmentResponse{Version: r.Version}
}

func (r *RemoteLogSegmentRequest) AppendTo(dst []byte) []byte {
	dst = kbin.AppendInt32(dst, r.BrokerID)
	dst = kbin.AppendInt64(dst, r.BrokerEpoch)
	dst = kbin.AppendCompactBytes(dst, r.Record)
	return appendTags(dst, &r.UnknownTags)
}

func (r *RemoteLogSegmentRequest) ReadFrom(src []byte) error {
	b := kbin.Reader{Src: src}
	r.BrokerID = b.Int32()
	r.BrokerEpoch = b.Int64()
	r.Record = b.CompactBytes()
	r.UnknownTags = kmsg.ReadTags(&b)
	return complete(&b, "RemoteLogSegmentRequest")
}

// RemoteLogSegmentResponse: see the package doc.
type RemoteLogSegmentResponse struct {
	Version        int16
	ThrottleMillis int32
	ErrorCode      int16
	UnknownTags    kmsg.Tags
}

func (*RemoteLogSegmentResponse) Key() int16           { return RemoteLogSegmentKey }
func (*RemoteLogSegmentResponse) MaxVersion() int16    { return 0 }
func (r *RemoteLogSegmentResponse) SetVersion(v int16) { r.Version = v }
func (r *RemoteLogSegmentResponse) GetVersion() int16  { return r.Version }
func (*RemoteLogSegmentResponse) IsFlexible() bool     { return true }
func (r *RemoteLogSegmentResponse) RequestKind() kmsg.Request {
	return &RemoteLogSegmentRequest{Version: r.Version}
}
func (r *RemoteLogSegmentResponse) Throttle() (int32, bool) { return r.ThrottleMillis, false }
func (r *RemoteLogSegmentResponse) SetThrottle(ms int32)    { r.ThrottleMillis = ms }

func (r *RemoteLogSegmentResponse) AppendTo(dst []byte) []byte {
	dst = kbin.AppendInt32(dst, r.ThrottleMillis)
	dst = kbin.AppendInt16(dst, r.ErrorCode)
	return appendTags(dst, &r.UnknownTags)
}

func (r *RemoteLogSegmentResponse) ReadFrom(src []byte) error {
	b := kbin.Reader{Src: src}
	r.ThrottleMillis = b.Int32()
	r.ErrorCode = b.Int16()
	r.UnknownTags = kmsg.ReadTags(&b)
	return complete(&b, "RemoteLogSegmentResponse")
}

func appendTags(dst []byte, t *kmsg.Tags) []byte {
	dst = kbin.AppendUvarint(dst, uint32(t.Len()))
	return t.AppendEach(dst)
}

// complete is b's error, or an error for bytes left over.
func complete(b *kbin.Reader, what string) error {
	if err := b.Complete(); err != nil {
		return fmt.Errorf("%w: %s: %v", errMalformed, what, err)
	}
	if len(b.Src) != 0 {
		return fmt.Errorf("%w: %s: %d trailing bytes", errMalformed, what, len(b.Src))
	}
	return nil
}
