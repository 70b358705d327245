package acl

import (
	"strings"
)

// Config is the authorizer's part of the broker configuration.
type Config struct {
	// SuperUsers are principals ("User:alice") that may do everything:
	// super.users, a semicolon-separated list (ParseSuperUsers).
	SuperUsers []string
	// AllowIfNoACL is allow.everyone.if.no.acl.found: a resource no ACL
	// applies to is open to everyone (false: to super users only).
	AllowIfNoACL bool
}

// ParseSuperUsers splits Kafka's super.users value ("User:a;User:b"),
// dropping empty entries and surrounding space.
func ParseSuperUsers(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ";") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// Authorizer answers authorization questions over a fixed set of
// bindings. It is immutable once built, so any number of goroutines may
// use one; a change of ACLs or configuration builds a new one.
//
// Invariant: every binding's Host is normalised (NormalizeHost).
// Invariant: byType[t] holds exactly the bindings of resource type t, and
// index[t] the same bindings keyed by pattern (indexKey), so a check
// looks up the literal name, "*" and each prefix of the name instead of
// scanning every binding.
type Authorizer struct {
	super        map[string]bool
	allowIfNoACL bool
	byType       map[ResourceType][]Binding
	index        map[ResourceType]map[indexKey][]Binding
}

// indexKey is a binding's pattern: its type and name.
type indexKey struct {
	pattern PatternType
	name    string
}

// New builds an authorizer. Bindings that do not validate are skipped (the
// controller never stores one). Each binding's host is normalised
// (NormalizeHost) here: bindings stored before creation normalised them
// still match the connection's address.
func New(cfg Config, bindings []Binding) *Authorizer {
	a := &Authorizer{super: map[string]bool{}, allowIfNoACL: cfg.AllowIfNoACL, byType: map[ResourceType][]Binding{},
		index: map[ResourceType]map[indexKey][]Binding{}}
	for _, s := range cfg.SuperUsers {
		a.super[s] = true
	}
	for _, b := range bindings {
		if b.Validate() != nil {
			continue
		}
		b.Host = NormalizeHost(b.Host)
		a.byType[b.ResourceType] = append(a.byType[b.ResourceType], b)
		ix := a.index[b.ResourceType]
		if ix == nil {
			ix = map[indexKey][]Binding{}
			a.index[b.ResourceType] = ix
		}
		k := indexKey{b.Pattern, b.Name}
		ix[k] = append(ix[k], b)
	}
	return a
}

// IsSuperUser reports whether principal is in super.users.
func (a *Authorizer) IsSuperUser(principal string) bool { return a.super[principal] }

// Authorize decides whether principal, connected from host (an IP address
// in any form, with or without Kafka's leading "/"), may perform op on
// the resource (rt, name).
func (a *Authorizer) Authorize(principal, host string, op Operation, rt ResourceType, name string) bool {
	if a.super[principal] {
		return true
	}
	host = NormalizeHost(strings.TrimPrefix(host, "/"))
	ix := a.index[rt]
	any, allowed := false, false
	// decide folds one pattern's bindings in; it reports a DENY.
	decide := func(bs []Binding) bool {
		for _, b := range bs {
			any = true
			if !entryMatches(b, principal, host) {
				continue
			}
			switch b.Permission {
			case PermDeny:
				if b.Operation == op || b.Operation == OpAll {
					return true // DENY beats ALLOW
				}
			case PermAllow:
				if implies(b.Operation, op) {
					allowed = true
				}
			}
		}
		return false
	}
	if decide(ix[indexKey{PatternLiteral, name}]) {
		return false
	}
	if name != Wildcard && decide(ix[indexKey{PatternLiteral, Wildcard}]) {
		return false
	}
	for i := 1; i <= len(name); i++ {
		if bs, ok := ix[indexKey{PatternPrefixed, name[:i]}]; ok && decide(bs) {
			return false
		}
	}
	if !any {
		return a.allowIfNoACL
	}
	return allowed
}

// AuthorizeAny decides whether principal may perform op on at least one
// resource of type rt, as Kafka's authorizeByResourceType does (used for
// idempotent producers: WRITE on any topic). An ALLOW counts unless a DENY
// for the same principal covers every name it allows: a DENY on LITERAL
// "*", or a DENY on a LITERAL of the same name or a PREFIXED pattern that
// is a prefix of it. With no ACL of the type at all,
// allow.everyone.if.no.acl.found decides.
func (a *Authorizer) AuthorizeAny(principal, host string, op Operation, rt ResourceType) bool {
	if a.super[principal] {
		return true
	}
	host = NormalizeHost(strings.TrimPrefix(host, "/"))
	bs := a.byType[rt]
	if len(bs) == 0 {
		return a.allowIfNoACL
	}
	var denies []Binding
	for _, b := range bs {
		if b.Permission == PermDeny && entryMatches(b, principal, host) && (b.Operation == op || b.Operation == OpAll) {
			if b.Pattern == PatternLiteral && b.Name == Wildcard {
				return false
			}
			denies = append(denies, b)
		}
	}
	for _, b := range bs {
		if b.Permission != PermAllow || !entryMatches(b, principal, host) || !implies(b.Operation, op) {
			continue
		}
		covered := false
		for _, d := range denies {
			if d.Pattern == PatternPrefixed && strings.HasPrefix(b.Name, d.Name) ||
				d.Pattern == PatternLiteral && b.Pattern == PatternLiteral && d.Name == b.Name {
				covered = true
				break
			}
		}
		if !covered {
			return true
		}
	}
	return false
}

// supportedOps are the operations Kafka defines on each resource type
// (its AclEntry.supportedOperations): what KIP-430's authorized
// operations are chosen from. ALL is not among them.
var supportedOps = map[ResourceType][]Operation{
	ResourceTopic:           {OpRead, OpWrite, OpCreate, OpDescribe, OpDelete, OpAlter, OpDescribeConfigs, OpAlterConfigs},
	ResourceGroup:           {OpRead, OpDescribe, OpDelete, OpDescribeConfigs, OpAlterConfigs},
	ResourceCluster:         {OpCreate, OpClusterAction, OpDescribeConfigs, OpAlterConfigs, OpIdempotentWrite, OpAlter, OpDescribe},
	ResourceTransactionalID: {OpDescribe, OpWrite},
	ResourceDelegationToken: {OpDescribe},
	ResourceUser:            {OpCreateTokens, OpDescribeTokens},
}

// AuthorizedOperations is KIP-430's bit set (bit n = operation code n) of
// the operations on resource (rt, name) that principal from host may
// perform, each decided as Authorize decides it (implied operations
// included). A nil authorizer (none configured) allows every operation.
func (a *Authorizer) AuthorizedOperations(principal, host string, rt ResourceType, name string) int32 {
	var bits int32
	for _, op := range supportedOps[rt] {
		if a == nil || a.Authorize(principal, host, op, rt, name) {
			bits |= 1 << op
		}
	}
	return bits
}
