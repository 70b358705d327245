package broker

import (
	"bytes"
	"encoding/json"
	"strings"
	"sync"
	"testing"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordlog/fjord/broker/acl"
	"github.com/fjordlog/fjord/broker/api"
	"github.com/fjordlog/fjord/broker/metrics"
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
	b := &Broker{log: zerolog.Nop()}
	b.ctx = b.tasks.Context()
	b.metrics = metrics.New(metricsSource{b})
	w := &blockingWriter{release: make(chan struct{})}
	a := &auditLog{b: b, ch: make(chan []byte, auditQueue), w: w}
	done := make(chan struct{})
	go func() { a.run(b); close(done) }()
	cc := &api.Conn{Principal: "User:alice", ClientHost: "/10.0.0.1", ClientID: "c"}
	const n = 3 * auditQueue
	for i := 0; i < n; i++ {
		a.denied(cc, 0, acl.OpWrite, acl.ResourceTopic, "mf.settlement.eur")
	}
	if d := a.dropped.Load(); d < n-auditQueue-1 {
		t.Fatalf("dropped %d of %d with the writer stalled, want at least %d", d, n, n-auditQueue-1)
	}
	close(w.release)
	b.tasks.Cancel()
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
	b := &Broker{log: zerolog.Nop()}
	b.ctx = b.tasks.Context()
	defer b.tasks.Cancel()
	b.metrics = metrics.New(metricsSource{b})
	w := &blockingWriter{release: make(chan struct{})}
	a := &auditLog{b: b, ch: make(chan []byte, 8), keep: make(chan []byte, 8), w: w}
	done := make(chan struct{})
	go func() { a.run(b); close(done) }()
	cc := &api.Conn{Principal: "User:admin", ClientHost: "/10.0.0.1"}
	for i := 0; i < 100; i++ {
		a.denied(cc, 3, acl.OpDescribe, acl.ResourceTopic, "t")
	}
	const n = 50
	req := kmsg.NewPtrCreateACLsRequest()
	c := kmsg.NewCreateACLsRequestCreation()
	c.Principal, c.Host, c.ResourceName = "User:mallory", "*", "kafka-cluster"
	c.ResourceType, c.ResourcePatternType = kmsg.ACLResourceTypeCluster, kmsg.ACLResourcePatternTypeLiteral
	c.Operation, c.PermissionType = kmsg.ACLOperationAll, kmsg.ACLPermissionTypeAllow
	req.Creations = append(req.Creations, c)
	emitted := make(chan struct{})
	go func() {
		for i := 0; i < n; i++ {
			a.admin(cc, newRegistry(nil).Get(30), req, req.ResponseKind())
		}
		close(emitted)
	}()
	close(w.release)
	<-emitted
	b.tasks.Cancel()
	<-done
	out := w.buf.String()
	if got := strings.Count(out, `"api":"CreateACLs"`); got != n {
		t.Errorf("%d CreateACLs lines written, want %d", got, n)
	}
	if !strings.Contains(out, "User:mallory ALLOW ALL on CLUSTER:kafka-cluster (LITERAL) from host *") {
		t.Errorf("the binding is not audited in full:\n%.400s", out)
	}
	if a.dropped.Load() == 0 {
		t.Error("no denial dropped with the writer stalled")
	}
}
