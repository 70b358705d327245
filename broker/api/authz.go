package api

import (
	"reflect"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordlog/fjord/broker/acl"
)

// Authorization is a rule per key, run by the dispatch on the reader
// goroutine before the handler (the authorizer is immutable and in
// memory, so this never waits). A rule either
//   - denies the whole request: it returns the complete response, with
//     Kafka's error code where Kafka puts it, and the handler never runs;
//   - or removes the denied topics, partitions or groups from the request
//     (the handler serves the rest) and returns a fix that adds them back
//     to the handler's response with the authorization error;
//   - or filters what the handler lists (Metadata of all topics,
//     ListGroups) in the fix.
// With no authorizer configured no rule runs at all.

// Check is a rule's test of one request.
type Check func(z *Authz, req kmsg.Request) (deny kmsg.Response, fix func(kmsg.Response))

// Rule is one key's requirement: what docs/security.md says (Need, and
// Blast, the rank of what a holder of it can damage: 0 = read-only
// metadata, up to 5 = the cluster's shape) and the Check.
type Rule struct {
	Need  string
	Blast int
	Check Check
}

// Authz is one request's authorization context.
type Authz struct {
	Conn *Conn
	Az   *acl.Authorizer
	Key  int16
	// Denied audits a denial; nil audits nothing.
	Denied func(cc *Conn, key int16, op acl.Operation, rt acl.ResourceType, name string)
}

// Authorize runs e's rule for req; a nil authorizer allows all. On the
// CONTROLLER listener, CLUSTER_ACTION on the cluster passes every rule but
// the key's own controller rule (Entry.Rule's comment says why).
func Authorize(z *Authz, e *Entry, req kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
	if z.Az == nil || req == nil {
		return nil, nil
	}
	if z.Conn.Listener == CtlListener {
		if e.CtlRule != nil {
			return e.CtlRule.Check(z, req)
		}
		if z.Quiet(acl.OpClusterAction, acl.ResourceCluster, acl.ClusterName) {
			return nil, nil
		}
	}
	return e.Rule.Check(z, req)
}

// Ok asks the authorizer and audits a denial.
func (z *Authz) Ok(op acl.Operation, rt acl.ResourceType, name string) bool {
	if z.Az.Authorize(z.Conn.Principal, z.Conn.ClientHost, op, rt, name) {
		return true
	}
	z.Deny(op, rt, name)
	return false
}

// Deny audits a denial decided without asking Ok.
func (z *Authz) Deny(op acl.Operation, rt acl.ResourceType, name string) {
	if z.Denied != nil {
		z.Denied(z.Conn, z.Key, op, rt, name)
	}
}

// Quiet asks without auditing: for filtering what a listing shows.
func (z *Authz) Quiet(op acl.Operation, rt acl.ResourceType, name string) bool {
	return z.Az.Authorize(z.Conn.Principal, z.Conn.ClientHost, op, rt, name)
}

// Cluster asks for op on the cluster.
func (z *Authz) Cluster(op acl.Operation) bool { return z.Ok(op, acl.ResourceCluster, acl.ClusterName) }

// Close is the denial of a request that gets no response (acks=0
// produce): the connection is closed instead.
type Close struct {
	kmsg.Response // nil: never encoded
	Err           error
}

// NoACL is the rule of an API that needs no ACL (as in Kafka): ApiVersions,
// the SASL exchange, DescribeCluster, telemetry.
func NoACL(*Authz, kmsg.Request) (kmsg.Response, func(kmsg.Response)) { return nil, nil }

// TopErrorResponse is the error response of a request whose response has
// one, top-level, error code.
func TopErrorResponse(req kmsg.Request, code int16) kmsg.Response {
	return SetTopError(req.ResponseKind(), code)
}

// WholeDenied is a rule that needs op on the cluster for the whole request
// and, denied, answers with errResp's shape: the error on every resource
// the request names.
func WholeDenied(op acl.Operation, errResp func(kmsg.Request, int16) kmsg.Response) Check {
	return func(z *Authz, req kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
		if z.Cluster(op) {
			return nil, nil
		}
		return errResp(req, ClusterDenied), nil
	}
}

// SetTopError sets resp's top-level ErrorCode field, which every response
// a whole-request denial answers has.
func SetTopError(resp kmsg.Response, code int16) kmsg.Response {
	if f := reflect.ValueOf(resp).Elem().FieldByName("ErrorCode"); f.IsValid() && f.CanSet() {
		f.SetInt(int64(code))
	}
	return resp
}

// Top is a rule that needs one operation on one resource for the whole
// request; code is the top-level error when it is denied.
func Top(op acl.Operation, rt acl.ResourceType, name func(kmsg.Request) string, code int16) Check {
	return func(z *Authz, req kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
		n := acl.ClusterName
		if name != nil {
			n = name(req)
		}
		if z.Ok(op, rt, n) {
			return nil, nil
		}
		return SetTopError(req.ResponseKind(), code), nil
	}
}

// ClusterTop needs op on the cluster.
func ClusterTop(op acl.Operation) Check {
	return Top(op, acl.ResourceCluster, nil, ClusterDenied)
}

// GroupTop needs op on the group the request names.
func GroupTop(op acl.Operation, name func(kmsg.Request) string) Check {
	return Top(op, acl.ResourceGroup, name, GroupDenied)
}

// TxnTop needs WRITE on the transactional id the request names.
func TxnTop(name func(kmsg.Request) string) Check {
	return Top(acl.OpWrite, acl.ResourceTransactionalID, name, TxnDenied)
}

// All chains checks: the first denial wins, fixes compose.
func All(checks ...Check) Check {
	return func(z *Authz, req kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
		var fixes []func(kmsg.Response)
		for _, c := range checks {
			deny, fix := c(z, req)
			if deny != nil {
				return deny, nil
			}
			if fix != nil {
				fixes = append(fixes, fix)
			}
		}
		if len(fixes) == 0 {
			return nil, nil
		}
		return nil, func(resp kmsg.Response) {
			for _, f := range fixes {
				f(resp)
			}
		}
	}
}

// Kafka's authorization error codes.
var (
	TopicDenied   = kerr.TopicAuthorizationFailed.Code
	GroupDenied   = kerr.GroupAuthorizationFailed.Code
	ClusterDenied = kerr.ClusterAuthorizationFailed.Code
	TxnDenied     = kerr.TransactionalIDAuthorizationFailed.Code
)

// Split divides ts by whether op on each one's topic is allowed; keep is
// never nil when ts is not (an empty list must stay a list, not "all").
func Split[T any](z *Authz, op acl.Operation, ts []T, name func(T) string) (keep, denied []T) {
	if ts == nil {
		return nil, nil
	}
	keep = make([]T, 0, len(ts))
	for _, t := range ts {
		if z.Ok(op, acl.ResourceTopic, name(t)) {
			keep = append(keep, t)
		} else {
			denied = append(denied, t)
		}
	}
	return keep, denied
}

// Sift splits ts into those allow lets through and, for the others, the
// denials allow builds; keep is never nil when ts is not (an empty list
// must stay a list, not "all").
func Sift[T, D any](ts []T, allow func(T) (D, bool)) (keep []T, denied []D) {
	if ts == nil {
		return nil, nil
	}
	keep = make([]T, 0, len(ts))
	for _, t := range ts {
		if d, ok := allow(t); ok {
			keep = append(keep, t)
		} else {
			denied = append(denied, d)
		}
	}
	return keep, denied
}

// Partial ends a rule that took denied parts out of a request (topics,
// groups, resources): nothing denied, nothing to do; nothing kept, the
// denials alone are the response and the handler never runs; else a fix
// adds them to the handler's response.
func Partial[Resp kmsg.Response](req kmsg.Request, denied, kept int, add func(Resp)) (kmsg.Response, func(kmsg.Response)) {
	if denied > 0 && kept == 0 {
		resp := req.ResponseKind().(Resp)
		add(resp)
		return resp, nil
	}
	return nil, Amend(denied, add)
}

// Amend is the fix of a rule whose handler runs even when every part was
// denied (a DescribeGroups of no groups is still answered by the handler,
// which times it and charges its quota): nil when nothing was denied,
// else a fix that adds the denials to the handler's response.
func Amend[Resp kmsg.Response](denied int, add func(Resp)) func(kmsg.Response) {
	if denied == 0 {
		return nil
	}
	return func(r kmsg.Response) {
		if resp, ok := r.(Resp); ok {
			add(resp)
		}
	}
}

// Visible keeps the resources of type rt in ts that the principal may
// describe, in place (ts's backing array is reused): a listing's filter,
// so what it hides is not audited as a denial.
func Visible[T any](z *Authz, rt acl.ResourceType, ts []T, name func(T) string) []T {
	kept := ts[:0]
	for _, t := range ts {
		if z.Quiet(acl.OpDescribe, rt, name(t)) {
			kept = append(kept, t)
		}
	}
	return kept
}

// SiftGroups splits group ids by whether op on each is allowed; as Sift,
// keep is never nil when gs is not.
func SiftGroups(z *Authz, op acl.Operation, gs []string) (keep, denied []string) {
	return Sift(gs, func(g string) (string, bool) { return g, z.Ok(op, acl.ResourceGroup, g) })
}

// Needs is the rule that needs what need says, with blast's rank, checked
// by check.
func Needs(need string, blast int, check Check) Rule {
	return Rule{Need: need, Blast: blast, Check: check}
}
