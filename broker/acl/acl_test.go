package acl

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func lit(rt ResourceType, name, principal, host string, op Operation, perm Permission) Binding {
	return Binding{ResourceType: rt, Name: name, Pattern: PatternLiteral, Principal: principal, Host: host, Operation: op, Permission: perm}
}

func pre(rt ResourceType, name, principal, host string, op Operation, perm Permission) Binding {
	b := lit(rt, name, principal, host, op, perm)
	b.Pattern = PatternPrefixed
	return b
}

const alice, bob = "User:alice", "User:bob"

// TestAuthorize follows the rules of Kafka's StandardAuthorizer as its
// documentation (docs/security.html, "Authorization and ACLs") states them.
func TestAuthorize(t *testing.T) {
	type ask struct {
		principal, host string
		op              Operation
		rt              ResourceType
		name            string
		want            bool
	}
	cases := []struct {
		name string
		cfg  Config
		acls []Binding
		asks []ask
	}{
		{"no acl denies everyone but super users", Config{SuperUsers: []string{alice}}, nil, []ask{
			{alice, "10.0.0.1", OpWrite, ResourceTopic, "t", true},
			{bob, "10.0.0.1", OpWrite, ResourceTopic, "t", false},
			{bob, "10.0.0.1", OpAlter, ResourceCluster, ClusterName, false},
		}},
		{"allow.everyone.if.no.acl.found opens only resources without acls", Config{AllowIfNoACL: true},
			[]Binding{lit(ResourceTopic, "guarded", alice, "*", OpRead, PermAllow)}, []ask{
				{bob, "1.2.3.4", OpWrite, ResourceTopic, "open", true},
				{bob, "1.2.3.4", OpRead, ResourceTopic, "guarded", false},
				{alice, "1.2.3.4", OpRead, ResourceTopic, "guarded", true},
				{alice, "1.2.3.4", OpWrite, ResourceTopic, "guarded", false},
			}},
		{"literal, wildcard and prefixed patterns", Config{}, []Binding{
			lit(ResourceTopic, "orders", alice, "*", OpWrite, PermAllow),
			lit(ResourceTopic, "*", bob, "*", OpRead, PermAllow),
			pre(ResourceTopic, "mf.settlement.", alice, "*", OpRead, PermAllow),
		}, []ask{
			{alice, "h", OpWrite, ResourceTopic, "orders", true},
			{alice, "h", OpWrite, ResourceTopic, "orders2", false},
			{bob, "h", OpRead, ResourceTopic, "anything", true},
			{alice, "h", OpRead, ResourceTopic, "mf.settlement.eur", true},
			{alice, "h", OpRead, ResourceTopic, "mf.settlement", false},
			{alice, "h", OpRead, ResourceGroup, "mf.settlement.eur", false}, // another resource type
		}},
		{"deny beats allow, across patterns", Config{}, []Binding{
			lit(ResourceTopic, "*", alice, "*", OpAll, PermAllow),
			pre(ResourceTopic, "mf.settlement.", alice, "*", OpWrite, PermDeny),
		}, []ask{
			{alice, "h", OpWrite, ResourceTopic, "clicks", true},
			{alice, "h", OpWrite, ResourceTopic, "mf.settlement.eur", false},
			{alice, "h", OpRead, ResourceTopic, "mf.settlement.eur", true},
		}},
		{"implied operations", Config{}, []Binding{
			lit(ResourceTopic, "r", alice, "*", OpRead, PermAllow),
			lit(ResourceTopic, "w", alice, "*", OpWrite, PermAllow),
			lit(ResourceTopic, "d", alice, "*", OpDelete, PermAllow),
			lit(ResourceTopic, "a", alice, "*", OpAlter, PermAllow),
			lit(ResourceTopic, "ac", alice, "*", OpAlterConfigs, PermAllow),
			lit(ResourceTopic, "all", alice, "*", OpAll, PermAllow),
		}, []ask{
			{alice, "h", OpDescribe, ResourceTopic, "r", true},
			{alice, "h", OpDescribe, ResourceTopic, "w", true},
			{alice, "h", OpDescribe, ResourceTopic, "d", true},
			{alice, "h", OpDescribe, ResourceTopic, "a", true},
			{alice, "h", OpDescribeConfigs, ResourceTopic, "ac", true},
			{alice, "h", OpDescribe, ResourceTopic, "ac", false},
			{alice, "h", OpWrite, ResourceTopic, "r", false},
			{alice, "h", OpRead, ResourceTopic, "w", false},
			{alice, "h", OpDescribeConfigs, ResourceTopic, "a", false},
			{alice, "h", OpDelete, ResourceTopic, "all", true},
			{alice, "h", OpAlterConfigs, ResourceTopic, "all", true},
		}},
		{"a deny of an implying operation does not deny the implied one", Config{}, []Binding{
			lit(ResourceTopic, "t", alice, "*", OpDescribe, PermAllow),
			lit(ResourceTopic, "t", alice, "*", OpRead, PermDeny),
		}, []ask{
			{alice, "h", OpDescribe, ResourceTopic, "t", true},
			{alice, "h", OpRead, ResourceTopic, "t", false},
		}},
		{"deny all denies every operation", Config{}, []Binding{
			lit(ResourceTopic, "t", alice, "*", OpRead, PermAllow),
			lit(ResourceTopic, "t", alice, "*", OpAll, PermDeny),
		}, []ask{
			{alice, "h", OpRead, ResourceTopic, "t", false},
			{alice, "h", OpDescribe, ResourceTopic, "t", false},
		}},
		{"hosts", Config{}, []Binding{
			lit(ResourceTopic, "t", alice, "10.0.0.1", OpRead, PermAllow),
			lit(ResourceTopic, "t", bob, "*", OpRead, PermAllow),
			lit(ResourceTopic, "t", bob, "10.0.0.9", OpRead, PermDeny),
		}, []ask{
			{alice, "/10.0.0.1", OpRead, ResourceTopic, "t", true},
			{alice, "10.0.0.2", OpRead, ResourceTopic, "t", false},
			{bob, "10.0.0.2", OpRead, ResourceTopic, "t", true},
			{bob, "/10.0.0.9", OpRead, ResourceTopic, "t", false},
		}},
		{"host forms: v4-mapped, case, zero compression, zone", Config{}, []Binding{
			lit(ResourceTopic, "t", WildcardPrincipal, "*", OpRead, PermAllow),
			lit(ResourceTopic, "t", alice, "::ffff:10.0.0.5", OpRead, PermDeny),
			lit(ResourceTopic, "t", alice, "2001:DB8:0:0::1", OpRead, PermDeny),
			lit(ResourceTopic, "t", bob, "10.0.0.6", OpRead, PermDeny),
			lit(ResourceTopic, "t", bob, "fe80::1%eth0", OpRead, PermDeny),
		}, []ask{
			{alice, "/10.0.0.5", OpRead, ResourceTopic, "t", false},
			{alice, "::FFFF:10.0.0.5", OpRead, ResourceTopic, "t", false},
			{alice, "/2001:db8::1", OpRead, ResourceTopic, "t", false},
			{alice, "2001:0db8:0000:0000:0000:0000:0000:0001", OpRead, ResourceTopic, "t", false},
			{alice, "2001:db8::2", OpRead, ResourceTopic, "t", true},
			{bob, "/::ffff:10.0.0.6", OpRead, ResourceTopic, "t", false},
			{bob, "::ffff:a00:6", OpRead, ResourceTopic, "t", false},
			{bob, "fe80::1", OpRead, ResourceTopic, "t", false},
			{bob, "fe80::1%eth1", OpRead, ResourceTopic, "t", false},
			{bob, "10.0.0.5", OpRead, ResourceTopic, "t", true},
		}},
		{"wildcard principal", Config{}, []Binding{
			lit(ResourceGroup, "g", WildcardPrincipal, "*", OpRead, PermAllow),
			lit(ResourceGroup, "g", bob, "*", OpRead, PermDeny),
		}, []ask{
			{alice, "h", OpRead, ResourceGroup, "g", true},
			{"User:ANONYMOUS", "h", OpRead, ResourceGroup, "g", true},
			{bob, "h", OpRead, ResourceGroup, "g", false},
		}},
		{"super users are not subject to deny", Config{SuperUsers: ParseSuperUsers(" User:admin ;;User:ops")}, []Binding{
			lit(ResourceCluster, ClusterName, "User:admin", "*", OpAll, PermDeny),
		}, []ask{
			{"User:admin", "h", OpAlter, ResourceCluster, ClusterName, true},
			{"User:ops", "h", OpAlter, ResourceCluster, ClusterName, true},
			{alice, "h", OpAlter, ResourceCluster, ClusterName, false},
		}},
		{"transactional id and cluster", Config{}, []Binding{
			pre(ResourceTransactionalID, "pay-", alice, "*", OpWrite, PermAllow),
			lit(ResourceCluster, ClusterName, alice, "*", OpIdempotentWrite, PermAllow),
		}, []ask{
			{alice, "h", OpWrite, ResourceTransactionalID, "pay-1", true},
			{alice, "h", OpDescribe, ResourceTransactionalID, "pay-1", true},
			{alice, "h", OpWrite, ResourceTransactionalID, "other", false},
			{alice, "h", OpIdempotentWrite, ResourceCluster, ClusterName, true},
			{alice, "h", OpClusterAction, ResourceCluster, ClusterName, false},
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for _, b := range c.acls {
				if err := b.Validate(); err != nil {
					t.Fatalf("%v: %v", b, err)
				}
			}
			a := New(c.cfg, c.acls)
			for _, q := range c.asks {
				if got := a.Authorize(q.principal, q.host, q.op, q.rt, q.name); got != q.want {
					t.Errorf("%s from %s %s %s:%s = %v, want %v", q.principal, q.host, q.op, q.rt, q.name, got, q.want)
				}
			}
		})
	}
}

func TestAuthorizeAny(t *testing.T) {
	cases := []struct {
		name string
		cfg  Config
		acls []Binding
		want bool
	}{
		{"no acl of the type", Config{}, nil, false},
		{"no acl of the type, allow everyone", Config{AllowIfNoACL: true}, nil, true},
		{"write on one topic", Config{}, []Binding{lit(ResourceTopic, "t", alice, "*", OpWrite, PermAllow)}, true},
		{"read only", Config{}, []Binding{lit(ResourceTopic, "t", alice, "*", OpRead, PermAllow)}, false},
		{"allow covered by a prefix deny", Config{}, []Binding{
			lit(ResourceTopic, "mf.x", alice, "*", OpWrite, PermAllow),
			pre(ResourceTopic, "mf.", alice, "*", OpWrite, PermDeny),
		}, false},
		{"wildcard deny", Config{}, []Binding{
			pre(ResourceTopic, "a", alice, "*", OpWrite, PermAllow),
			lit(ResourceTopic, "*", alice, "*", OpAll, PermDeny),
		}, false},
		{"someone else's acl", Config{AllowIfNoACL: true}, []Binding{lit(ResourceTopic, "t", bob, "*", OpWrite, PermAllow)}, false},
	}
	for _, c := range cases {
		if got := New(c.cfg, c.acls).AuthorizeAny(alice, "h", OpWrite, ResourceTopic); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}

func TestValidate(t *testing.T) {
	ok := lit(ResourceTopic, "t", alice, "*", OpRead, PermAllow)
	bad := map[string]func(*Binding){
		"match pattern":   func(b *Binding) { b.Pattern = PatternMatch },
		"any pattern":     func(b *Binding) { b.Pattern = PatternAny },
		"any resource":    func(b *Binding) { b.ResourceType = ResourceAny },
		"any operation":   func(b *Binding) { b.Operation = OpAny },
		"unknown perm":    func(b *Binding) { b.Permission = PermUnknown },
		"any perm":        func(b *Binding) { b.Permission = PermAny },
		"empty name":      func(b *Binding) { b.Name = "" },
		"bad principal":   func(b *Binding) { b.Principal = "alice" },
		"empty principal": func(b *Binding) { b.Principal = "User:" },
		"bad host":        func(b *Binding) { b.Host = "example.com" },
		"cluster name":    func(b *Binding) { b.ResourceType = ResourceCluster; b.Name = "c" },
		"op out of range": func(b *Binding) { b.Operation = 99 },
	}
	if err := ok.Validate(); err != nil {
		t.Fatal(err)
	}
	for name, f := range bad {
		b := ok
		f(&b)
		if b.Validate() == nil {
			t.Errorf("%s: %v validates", name, b)
		}
	}
}

func ptr(s string) *string { return &s }

func TestACLNormalizeHost(t *testing.T) {
	for in, want := range map[string]string{
		"*":                      "*",
		"10.0.0.5":               "10.0.0.5",
		"::ffff:10.0.0.5":        "10.0.0.5",
		"::FFFF:10.0.0.5":        "10.0.0.5",
		"::ffff:a00:5":           "10.0.0.5",
		"2001:DB8:0:0::1":        "2001:db8::1",
		"2001:db8:0:0:0:0:0:1":   "2001:db8::1",
		"2001:0DB8::0001":        "2001:db8::1",
		"2001:db8:0:1:0:0:0:1":   "2001:db8:0:1::1",
		"::1":                    "::1",
		"0:0:0:0:0:0:0:1":        "::1",
		"fe80::1%eth0":           "fe80::1",
		"::10.0.0.5":             "::a00:5", // IPv4-compatible, not mapped: another address
		"example.com":            "example.com",
		"":                       "",
		"/10.0.0.5":              "/10.0.0.5", // Kafka's "/" is the caller's to strip
		"10.0.0.005":             "10.0.0.005",
		"2001:db8::1::2":         "2001:db8::1::2",
		"2001:db8:0:0:0:0:0:0:1": "2001:db8:0:0:0:0:0:0:1",
		"::ffff:10.0.0.5%eth0":   "10.0.0.5",
		"ABCD:EF01:2345:6789:ABCD:EF01:2345:6789": "abcd:ef01:2345:6789:abcd:ef01:2345:6789",
	} {
		got := NormalizeHost(in)
		if got != want {
			t.Errorf("NormalizeHost(%q) = %q, want %q", in, got, want)
		}
		if again := NormalizeHost(got); again != got {
			t.Errorf("NormalizeHost(%q) = %q, not idempotent", got, again)
		}
	}
	// The authorizer normalises the connection's address on every check:
	// an address already in normal form must not allocate.
	for _, h := range []string{"10.0.0.5", "2001:db8::1", "*"} {
		if n := testing.AllocsPerRun(100, func() { _ = NormalizeHost(h) }); n != 0 {
			t.Errorf("NormalizeHost(%q): %v allocations", h, n)
		}
	}
}

// TestACLFilterHostForms: a filter's host selects a binding whose host is
// the same address written another way (a binding stored before hosts
// were normalised, or a filter written by hand).
func TestACLFilterHostForms(t *testing.T) {
	b := lit(ResourceTopic, "t", alice, "::FFFF:10.0.0.5", OpRead, PermDeny)
	f := Filter{ResourceType: ResourceAny, Pattern: PatternAny, Operation: OpAny, Permission: PermAny}
	for h, want := range map[string]bool{"10.0.0.5": true, "::ffff:10.0.0.5": true, "::FFFF:10.0.0.5": true, "10.0.0.6": false, "*": false} {
		f.Host = ptr(h)
		if got := f.Matches(b); got != want {
			t.Errorf("filter host %q on %v: %v, want %v", h, b, got, want)
		}
	}
}

// TestFilter follows Kafka's AclBindingFilter.matches and
// ResourcePatternFilter (MATCH: the patterns that would apply to the name).
func TestFilter(t *testing.T) {
	bs := []Binding{
		lit(ResourceTopic, "mf.settlement.eur", alice, "*", OpWrite, PermAllow), // 0
		pre(ResourceTopic, "mf.settlement.", alice, "*", OpRead, PermAllow),     // 1
		lit(ResourceTopic, "*", bob, "10.0.0.1", OpRead, PermDeny),              // 2
		pre(ResourceTopic, "mf.", bob, "*", OpDescribe, PermAllow),              // 3
		lit(ResourceGroup, "g", alice, "*", OpRead, PermAllow),                  // 4
	}
	all := Filter{ResourceType: ResourceAny, Pattern: PatternAny, Operation: OpAny, Permission: PermAny}
	cases := []struct {
		name string
		mod  func(*Filter)
		want []int
	}{
		{"everything", func(*Filter) {}, []int{0, 1, 2, 3, 4}},
		{"topics", func(f *Filter) { f.ResourceType = ResourceTopic }, []int{0, 1, 2, 3}},
		{"any pattern, exact name", func(f *Filter) { f.Name = ptr("mf.settlement.") }, []int{1}},
		{"literal only", func(f *Filter) { f.Pattern = PatternLiteral }, []int{0, 2, 4}},
		{"prefixed named", func(f *Filter) { f.Pattern = PatternPrefixed; f.Name = ptr("mf.") }, []int{3}},
		{"match a name", func(f *Filter) {
			f.ResourceType = ResourceTopic
			f.Pattern = PatternMatch
			f.Name = ptr("mf.settlement.eur")
		}, []int{0, 1, 2, 3}},
		{"match another name", func(f *Filter) { f.ResourceType = ResourceTopic; f.Pattern = PatternMatch; f.Name = ptr("clicks") }, []int{2}},
		{"match, no name", func(f *Filter) { f.Pattern = PatternMatch }, []int{0, 1, 2, 3, 4}},
		{"principal", func(f *Filter) { f.Principal = ptr(bob) }, []int{2, 3}},
		{"host", func(f *Filter) { f.Host = ptr("10.0.0.1") }, []int{2}},
		{"operation", func(f *Filter) { f.Operation = OpRead }, []int{1, 2, 4}},
		{"permission", func(f *Filter) { f.Permission = PermDeny }, []int{2}},
	}
	for _, c := range cases {
		f := all
		c.mod(&f)
		if err := f.Validate(); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		var got []int
		for i, b := range bs {
			if f.Matches(b) {
				got = append(got, i)
			}
		}
		if len(got) != len(c.want) {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
			continue
		}
		for i := range got {
			if got[i] != c.want[i] {
				t.Errorf("%s: %v, want %v", c.name, got, c.want)
				break
			}
		}
	}
	for _, f := range []Filter{
		{ResourceType: ResourceUnknown, Pattern: PatternAny, Operation: OpAny, Permission: PermAny},
		{ResourceType: ResourceAny, Pattern: PatternUnknown, Operation: OpAny, Permission: PermAny},
		{ResourceType: ResourceAny, Pattern: PatternAny, Operation: OpUnknown, Permission: PermAny},
		{ResourceType: ResourceAny, Pattern: PatternAny, Operation: OpAny, Permission: PermUnknown},
		{ResourceType: 8, Pattern: PatternAny, Operation: OpAny, Permission: PermAny},
	} {
		if f.Validate() == nil {
			t.Errorf("%+v validates", f)
		}
	}
}

// FuzzFilter decodes a DescribeAcls request body as the broker does and
// runs the filter, and a binding built from the same fields, through
// validation, matching and authorization: none may panic, and a valid
// binding's own exact filter must select it.
func FuzzFilter(f *testing.F) {
	seed := kmsg.NewPtrDescribeACLsRequest()
	seed.ResourceType, seed.ResourcePatternType = kmsg.ACLResourceTypeTopic, kmsg.ACLResourcePatternTypeMatch
	seed.ResourceName, seed.Principal, seed.Host = ptr("mf.settlement.eur"), ptr(alice), ptr("*")
	seed.Operation, seed.PermissionType = kmsg.ACLOperationRead, kmsg.ACLPermissionTypeAllow
	for v := int16(0); v <= 3; v++ {
		seed.Version = v
		f.Add(v, seed.AppendTo(nil))
	}
	f.Add(int16(1), []byte{2, 0xff, 0xff, 4, 0, 5, 'U', 's', 'e', 'r', ':', 0xff, 0xff, 8, 3})
	for _, h := range []string{"::FFFF:10.0.0.5", "2001:DB8:0:0::1", "fe80::1%eth0", "10.0.0.5"} {
		seed.Version, seed.Host, seed.ResourcePatternType = 1, ptr(h), kmsg.ACLResourcePatternTypeLiteral
		f.Add(int16(1), seed.AppendTo(nil))
	}
	f.Fuzz(func(t *testing.T, version int16, body []byte) {
		req := kmsg.NewPtrDescribeACLsRequest()
		req.Version = version & 3
		if req.ReadFrom(body) != nil {
			return
		}
		fl := Filter{ResourceType: ResourceType(req.ResourceType), Name: req.ResourceName, Pattern: PatternType(req.ResourcePatternType),
			Principal: req.Principal, Host: req.Host, Operation: Operation(req.Operation), Permission: Permission(req.PermissionType)}
		if req.Version == 0 {
			fl.Pattern = PatternLiteral
		}
		deref := func(p *string) string {
			if p == nil {
				return ""
			}
			return *p
		}
		b := Binding{ResourceType: fl.ResourceType, Name: deref(fl.Name), Pattern: fl.Pattern, Principal: deref(fl.Principal),
			Host: deref(fl.Host), Operation: fl.Operation, Permission: fl.Permission}
		a := New(Config{SuperUsers: ParseSuperUsers(deref(fl.Principal))}, []Binding{b})
		_ = a.Authorize(alice, deref(fl.Host), b.Operation, b.ResourceType, b.Name)
		_ = a.AuthorizeAny(b.Principal, b.Host, b.Operation, b.ResourceType)
		if fl.Validate() == nil {
			_ = Select(fl, []Binding{b})
		}
		if b.Validate() == nil {
			exact := Filter{ResourceType: b.ResourceType, Name: &b.Name, Pattern: b.Pattern, Principal: &b.Principal,
				Host: &b.Host, Operation: b.Operation, Permission: b.Permission}
			if exact.Validate() != nil || !exact.Matches(b) {
				t.Fatalf("binding %v not matched by its own filter", b)
			}
			if b.Permission == PermAllow && b.Host != Wildcard && !New(Config{}, []Binding{b}).Authorize(b.Principal, b.Host, b.Operation, b.ResourceType, b.Name) {
				t.Fatalf("binding %v does not allow what it names", b)
			}
			// Host forms: the normal form is an IP address, a fixed point,
			// selected by the filters of both forms; a DENY applies to the
			// connection's address in either form, over an ALLOW for every
			// host.
			n := NormalizeHost(b.Host)
			if ValidHost(n) != nil || NormalizeHost(n) != n {
				t.Fatalf("host %q normalises to %q", b.Host, n)
			}
			nf := exact
			nf.Host = &n
			if !nf.Matches(b) {
				t.Fatalf("binding %v not matched by its filter with host %q", b, n)
			}
			if b.Host != Wildcard {
				deny, allow := b, b
				deny.Permission, allow.Permission, allow.Host = PermDeny, PermAllow, Wildcard
				az := New(Config{}, []Binding{allow, deny})
				for _, h := range []string{b.Host, n, "/" + n} {
					if az.Authorize(b.Principal, h, b.Operation, b.ResourceType, b.Name) {
						t.Fatalf("deny %v does not apply from %q", deny, h)
					}
				}
			}
		}
	})
}

// KIP-430's bit sets: Kafka's supported operations per resource type,
// each decided by Authorize (implications and DENY included).
func TestAuthorizedOperations(t *testing.T) {
	// Kafka's values for "everything": topic 3576, group 3400 (READ, DESCRIBE,
	// DELETE, and since KIP-848's group configs DESCRIBE_CONFIGS and
	// ALTER_CONFIGS), cluster 8096.
	var none *Authorizer
	for rt, want := range map[ResourceType]int32{ResourceTopic: 3576, ResourceGroup: 3400, ResourceCluster: 8096} {
		if got := none.AuthorizedOperations(alice, "h", rt, "x"); got != want {
			t.Errorf("no authorizer, %v: %d, want %d", rt, got, want)
		}
	}
	a := New(Config{SuperUsers: []string{"User:root"}}, []Binding{
		lit(ResourceTopic, "t", alice, "*", OpWrite, PermAllow), // implies DESCRIBE
		lit(ResourceTopic, "t", alice, "*", OpDescribeConfigs, PermAllow),
		lit(ResourceTopic, "t", bob, "*", OpAll, PermAllow),
		lit(ResourceTopic, "t", bob, "*", OpDelete, PermDeny),
		lit(ResourceGroup, "g", alice, "*", OpRead, PermAllow),
		lit(ResourceCluster, ClusterName, alice, "*", OpIdempotentWrite, PermAllow),
	})
	bit := func(ops ...Operation) int32 {
		var b int32
		for _, o := range ops {
			b |= 1 << o
		}
		return b
	}
	for _, c := range []struct {
		who  string
		rt   ResourceType
		name string
		want int32
	}{
		{alice, ResourceTopic, "t", bit(OpWrite, OpDescribe, OpDescribeConfigs)},
		{alice, ResourceTopic, "other", 0},
		{bob, ResourceTopic, "t", bit(OpRead, OpWrite, OpCreate, OpDescribe, OpAlter, OpDescribeConfigs, OpAlterConfigs)},
		{alice, ResourceGroup, "g", bit(OpRead, OpDescribe)},
		{alice, ResourceCluster, ClusterName, bit(OpIdempotentWrite)},
		{"User:root", ResourceCluster, ClusterName, 8096},
	} {
		if got := a.AuthorizedOperations(c.who, "10.0.0.1", c.rt, c.name); got != c.want {
			t.Errorf("%s on %v %q: %b, want %b", c.who, c.rt, c.name, got, c.want)
		}
	}
}
