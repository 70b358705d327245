package compattests

import (
	"errors"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"
)

// Fjord's private API keys, written from their wire format in the
// broker's docs (docs/api-versions.md; protocol/fjordmsg's package doc):
// this module imports no project package, so a stranger's request is
// built here as a stranger would build it.

// spRemoteLogSegmentKey is RemoteLogSegment's key: v0, flexible, on the
// CONTROLLER listener only. Request: BrokerID int32, BrokerEpoch int64,
// Record compact bytes, tags. Response: ThrottleMillis int32, ErrorCode
// int16, tags.
const spRemoteLogSegmentKey int16 = 10405

type remoteLogSegmentRequest struct {
	version     int16
	brokerID    int32
	brokerEpoch int64
	record      []byte
}

func (*remoteLogSegmentRequest) Key() int16           { return spRemoteLogSegmentKey }
func (*remoteLogSegmentRequest) MaxVersion() int16    { return 0 }
func (r *remoteLogSegmentRequest) SetVersion(v int16) { r.version = v }
func (r *remoteLogSegmentRequest) GetVersion() int16  { return r.version }
func (*remoteLogSegmentRequest) IsFlexible() bool     { return true }
func (r *remoteLogSegmentRequest) ResponseKind() kmsg.Response {
	return &remoteLogSegmentResponse{version: r.version}
}
func (r *remoteLogSegmentRequest) AppendTo(dst []byte) []byte {
	dst = kbin.AppendInt32(dst, r.brokerID)
	dst = kbin.AppendInt64(dst, r.brokerEpoch)
	dst = kbin.AppendCompactBytes(dst, r.record)
	return kbin.AppendUvarint(dst, 0)
}
func (r *remoteLogSegmentRequest) ReadFrom(src []byte) error {
	return errors.New("remoteLogSegmentRequest: not decoded here")
}

// remoteLogSegmentResponse: ErrorCode is exported for the probe's path.
type remoteLogSegmentResponse struct {
	version        int16
	ThrottleMillis int32
	ErrorCode      int16
}

func (*remoteLogSegmentResponse) Key() int16           { return spRemoteLogSegmentKey }
func (*remoteLogSegmentResponse) MaxVersion() int16    { return 0 }
func (r *remoteLogSegmentResponse) SetVersion(v int16) { r.version = v }
func (r *remoteLogSegmentResponse) GetVersion() int16  { return r.version }
func (*remoteLogSegmentResponse) IsFlexible() bool     { return true }
func (r *remoteLogSegmentResponse) RequestKind() kmsg.Request {
	return &remoteLogSegmentRequest{version: r.version}
}
func (r *remoteLogSegmentResponse) AppendTo(dst []byte) []byte {
	dst = kbin.AppendInt32(dst, r.ThrottleMillis)
	dst = kbin.AppendInt16(dst, r.ErrorCode)
	return kbin.AppendUvarint(dst, 0)
}
func (r *remoteLogSegmentResponse) ReadFrom(src []byte) error {
	b := kbin.Reader{Src: src}
	r.ThrottleMillis = b.Int32()
	r.ErrorCode = b.Int16()
	kmsg.SkipTags(&b)
	return b.Complete()
}

// spRemoteLogSegment is broker 99's claim of an uploaded segment of the
// probe topic's partition 0: the record bytes are never read, as the
// request is refused before.
func spRemoteLogSegment(e *spEnv) kmsg.Request {
	return &remoteLogSegmentRequest{brokerID: 99, brokerEpoch: 1, record: []byte{1, 16, 1, 0, 0, 0, 0}}
}

// spVersions are kgo's default versions and Fjord's private keys (kgo
// refuses to send a key its versions lack).
func spVersions() *kversion.Versions {
	vs := kversion.Stable()
	vs.SetMaxKeyVersion(spRemoteLogSegmentKey, 0)
	return vs
}
