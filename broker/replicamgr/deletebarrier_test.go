package replicamgr

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// A peer has forgotten the deleted topics only when it answers
// UNKNOWN_TOPIC_ID for every one of them: no answer, a missing id, or the
// topic still listed (or any other error) means ask again.
func TestPeerForgot(t *testing.T) {
	a, b := [16]byte{1}, [16]byte{2}
	topic := func(id [16]byte, code int16) kmsg.MetadataResponseTopic {
		mt := kmsg.NewMetadataResponseTopic()
		mt.TopicID, mt.ErrorCode = id, code
		return mt
	}
	resp := func(ts ...kmsg.MetadataResponseTopic) *kmsg.MetadataResponse {
		r := kmsg.NewPtrMetadataResponse()
		r.Topics = ts
		return r
	}
	unknown := kerr.UnknownTopicID.Code
	for _, tc := range []struct {
		name string
		resp *kmsg.MetadataResponse
		want bool
	}{
		{"no answer", nil, false},
		{"both unknown", resp(topic(b, unknown), topic(a, unknown)), true},
		{"one still listed", resp(topic(a, unknown), topic(b, 0)), false},
		{"one missing", resp(topic(a, unknown)), false},
		{"another error", resp(topic(a, unknown), topic(b, kerr.LeaderNotAvailable.Code)), false},
	} {
		if got := peerForgot(tc.resp, [][16]byte{a, b}); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}
