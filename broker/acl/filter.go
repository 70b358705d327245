package acl

import (
	"fmt"
	"strings"
)

// Filter selects bindings, as a DescribeAcls request or one filter of a
// DeleteAcls request gives it. A nil Name, Principal or Host matches any;
// ANY matches any value of its enum; PatternMatch selects the patterns
// that would apply to the resource Name (LITERAL of the name, LITERAL "*",
// PREFIXED of a prefix of it), and with a nil Name any pattern. Hosts
// are compared normalised (NormalizeHost), so a filter written in one
// form selects a binding stored in another.
type Filter struct {
	ResourceType ResourceType
	Name         *string
	Pattern      PatternType
	Principal    *string
	Host         *string
	Operation    Operation
	Permission   Permission
}

// Validate rejects what Kafka answers INVALID_REQUEST for: an UNKNOWN
// (or out-of-range) value in any field.
func (f Filter) Validate() error {
	if f.ResourceType <= ResourceUnknown || f.ResourceType > ResourceUser {
		return fmt.Errorf("invalid resource type %s (%d) in filter", f.ResourceType, int8(f.ResourceType))
	}
	if f.Pattern <= PatternUnknown || f.Pattern > PatternPrefixed {
		return fmt.Errorf("invalid pattern type %s (%d) in filter", f.Pattern, int8(f.Pattern))
	}
	if f.Operation <= OpUnknown || f.Operation > OpDescribeTokens {
		return fmt.Errorf("invalid operation %s (%d) in filter", f.Operation, int8(f.Operation))
	}
	if f.Permission <= PermUnknown || f.Permission > PermAllow {
		return fmt.Errorf("invalid permission type %s (%d) in filter", f.Permission, int8(f.Permission))
	}
	return nil
}

// Matches reports whether f selects b. f must be valid.
func (f Filter) Matches(b Binding) bool {
	if f.ResourceType != ResourceAny && f.ResourceType != b.ResourceType {
		return false
	}
	switch f.Pattern {
	case PatternAny:
		if f.Name != nil && *f.Name != b.Name {
			return false
		}
	case PatternMatch:
		if f.Name != nil {
			n := *f.Name
			ok := b.Pattern == PatternLiteral && (b.Name == n || b.Name == Wildcard) ||
				b.Pattern == PatternPrefixed && strings.HasPrefix(n, b.Name)
			if !ok {
				return false
			}
		}
	default:
		if f.Pattern != b.Pattern || f.Name != nil && *f.Name != b.Name {
			return false
		}
	}
	if f.Principal != nil && *f.Principal != b.Principal {
		return false
	}
	if f.Host != nil && NormalizeHost(*f.Host) != NormalizeHost(b.Host) {
		return false
	}
	if f.Operation != OpAny && f.Operation != b.Operation {
		return false
	}
	return f.Permission == PermAny || f.Permission == b.Permission
}

// Select returns the bindings f matches, in their order. The caller owns
// the slice; the bindings are values.
func Select(f Filter, bs []Binding) []Binding {
	var out []Binding
	for _, b := range bs {
		if f.Matches(b) {
			out = append(out, b)
		}
	}
	return out
}
