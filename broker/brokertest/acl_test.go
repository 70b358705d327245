package brokertest

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordlog/fjord/broker/config"
)

func aclCreation(rt kmsg.ACLResourceType, name, principal, host string, op kmsg.ACLOperation, perm kmsg.ACLPermissionType) kmsg.CreateACLsRequestCreation {
	c := kmsg.NewCreateACLsRequestCreation()
	c.ResourceType, c.ResourceName, c.ResourcePatternType = rt, name, kmsg.ACLResourcePatternTypeLiteral
	c.Principal, c.Host, c.Operation, c.PermissionType = principal, host, op, perm
	return c
}

// createACLs sends one CreateAcls to addr and returns each creation's
// error code.
func createACLs(t *testing.T, addr string, cs ...kmsg.CreateACLsRequestCreation) []int16 {
	t.Helper()
	req := kmsg.NewPtrCreateACLsRequest()
	req.Creations = cs
	resp, err := request(t, addr, req)
	if err != nil {
		t.Fatalf("create acls at %s: %v", addr, err)
	}
	var codes []int16
	for _, r := range resp.(*kmsg.CreateACLsResponse).Results {
		codes = append(codes, r.ErrorCode)
	}
	return codes
}

// deniesFromHost lists the hosts DescribeAcls shows for the DENY bindings
// on topic name.
func deniesFromHost(t *testing.T, addr, name string) []string {
	t.Helper()
	req := kmsg.NewPtrDescribeACLsRequest()
	req.ResourceType, req.ResourceName, req.ResourcePatternType = kmsg.ACLResourceTypeTopic, &name, kmsg.ACLResourcePatternTypeLiteral
	req.Operation, req.PermissionType = kmsg.ACLOperationAny, kmsg.ACLPermissionTypeDeny
	resp, err := request(t, addr, req)
	if err != nil {
		t.Fatal(err)
	}
	var hosts []string
	for _, r := range resp.(*kmsg.DescribeACLsResponse).Resources {
		for _, a := range r.ACLs {
			hosts = append(hosts, a.Host)
		}
	}
	return hosts
}

// produceOne writes one record to topic and returns the error, if any.
func produceOne(t *testing.T, addr, topic string) error {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.RecordRetries(2))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte("v")}).FirstErr()
}

// TestACLHostForms: ACL hosts are IP addresses in one normal form. A DENY
// written as an IPv4-mapped IPv6 address (or upper case, uncompressed)
// is stored, shown and enforced as the address the connection has
// (127.0.0.1 here), whether it was created through a client listener or
// sent straight to the CONTROLLER listener; a host that is not an IP
// address is refused on both; a DeleteAcls filter in another form
// removes it.
func TestACLHostForms(t *testing.T) {
	c, err := Start(Options{Nodes: 1, Dir: t.TempDir(), Configure: func(_ int32, cfg *config.Config) {
		cfg.AuthorizerClass = config.StandardAuthorizerClass
		cfg.AllowEveryoneIfNoACL = true // lets the first CreateAcls through
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	addr := c.Addr(1)
	const anon = "User:ANONYMOUS"
	codes := createACLs(t, addr,
		aclCreation(kmsg.ACLResourceTypeCluster, "kafka-cluster", anon, "*", kmsg.ACLOperationAll, kmsg.ACLPermissionTypeAllow),
		aclCreation(kmsg.ACLResourceTypeTopic, "*", "User:*", "*", kmsg.ACLOperationAll, kmsg.ACLPermissionTypeAllow),
		aclCreation(kmsg.ACLResourceTypeTopic, "t", anon, "::FFFF:127.0.0.1", kmsg.ACLOperationWrite, kmsg.ACLPermissionTypeDeny),
		aclCreation(kmsg.ACLResourceTypeTopic, "t", anon, "localhost", kmsg.ACLOperationWrite, kmsg.ACLPermissionTypeDeny),
	)
	if want := []int16{0, 0, 0, kerr.InvalidRequest.Code}; !slices.Equal(codes, want) {
		t.Fatalf("create through the client listener: codes %v, want %v", codes, want)
	}
	if hosts := deniesFromHost(t, addr, "t"); len(hosts) != 1 || hosts[0] != "127.0.0.1" {
		t.Fatalf("DescribeAcls shows deny hosts %q, want [127.0.0.1]", hosts)
	}
	for _, topic := range []string{"t", "u"} {
		if code := createTopic(t, addr, topic, 1, 1); code != 0 {
			t.Fatalf("create topic %s: %v", topic, kerr.ErrorForCode(code))
		}
	}
	if err := produceOne(t, addr, "u"); err != nil {
		t.Fatalf("produce to u: %v", err)
	}
	if err := produceOne(t, addr, "t"); !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("produce to t past a DENY for ::FFFF:127.0.0.1: %v", err)
	}

	// Straight to the CONTROLLER listener (KIP-919's admin path): no
	// broker handler checks it, the controller does, the same way.
	c.mu.Lock()
	ctl := c.nodes[1].ctlAddr
	c.mu.Unlock()
	codes = createACLs(t, ctl,
		aclCreation(kmsg.ACLResourceTypeTopic, "u", anon, "0:0:0:0:0:FFFF:7F00:1", kmsg.ACLOperationWrite, kmsg.ACLPermissionTypeDeny),
		aclCreation(kmsg.ACLResourceTypeTopic, "u", anon, "localhost", kmsg.ACLOperationWrite, kmsg.ACLPermissionTypeDeny),
	)
	if want := []int16{0, kerr.InvalidRequest.Code}; !slices.Equal(codes, want) {
		t.Fatalf("create through the CONTROLLER listener: codes %v, want %v", codes, want)
	}
	eventually(t, 10*time.Second, "the controller's ACL on the broker", func() bool {
		hosts := deniesFromHost(t, addr, "u")
		return len(hosts) == 1 && hosts[0] == "127.0.0.1"
	})
	if err := produceOne(t, addr, "u"); !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("produce to u past a DENY for 0:0:0:0:0:FFFF:7F00:1: %v", err)
	}

	// DeleteAcls with the host in another form than the stored one.
	del := kmsg.NewPtrDeleteACLsRequest()
	f := kmsg.NewDeleteACLsRequestFilter()
	f.ResourceType, f.ResourcePatternType = kmsg.ACLResourceTypeTopic, kmsg.ACLResourcePatternTypeAny
	f.Host, f.Operation, f.PermissionType = kmsg.StringPtr("::ffff:127.0.0.1"), kmsg.ACLOperationAny, kmsg.ACLPermissionTypeDeny
	del.Filters = append(del.Filters, f)
	resp, err := request(t, addr, del)
	if err != nil {
		t.Fatal(err)
	}
	if r := resp.(*kmsg.DeleteACLsResponse).Results[0]; r.ErrorCode != 0 || len(r.MatchingACLs) != 2 {
		t.Fatalf("delete by ::ffff:127.0.0.1: code %d, %d matched, want 2", r.ErrorCode, len(r.MatchingACLs))
	}
	if err := produceOne(t, addr, "t"); err != nil {
		t.Fatalf("produce to t after the DENY was deleted: %v", err)
	}
}
