package admin

import (
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestCreateAclsAudited: CreateAcls mutates, so every request is audited,
// and its line names each binding in full (principal, permission,
// operation, resource, pattern and host), which the resource names alone
// do not say.
func TestCreateAclsAudited(t *testing.T) {
	req := kmsg.NewPtrCreateACLsRequest()
	c := kmsg.NewCreateACLsRequestCreation()
	c.Principal, c.Host, c.ResourceName = "User:mallory", "*", "kafka-cluster"
	c.ResourceType, c.ResourcePatternType = kmsg.ACLResourceTypeCluster, kmsg.ACLResourcePatternTypeLiteral
	c.Operation, c.PermissionType = kmsg.ACLOperationAll, kmsg.ACLPermissionTypeAllow
	req.Creations = append(req.Creations, c)
	e := createAclsEntry(nil)
	if !e.Mutates || e.AuditDetails == nil {
		t.Fatalf("CreateAcls: mutates %v, details %v", e.Mutates, e.AuditDetails != nil)
	}
	got := e.AuditDetails(req)
	if want := "User:mallory ALLOW ALL on CLUSTER:kafka-cluster (LITERAL) from host *"; len(got) != 1 || !strings.Contains(got[0], want) {
		t.Errorf("details %q, want %q", got, want)
	}
}
