package api

import (
	"bytes"
	"encoding/json"
	"sync"
	"testing"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordlog/fjord/broker/acl"
)

// blockingWriter holds every Write until released, like a stalled disk.
type blockingWriter struct {
	release chan struct{}
	mu      sync.Mutex
	buf     bytes.Buffer
}

func (w *blockingWriter) Write(p []byte) (int, error) {
	<-w.release
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.Write(p)
}

func (w *blockingWriter) Close() error { return nil }

// TestAuditNeverBlocks: with the writer stalled, emitting far more lines
// than the queue holds returns at once, and the excess is counted.
func TestAuditNeverBlocks(t *testing.T) {
	end := make(chan struct{})
	w := &blockingWriter{release: make(chan struct{})}
	a := NewAudit(w, AuditQueue, 0, end, zerolog.Nop(), nil)
	done := make(chan struct{})
	go func() { a.Run(); close(done) }()
	cc := &Conn{Principal: "User:alice", ClientHost: "/10.0.0.1", ClientID: "c"}
	const n = 3 * AuditQueue
	for i := 0; i < n; i++ {
		a.Denied(cc, 0, acl.OpWrite, acl.ResourceTopic, "mf.settlement.eur")
	}
	if d := a.Dropped(); d < n-AuditQueue-1 {
		t.Fatalf("dropped %d of %d with the writer stalled, want at least %d", d, n, n-AuditQueue-1)
	}
	close(w.release)
	close(end)
	<-done
	line, _, _ := bytes.Cut(w.buf.Bytes(), []byte("\n"))
	var got map[string]any
	if err := json.Unmarshal(line, &got); err != nil {
		t.Fatalf("audit line %q: %v", line, err)
	}
	for k, v := range map[string]any{"principal": "User:alice", "client": "10.0.0.1", "api": "Produce",
		"resource": "TOPIC:mf.settlement.eur", "operation": "WRITE", "outcome": "denied"} {
		if got[k] != v {
			t.Errorf("audit line %s = %v, want %v (%s)", k, got[k], v, line)
		}
	}
}

func TestAuditAdminOutcome(t *testing.T) {
	req := kmsg.NewPtrDeleteTopicsRequest()
	req.TopicNames = []string{"a", "b"}
	if got := resourcesOf(req); len(got) != 2 || got[0] != "a" {
		t.Errorf("resources %v", got)
	}
	resp := req.ResponseKind().(*kmsg.DeleteTopicsResponse)
	resp.Topics = []kmsg.DeleteTopicsResponseTopic{{ErrorCode: 0}, {ErrorCode: 29}, {ErrorCode: 29}}
	if got := errorCodesOf(resp); len(got) != 1 || got[0] != 29 {
		t.Errorf("codes %v", got)
	}
}
