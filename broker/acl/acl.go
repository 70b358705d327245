// Package acl is Fjord's authorizer: Kafka's StandardAuthorizer rules over
// a set of ACL bindings, with no I/O, no clock and no goroutines. The
// broker builds an Authorizer from its metadata image whenever the image's
// ACLs change and asks it, per request, whether a principal connected from
// a host may perform an operation on a resource.
//
// The rules, as Kafka's StandardAuthorizer applies them:
//   - a super user (super.users) may do everything;
//   - the ACLs that apply to a resource are those of its type whose pattern
//     matches its name: LITERAL with the same name, LITERAL "*" (the
//     wildcard), or PREFIXED with a prefix of the name;
//   - of those, the ones for the principal (or "User:*") and the host (or
//     "*") decide: a DENY for the operation (or ALL) denies, and DENY beats
//     any ALLOW; an ALLOW for the operation, ALL, or an operation that
//     implies it (READ, WRITE, DELETE and ALTER imply DESCRIBE;
//     ALTER_CONFIGS implies DESCRIBE_CONFIGS) allows;
//   - hosts are IP addresses compared in one normal form (NormalizeHost:
//     an IPv4-mapped IPv6 address is its IPv4 address, case and zero
//     compression do not matter), where Kafka compares strings;
//   - when no ACL at all applies to the resource (for any principal),
//     allow.everyone.if.no.acl.found decides; otherwise the request is
//     denied.
//
// The numeric values of the enums are Kafka's wire codes.
package acl

import (
	"fmt"
	"net/netip"
	"strings"
)

// ResourceType is Kafka's ResourceType code.
type ResourceType int8

const (
	ResourceUnknown         ResourceType = 0
	ResourceAny             ResourceType = 1 // filters only
	ResourceTopic           ResourceType = 2
	ResourceGroup           ResourceType = 3
	ResourceCluster         ResourceType = 4
	ResourceTransactionalID ResourceType = 5
	ResourceDelegationToken ResourceType = 6
	ResourceUser            ResourceType = 7
)

// ClusterName is the only name a CLUSTER resource has.
const ClusterName = "kafka-cluster"

// Wildcard is the LITERAL resource name, principal and host that match
// every name.
const (
	Wildcard          = "*"
	WildcardPrincipal = "User:*"
)

func (r ResourceType) String() string {
	switch r {
	case ResourceAny:
		return "ANY"
	case ResourceTopic:
		return "TOPIC"
	case ResourceGroup:
		return "GROUP"
	case ResourceCluster:
		return "CLUSTER"
	case ResourceTransactionalID:
		return "TRANSACTIONAL_ID"
	case ResourceDelegationToken:
		return "DELEGATION_TOKEN"
	case ResourceUser:
		return "USER"
	}
	return "UNKNOWN"
}

// PatternType is Kafka's PatternType code.
type PatternType int8

const (
	PatternUnknown  PatternType = 0
	PatternAny      PatternType = 1 // filters only: any pattern type, the exact name
	PatternMatch    PatternType = 2 // filters only: the patterns that would match the name
	PatternLiteral  PatternType = 3
	PatternPrefixed PatternType = 4
)

func (p PatternType) String() string {
	switch p {
	case PatternAny:
		return "ANY"
	case PatternMatch:
		return "MATCH"
	case PatternLiteral:
		return "LITERAL"
	case PatternPrefixed:
		return "PREFIXED"
	}
	return "UNKNOWN"
}

// Operation is Kafka's AclOperation code.
type Operation int8

const (
	OpUnknown         Operation = 0
	OpAny             Operation = 1 // filters only
	OpAll             Operation = 2
	OpRead            Operation = 3
	OpWrite           Operation = 4
	OpCreate          Operation = 5
	OpDelete          Operation = 6
	OpAlter           Operation = 7
	OpDescribe        Operation = 8
	OpClusterAction   Operation = 9
	OpDescribeConfigs Operation = 10
	OpAlterConfigs    Operation = 11
	OpIdempotentWrite Operation = 12
	OpCreateTokens    Operation = 13
	OpDescribeTokens  Operation = 14
)

var opNames = map[Operation]string{
	OpAny: "ANY", OpAll: "ALL", OpRead: "READ", OpWrite: "WRITE", OpCreate: "CREATE", OpDelete: "DELETE",
	OpAlter: "ALTER", OpDescribe: "DESCRIBE", OpClusterAction: "CLUSTER_ACTION", OpDescribeConfigs: "DESCRIBE_CONFIGS",
	OpAlterConfigs: "ALTER_CONFIGS", OpIdempotentWrite: "IDEMPOTENT_WRITE", OpCreateTokens: "CREATE_TOKENS",
	OpDescribeTokens: "DESCRIBE_TOKENS",
}

func (o Operation) String() string {
	if n, ok := opNames[o]; ok {
		return n
	}
	return "UNKNOWN"
}

// known reports whether o is a concrete operation a binding may name.
func (o Operation) known() bool { return o >= OpAll && o <= OpDescribeTokens }

// Permission is Kafka's AclPermissionType code.
type Permission int8

const (
	PermUnknown Permission = 0
	PermAny     Permission = 1 // filters only
	PermDeny    Permission = 2
	PermAllow   Permission = 3
)

func (p Permission) String() string {
	switch p {
	case PermAny:
		return "ANY"
	case PermDeny:
		return "DENY"
	case PermAllow:
		return "ALLOW"
	}
	return "UNKNOWN"
}

// Binding is one ACL: a resource pattern and an access entry.
//
// Invariant (for a binding stored or given to New): Validate returns nil.
type Binding struct {
	ResourceType ResourceType
	Name         string
	Pattern      PatternType // LITERAL or PREFIXED
	Principal    string      // "Type:name", e.g. "User:alice", or "User:*"
	Host         string      // "*" or an IP address; compared normalised (NormalizeHost)
	Operation    Operation
	Permission   Permission
}

func (b Binding) String() string {
	return fmt.Sprintf("(%s:%s:%s %s %s %s from %s)", b.Pattern, b.ResourceType, b.Name, b.Principal, b.Permission, b.Operation, b.Host)
}

// Validate checks a binding as Kafka checks a CreateAcls creation: concrete
// resource, pattern, operation and permission; a non-empty name (and
// "kafka-cluster" for CLUSTER); a "Type:name" principal; a "*" or IP host.
// The error text is the message for INVALID_REQUEST.
func (b Binding) Validate() error {
	switch b.ResourceType {
	case ResourceTopic, ResourceGroup, ResourceCluster, ResourceTransactionalID, ResourceDelegationToken, ResourceUser:
	default:
		return fmt.Errorf("invalid resource type %s (%d)", b.ResourceType, int8(b.ResourceType))
	}
	if b.Pattern != PatternLiteral && b.Pattern != PatternPrefixed {
		return fmt.Errorf("invalid pattern type %s (%d): an ACL is LITERAL or PREFIXED", b.Pattern, int8(b.Pattern))
	}
	if !b.Operation.known() {
		return fmt.Errorf("invalid operation %s (%d)", b.Operation, int8(b.Operation))
	}
	if b.Permission != PermAllow && b.Permission != PermDeny {
		return fmt.Errorf("invalid permission type %s (%d)", b.Permission, int8(b.Permission))
	}
	if b.Name == "" {
		return fmt.Errorf("resource name must not be empty")
	}
	if b.ResourceType == ResourceCluster && b.Name != ClusterName {
		return fmt.Errorf("the only valid name for the CLUSTER resource is %s", ClusterName)
	}
	if err := ValidPrincipal(b.Principal); err != nil {
		return err
	}
	return ValidHost(b.Host)
}

// ValidPrincipal checks Kafka's "Type:name" form.
func ValidPrincipal(p string) error {
	typ, name, ok := strings.Cut(p, ":")
	if !ok || typ == "" || name == "" {
		return fmt.Errorf("invalid principal %q: expected Type:name, e.g. User:alice", p)
	}
	return nil
}

// ValidHost checks a binding's host: "*" or an IP address.
func ValidHost(h string) error {
	if h == Wildcard {
		return nil
	}
	if _, err := netip.ParseAddr(h); err != nil {
		return fmt.Errorf("invalid host %q: expected * or an IP address", h)
	}
	return nil
}

// NormalizeHost is the one form in which ACL hosts are stored and
// compared, so that one address written two ways is one host: an IP
// address becomes its RFC 5952 text (lower case, the longest run of zero
// groups compressed: "2001:DB8:0:0::1" is "2001:db8::1"), an IPv4-mapped
// IPv6 address its IPv4 text ("::ffff:10.0.0.5" is "10.0.0.5", which is
// how a dual-stack listener may see an IPv4 client), and a zone
// ("fe80::1%eth0") is dropped: it names an interface of one machine,
// while a binding applies on every broker. "*" and anything that is not
// an IP address come back unchanged (Validate refuses the latter in a
// binding).
//
// Kafka compares the host strings as they are, so there a DENY written
// in another form than the connection's address silently never applies.
//
// A host already in normal form is returned without allocating: the
// authorizer normalises the connection's address on every check.
func NormalizeHost(h string) string {
	if h == Wildcard {
		return h
	}
	a, err := netip.ParseAddr(h)
	if err != nil {
		return h
	}
	a = a.Unmap().WithZone("")
	var buf [64]byte
	n := a.AppendTo(buf[:0])
	if string(n) == h {
		return h
	}
	return string(n)
}

// implies reports whether an ALLOW for granted allows op.
func implies(granted, op Operation) bool {
	if granted == op || granted == OpAll {
		return true
	}
	switch op {
	case OpDescribe:
		return granted == OpRead || granted == OpWrite || granted == OpDelete || granted == OpAlter
	case OpDescribeConfigs:
		return granted == OpAlterConfigs
	}
	return false
}

// entryMatches reports whether b's entry applies to principal connected
// from host. REQUIRES: b.Host and host normalised (NormalizeHost).
func entryMatches(b Binding, principal, host string) bool {
	return (b.Principal == principal || b.Principal == WildcardPrincipal) && (b.Host == Wildcard || b.Host == host)
}
