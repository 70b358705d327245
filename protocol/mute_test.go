package protocol

import (
	"bufio"
	"context"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// muteHandler answers at once and mutes the connection for 300 ms when the
// client id is "mute"; it notes when each request reached it.
type muteHandler struct {
	mu   sync.Mutex
	seen []time.Time
}

func (h *muteHandler) Handle(ctx context.Context, req *Request, respond Responder) {
	h.mu.Lock()
	h.seen = append(h.seen, time.Now())
	h.mu.Unlock()
	if req.ClientID == "mute" {
		req.Mute(300 * time.Millisecond)
	}
	resp := req.Body.ResponseKind()
	resp.SetVersion(req.Version)
	respond(resp, nil)
}

// TestMuteHoldsTheReader: a muted connection gets its response at once
// (KIP-219), and its next request, already sent, is not read before the
// mute ends.
func TestMuteHoldsTheReader(t *testing.T) {
	h := &muteHandler{}
	_, ln := startServer(t, h, 8)
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	req := kmsg.NewPtrMetadataRequest()
	req.SetVersion(4)
	out := append(frame(encodeRequest(req, 1, "mute")), frame(encodeRequest(req, 2, "other"))...)
	sent := time.Now()
	if _, err := c.Write(out); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(c)
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	for range 2 {
		if _, err := ReadFrame(br, 1<<20); err != nil {
			t.Fatal(err)
		}
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.seen) != 2 {
		t.Fatalf("%d requests handled", len(h.seen))
	}
	if gap := h.seen[1].Sub(h.seen[0]); gap < 300*time.Millisecond {
		t.Errorf("second request read %v after the muting one, before the mute ended", gap)
	}
	t.Logf("first handled %v after sending; second %v after the first", h.seen[0].Sub(sent), h.seen[1].Sub(h.seen[0]))
}
