package controller

import (
	"cmp"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ACLs: the ACLChange record (type 15), the image's part, and the filter
// matching the active controller's DeleteAcls decision needs. The
// authorization rules themselves live in broker/acl, which the broker
// builds from Image.ACLs; this package cannot import it (controller never
// imports broker), so the small filter match below mirrors
// broker/acl.Filter.Matches, and both follow Kafka's AclBindingFilter.

// ACL is one ACL binding, with Kafka's numeric codes for the enums (the
// values of broker/acl's types). It is comparable: the image's set key.
//
// Invariant (for an ACL in an image): the broker validated it before
// forwarding the creation (broker/acl.Binding.Validate); Apply checks only
// that the enums are concrete.
type ACL struct {
	ResourceType int8
	Name         string
	PatternType  int8 // 3 LITERAL, 4 PREFIXED
	Principal    string
	Host         string
	Operation    int8
	Permission   int8
}

func (a ACL) String() string {
	return fmt.Sprintf("{rt:%d %q pt:%d %q host:%q op:%d perm:%d}", a.ResourceType, a.Name, a.PatternType, a.Principal, a.Host, a.Operation, a.Permission)
}

// Concrete reports whether every enum of a names one value (no ANY,
// MATCH or UNKNOWN) and the strings are not empty: what Apply requires.
func (a ACL) Concrete() bool {
	return a.ResourceType >= 2 && a.ResourceType <= 7 && (a.PatternType == 3 || a.PatternType == 4) &&
		a.Operation >= 2 && a.Operation <= 14 && (a.Permission == 2 || a.Permission == 3) &&
		a.Name != "" && a.Principal != "" && a.Host != ""
}

// ACLChange adds (Remove false) or removes one ACL binding. Adding one
// the image has, or removing one it has not, changes nothing.
type ACLChange struct {
	ACL    ACL
	Remove bool
}

func (ACLChange) Type() RecordType { return TypeACL }

func (c ACLChange) String() string {
	if c.Remove {
		return "{remove " + c.ACL.String() + "}"
	}
	return "{add " + c.ACL.String() + "}"
}

// applyACL applies an ACLChange to img (a shallow copy Apply made),
// cloning the set.
func (img *Image) applyACL(c ACLChange) error {
	a := c.ACL
	if !a.Concrete() {
		return fmt.Errorf("%w: acl %v: not a concrete binding", ErrNotApplicable, a)
	}
	_, has := img.acls[a]
	if has != c.Remove {
		return nil
	}
	img.acls = maps.Clone(img.acls)
	if c.Remove {
		delete(img.acls, a)
		if len(img.acls) == 0 {
			img.acls = nil
		}
		return nil
	}
	if img.acls == nil {
		img.acls = map[ACL]struct{}{}
	}
	img.acls[a] = struct{}{}
	return nil
}

// ACLs returns every ACL binding in a fixed order. The caller owns the
// slice.
func (img *Image) ACLs() []ACL {
	out := slices.Collect(maps.Keys(img.acls))
	slices.SortFunc(out, compareACL)
	return out
}

// HasACL reports whether img holds exactly a.
func (img *Image) HasACL(a ACL) bool { _, ok := img.acls[a]; return ok }

// SameACLs reports whether img and o share one ACL set (the image is
// copy-on-write, so an unchanged set is the same map): a cheap test for
// "the ACLs did not change" that may answer false for equal sets.
func (img *Image) SameACLs(o *Image) bool {
	return reflect.ValueOf(img.acls).UnsafePointer() == reflect.ValueOf(o.acls).UnsafePointer()
}

// ACLCount is the number of bindings.
func (img *Image) ACLCount() int { return len(img.acls) }

func compareACL(a, b ACL) int {
	return cmp.Or(cmp.Compare(a.ResourceType, b.ResourceType), cmp.Compare(a.PatternType, b.PatternType),
		cmp.Compare(a.Name, b.Name), cmp.Compare(a.Principal, b.Principal), cmp.Compare(a.Host, b.Host),
		cmp.Compare(a.Operation, b.Operation), cmp.Compare(a.Permission, b.Permission))
}

// ACLFilter is one DeleteAcls filter in Kafka's codes: 1 is ANY for every
// enum, pattern 2 is MATCH; a nil string matches any.
type ACLFilter struct {
	ResourceType int8
	Name         *string
	PatternType  int8
	Principal    *string
	Host         *string
	Operation    int8
	Permission   int8
	// NormalizeHost, if set, is the normal form hosts are compared in
	// (broker/acl.NormalizeHost, which this package cannot import): a
	// filter then selects a binding stored with the same address written
	// another way. nil compares hosts as written.
	NormalizeHost func(string) string
}

// Matches reports whether f selects a, as Kafka's AclBindingFilter does.
func (f ACLFilter) Matches(a ACL) bool {
	if f.ResourceType != 1 && f.ResourceType != a.ResourceType {
		return false
	}
	switch f.PatternType {
	case 1: // ANY
		if f.Name != nil && *f.Name != a.Name {
			return false
		}
	case 2: // MATCH
		if f.Name != nil {
			n := *f.Name
			if !(a.PatternType == 3 && (a.Name == n || a.Name == "*") || a.PatternType == 4 && strings.HasPrefix(n, a.Name)) {
				return false
			}
		}
	default:
		if f.PatternType != a.PatternType || f.Name != nil && *f.Name != a.Name {
			return false
		}
	}
	if f.Principal != nil && *f.Principal != a.Principal || f.Host != nil && !f.sameHost(*f.Host, a.Host) {
		return false
	}
	return (f.Operation == 1 || f.Operation == a.Operation) && (f.Permission == 1 || f.Permission == a.Permission)
}

func (f ACLFilter) sameHost(x, y string) bool {
	if f.NormalizeHost == nil {
		return x == y
	}
	return f.NormalizeHost(x) == f.NormalizeHost(y)
}

// DecideCreateACLs decides a CreateAcls in one round: forwarded by a
// broker, which has answered the invalid creations itself
// (broker/acl.Binding.Validate) and forwards only the valid ones, or sent
// to the CONTROLLER listener by an admin client (KIP-919), which no broker
// has checked. Each creation is checked and normalised by check (nil
// takes every concrete binding as given), and the valid ones go in one
// batch. One that is not concrete, or that check refuses, is
// INVALID_REQUEST (with check's reason).
func DecideCreateACLs(req *kmsg.CreateACLsRequest, check func(ACL) (ACL, error)) Decision {
	resp := req.ResponseKind().(*kmsg.CreateACLsResponse)
	var recs []Record
	return oneRound(func(*Image) []Record {
		resp.Results = make([]kmsg.CreateACLsResponseResult, len(req.Creations))
		for i, cr := range req.Creations {
			resp.Results[i] = kmsg.NewCreateACLsResponseResult()
			a := ACL{ResourceType: int8(cr.ResourceType), Name: cr.ResourceName, PatternType: int8(cr.ResourcePatternType),
				Principal: cr.Principal, Host: cr.Host, Operation: int8(cr.Operation), Permission: int8(cr.PermissionType)}
			if !a.Concrete() {
				resp.Results[i].ErrorCode = kerr.InvalidRequest.Code
				continue
			}
			if check != nil {
				n, err := check(a)
				if err != nil {
					msg := err.Error()
					resp.Results[i].ErrorCode, resp.Results[i].ErrorMessage = kerr.InvalidRequest.Code, &msg
					continue
				}
				a = n
			}
			recs = append(recs, NewRecord(ACLChange{ACL: a}))
		}
		return recs
	}, func(_ *Image, code int16) (kmsg.Response, []Note) {
		for i := range resp.Results {
			resp.Results[i].ErrorCode = codeOr(resp.Results[i].ErrorCode, code)
		}
		if len(recs) == 0 || code != 0 {
			return resp, nil
		}
		return resp, []Note{info("acls created", "acls", len(recs))}
	})
}

// DecideDeleteACLs decides a DeleteAcls forwarded by a broker (valid
// filters only) in one round: each filter matches the image's bindings as
// Kafka's AclBindingFilter does, hosts compared in normalize's normal form
// (nil: as written), a binding two filters match is reported (and
// removed) under the first, and the removals are one batch. If the batch
// fails, every filter answers its error and no matches.
func DecideDeleteACLs(req *kmsg.DeleteACLsRequest, normalize func(string) string) Decision {
	resp := req.ResponseKind().(*kmsg.DeleteACLsResponse)
	var recs []Record
	return oneRound(func(img *Image) []Record {
		taken := map[ACL]bool{}
		all := img.ACLs()
		for _, f := range req.Filters {
			r := kmsg.NewDeleteACLsResponseResult()
			cf := ACLFilter{ResourceType: int8(f.ResourceType), Name: f.ResourceName, PatternType: int8(f.ResourcePatternType),
				Principal: f.Principal, Host: f.Host, Operation: int8(f.Operation), Permission: int8(f.PermissionType), NormalizeHost: normalize}
			for _, a := range all {
				if taken[a] || !cf.Matches(a) {
					continue
				}
				taken[a] = true
				recs = append(recs, NewRecord(ACLChange{ACL: a, Remove: true}))
				m := kmsg.NewDeleteACLsResponseResultMatchingACL()
				m.ResourceType, m.ResourceName, m.ResourcePatternType = kmsg.ACLResourceType(a.ResourceType), a.Name, kmsg.ACLResourcePatternType(a.PatternType)
				m.Principal, m.Host = a.Principal, a.Host
				m.Operation, m.PermissionType = kmsg.ACLOperation(a.Operation), kmsg.ACLPermissionType(a.Permission)
				r.MatchingACLs = append(r.MatchingACLs, m)
			}
			resp.Results = append(resp.Results, r)
		}
		return recs
	}, func(_ *Image, code int16) (kmsg.Response, []Note) {
		if code != 0 {
			for i := range resp.Results {
				resp.Results[i].ErrorCode, resp.Results[i].MatchingACLs = code, nil
			}
			return resp, nil
		}
		if len(recs) == 0 {
			return resp, nil
		}
		return resp, []Note{info("acls deleted", "acls", len(recs))}
	})
}
