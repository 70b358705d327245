package admin

import (
	"bytes"
	"strings"
	"sync"
	"testing"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordlog/fjord/broker/acl"
	"github.com/fjordlog/fjord/broker/api"
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

// TestAuditKeepsMutations: with the writer stalled, a flood of denials
// is dropped, but no mutation's line is: emitting one waits for room, and
// every one is written once the writer moves.
func TestAuditKeepsMutations(t *testing.T) {
	end := make(chan struct{})
	w := &blockingWriter{release: make(chan struct{})}
	a := api.NewAudit(w, 8, 8, end, zerolog.Nop(), nil)
	done := make(chan struct{})
	go func() { a.Run(); close(done) }()
	cc := &api.Conn{Principal: "User:admin", ClientHost: "/10.0.0.1"}
	for i := 0; i < 100; i++ {
		a.Denied(cc, 3, acl.OpDescribe, acl.ResourceTopic, "t")
	}
	const n = 50
	req := kmsg.NewPtrCreateACLsRequest()
	c := kmsg.NewCreateACLsRequestCreation()
	c.Principal, c.Host, c.ResourceName = "User:mallory", "*", "kafka-cluster"
	c.ResourceType, c.ResourcePatternType = kmsg.ACLResourceTypeCluster, kmsg.ACLResourcePatternTypeLiteral
	c.Operation, c.PermissionType = kmsg.ACLOperationAll, kmsg.ACLPermissionTypeAllow
	req.Creations = append(req.Creations, c)
	entry := createAclsEntry(nil)
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
