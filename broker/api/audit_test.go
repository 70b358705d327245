package api

import (
	"bytes"
	"encoding/json"
	"strings"
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

// TestAuditKeepsMutations: with the writer stalled, a flood of denials
// is dropped, but no mutation's line is: emitting one waits for room, and
// every one is written once the writer moves.
func TestAuditKeepsMutations(t *testing.T) {
	end := make(chan struct{})
	w := &blockingWriter{release: make(chan struct{})}
	a := NewAudit(w, 8, 8, end, zerolog.Nop(), nil)
	done := make(chan struct{})
	go func() { a.Run(); close(done) }()
	cc := &Conn{Principal: "User:admin", ClientHost: "/10.0.0.1"}
	for i := 0; i < 100; i++ {
		a.Denied(cc, 3, acl.OpDescribe, acl.ResourceTopic, "t")
	}
	const n = 50
	req := kmsg.NewPtrCreateACLsRequest()
	req.Creations = append(req.Creations, kmsg.NewCreateACLsRequestCreation())
	// CreateAcls' entry as its room registers it: mutating, with the
	// bindings in full among the details (broker/admin tests its own).
	entry := Entry{Key: 30, Mutates: true, AuditDetails: func(kmsg.Request) []string {
		return []string{"User:mallory ALLOW ALL on CLUSTER:kafka-cluster (LITERAL) from host *"}
	}}
	emitted := make(chan struct{})
	go func() {
		for i := 0; i < n; i++ {
			a.Admin(cc, &entry, req, req.ResponseKind())
		}
		close(emitted)
	}()
	close(w.release)
	<-emitted
	close(end)
	<-done
	out := w.buf.String()
	if got := strings.Count(out, `"api":"CreateACLs"`); got != n {
		t.Errorf("%d CreateACLs lines written, want %d", got, n)
	}
	if !strings.Contains(out, "User:mallory ALLOW ALL on CLUSTER:kafka-cluster (LITERAL) from host *") {
		t.Errorf("the binding is not audited in full:\n%.400s", out)
	}
	if a.Dropped() == 0 {
		t.Error("no denial dropped with the writer stalled")
	}
}
