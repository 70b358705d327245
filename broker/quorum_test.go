package broker

import (
	"testing"

	"github.com/fjordlog/fjord/broker/acl"
	"github.com/fjordlog/fjord/broker/config"
	"github.com/fjordlog/fjord/controller"
)

// TestRaftAuthorization: what the CONTROLLER listener's raft half asks
// (authorizeRaft): everyone without an authorizer; with one, super users
// and principals granted CLUSTER_ACTION on the cluster, from the hosts the
// ACLs name, and nobody else.
func TestRaftAuthorization(t *testing.T) {
	b := withImage(&Broker{}, &controller.Image{})
	if !b.authorizeRaft("User:ANONYMOUS", "10.0.0.9") {
		t.Fatal("without an authorizer a raft connection is refused")
	}

	b.cfg.AuthorizerClass = config.StandardAuthorizerClass
	b.cfg.SuperUsers = "User:admin"
	grant := func(img *controller.Image, principal, host string, rt acl.ResourceType, name string, op acl.Operation, perm acl.Permission) *controller.Image {
		t.Helper()
		next, err := img.Apply(img.Version()+1, controller.NewRecord(controller.ACLChange{ACL: controller.ACL{
			ResourceType: int8(rt), Name: name, PatternType: int8(acl.PatternLiteral), Principal: principal, Host: host,
			Operation: int8(op), Permission: int8(perm)}}))
		if err != nil {
			t.Fatal(err)
		}
		return next
	}
	img := b.image()
	img = grant(img, "User:voter", "10.0.0.1", acl.ResourceCluster, acl.ClusterName, acl.OpClusterAction, acl.PermAllow)
	img = grant(img, "User:ops", "*", acl.ResourceCluster, acl.ClusterName, acl.OpAlter, acl.PermAllow)
	img = grant(img, "User:app", "*", acl.ResourceTopic, "t", acl.OpAll, acl.PermAllow)
	b.replicas.Apply(img)
	for _, tc := range []struct {
		principal, host string
		want            bool
	}{
		{"User:admin", "10.0.0.9", true},
		{"User:voter", "10.0.0.1", true},
		{"User:voter", "10.0.0.2", false}, // the ACL names another host
		{"User:ops", "10.0.0.1", false},   // ALTER is not CLUSTER_ACTION
		{"User:app", "10.0.0.1", false},
		{"User:ANONYMOUS", "10.0.0.1", false},
	} {
		if got := b.authorizeRaft(tc.principal, tc.host); got != tc.want {
			t.Errorf("%s from %s: %v, want %v", tc.principal, tc.host, got, tc.want)
		}
	}
}
