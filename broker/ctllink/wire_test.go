package ctllink

import (
	"bytes"
	"context"
	"encoding/binary"
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordlog/fjord/controller"
	"github.com/fjordlog/fjord/controller/active"
	"github.com/fjordlog/fjord/protocol"
	"github.com/fjordlog/fjord/protocol/fjordmsg"
)

// ctlVersions is the table of tagController's listener: the keys the
// wire test sends, at the ranges the CONTROLLER listener serves them
// (broker's registry; TestForwardedVersionsFlexible there checks every
// forwarded key is flexible at its highest).
type ctlVersions map[int16][2]int16

var wireVersions = ctlVersions{18: {0, 4}, 19: {0, 7}, 20: {0, 6}, fjordmsg.RemoteLogSegmentKey: {0, 0}}

func (t ctlVersions) Supported(key int16) (int16, int16, bool) {
	r, ok := t[key]
	return r[0], r[1], ok
}

func (t ctlVersions) All() []kmsg.ApiVersionsResponseApiKey {
	var out []kmsg.ApiVersionsResponseApiKey
	for k, r := range t {
		out = append(out, kmsg.ApiVersionsResponseApiKey{ApiKey: k, MinVersion: r[0], MaxVersion: r[1]})
	}
	slices.SortFunc(out, func(a, b kmsg.ApiVersionsResponseApiKey) int { return int(a.ApiKey) - int(b.ApiKey) })
	return out
}

// tagController is a CONTROLLER listener's Kafka half for Client
// tests: ApiVersions from wireVersions, every other request
// answered by answer, at the version it came, with the metadata offset in
// active.OffsetTag as the active controller sends it.
type tagController struct {
	answer func(kmsg.Request) kmsg.Response
	offset uint64
	mu     sync.Mutex
	got    []kmsg.Request // as decoded here
}

func (h *tagController) Handle(_ context.Context, req *protocol.Request, respond protocol.Responder) {
	if req.Key == 18 {
		resp := req.Body.ResponseKind().(*kmsg.ApiVersionsResponse)
		resp.ApiKeys = wireVersions.All()
		respond(resp, nil)
		return
	}
	h.mu.Lock()
	h.got = append(h.got, req.Body)
	h.mu.Unlock()
	resp := h.answer(req.Body)
	resp.SetVersion(req.Version)
	var tags *kmsg.Tags
	switch r := resp.(type) {
	case *kmsg.CreateTopicsResponse:
		tags = &r.UnknownTags
	case *kmsg.DeleteTopicsResponse:
		tags = &r.UnknownTags
	case *fjordmsg.RemoteLogSegmentResponse:
		tags = &r.UnknownTags
	}
	tags.Set(active.OffsetTag, binary.AppendUvarint(nil, h.offset))
	respond(resp, nil)
}

// Over the CONTROLLER listener: the request goes at the listener's
// highest version and comes back as it was, the answer at the request's
// version with the offset taken out of it; DeleteTopics' names (v0-5)
// arrive as v6 topics.
func TestCtlClientOverTheWire(t *testing.T) {
	h := &tagController{offset: 42, answer: func(kreq kmsg.Request) kmsg.Response {
		switch req := kreq.(type) {
		case *fjordmsg.RemoteLogSegmentRequest:
			r := req.ResponseKind().(*fjordmsg.RemoteLogSegmentResponse)
			r.ErrorCode = 74
			return r
		case *kmsg.CreateTopicsRequest:
			r := req.ResponseKind().(*kmsg.CreateTopicsResponse)
			st := kmsg.NewCreateTopicsResponseTopic()
			st.Topic = req.Topics[0].Topic
			r.Topics = append(r.Topics, st)
			return r
		default:
			r := kreq.ResponseKind().(*kmsg.DeleteTopicsResponse)
			st := kmsg.NewDeleteTopicsResponseTopic()
			st.Topic = kmsg.StringPtr("gone")
			r.Topics = append(r.Topics, st)
			return r
		}
	}}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := protocol.NewServer(protocol.ServerConfig{MaxFrameBytes: 1 << 20, MaxInFlight: 4}, h, wireVersions, zerolog.Nop())
	srv.Serve(ln)
	t.Cleanup(func() {
		ln.Close() // the server's owner closes its listener
		srv.Close()
	})

	d := net.Dialer{Timeout: 2 * time.Second}
	c := NewClient(Config{NodeID: 7, Voters: []Voter{{ID: 3, Addr: ln.Addr().String()}}, Dial: d.DialContext, Leader: func() int32 { return 3 }})
	t.Cleanup(c.Close)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()

	create := kmsg.NewPtrCreateTopicsRequest()
	create.Version = 4
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic = "t"
	create.Topics = append(create.Topics, rt)
	kresp, offset, err := c.request(ctx, 3, create)
	if err != nil {
		t.Fatal(err)
	}
	resp := kresp.(*kmsg.CreateTopicsResponse)
	if offset != 42 || resp.Version != 4 || create.Version != 4 || resp.UnknownTags.Len() != 0 || resp.Topics[0].Topic != "t" {
		t.Fatalf("offset %d, answer v%d, request now v%d, %d tags: %+v", offset, resp.Version, create.Version, resp.UnknownTags.Len(), resp)
	}
	if v := h.got[0].GetVersion(); v != wireVersions[19][1] {
		t.Fatalf("sent at v%d, want the listener's highest, v%d", v, wireVersions[19][1])
	}

	del := kmsg.NewPtrDeleteTopicsRequest()
	del.Version, del.TopicNames = 3, []string{"gone"}
	kresp, offset, err = c.request(ctx, 3, del)
	if err != nil {
		t.Fatal(err)
	}
	sent := h.got[1].(*kmsg.DeleteTopicsRequest)
	if sent.Version != 6 || len(sent.Topics) != 1 || *sent.Topics[0].Topic != "gone" {
		t.Fatalf("DeleteTopics v3 sent as %+v", sent)
	}
	if r := kresp.(*kmsg.DeleteTopicsResponse); offset != 42 || r.Version != 3 || del.Version != 3 || len(del.Topics) != 0 {
		t.Fatalf("offset %d, answer v%d, request now %+v", offset, r.Version, del)
	}

	// Fjord's private key goes over kgo too (only with the key in its
	// versions): the record arrives as sent, the answer's code and
	// offset come back.
	rec := controller.NewRecord(controller.RemoteSegmentStateChange{SegmentID: [16]byte{1}, State: controller.RemoteCopyFinished, Broker: 7})
	code, offset, err := c.RemoteLogSegment(ctx, 11, rec)
	if err != nil || code != 74 || offset != 42 {
		t.Fatalf("RemoteLogSegment: code %d offset %d, %v", code, offset, err)
	}
	if got := h.got[2].(*fjordmsg.RemoteLogSegmentRequest); got.BrokerID != 7 || got.BrokerEpoch != 11 || !bytes.Equal(got.Record, controller.Encode(rec)) {
		t.Fatalf("RemoteLogSegment arrived as %+v", got)
	}
}
