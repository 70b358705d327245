package fjordmsg

import (
	"bytes"
	"reflect"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Encoding and decoding are inverse, tags included, and a truncated or
// padded body is refused.
func TestRemoteLogSegmentRoundTrip(t *testing.T) {
	req := &RemoteLogSegmentRequest{BrokerID: 3, BrokerEpoch: 1 << 40, Record: []byte("rec")}
	var got RemoteLogSegmentRequest
	b := req.AppendTo(nil)
	if err := got.ReadFrom(b); err != nil || !reflect.DeepEqual(&got, req) {
		t.Fatalf("request: %+v, %v", got, err)
	}
	for _, bad := range [][]byte{b[:len(b)-1], append(bytes.Clone(b), 0)} {
		if err := new(RemoteLogSegmentRequest).ReadFrom(bad); err == nil {
			t.Fatalf("accepted %x", bad)
		}
	}
	resp := &RemoteLogSegmentResponse{ThrottleMillis: 5, ErrorCode: 74}
	resp.UnknownTags.Set(0x464a4f52, []byte{9})
	var r RemoteLogSegmentResponse
	if err := r.ReadFrom(resp.AppendTo(nil)); err != nil || r.ErrorCode != 74 || r.ThrottleMillis != 5 {
		t.Fatalf("response: %+v, %v", r, err)
	}
	var tag []byte
	r.UnknownTags.Each(func(k uint32, v []byte) { tag = v })
	if !bytes.Equal(tag, []byte{9}) {
		t.Fatalf("tag %x", tag)
	}
	if AnyRequestForKey(RemoteLogSegmentKey) == nil || AnyNameForKey(RemoteLogSegmentKey) != "RemoteLogSegment" || AnyNameForKey(0) != "Produce" {
		t.Fatal("key lookups")
	}
	var _ kmsg.Request = req
}
