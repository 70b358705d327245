package broker

import (
	"fmt"
	"sort"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// The API registry: everything Fjord knows about one API key is one value,
// registered once, in that key's NN_name.go file — its versions on each
// kind of listener, its handler, its authorization rule, whether it
// mutates (and so is always audited), and, for the keys the controller
// decides, its error response. Every listener serves through dispatch
// (dispatch.go), which reads nothing but this registry: ApiVersions,
// the front end's version check, authorization, audit and the handler all
// come from the same entry, so an API cannot be served without its rule,
// and a listener cannot be served without the authorizer.
//
// Before this registry an API's parts were spread over five tables (the
// version table, the authorization table, the check functions, the audit
// list, and the controller listener's own version table and error switch);
// the controller listener had been built without the second and third,
// and authorized nothing.

// handlerFunc answers one request. It runs on the connection's reader
// goroutine and must not block: work that waits calls respond later from
// another goroutine. respond must be called exactly once.
type handlerFunc func(b *Broker, cc *connCtx, req kmsg.Request, respond func(kmsg.Response))

// versionRange is the versions one kind of listener serves of a key.
// The zero value serves none.
type versionRange struct {
	min, max int16
	served   bool
}

// versions serves [min, max].
func versions(min, max int16) versionRange { return versionRange{min: min, max: max, served: true} }

// api is one key's registration.
//
// Invariants (checked at registration and by TestRegistry):
//   - served on at least one kind of listener;
//   - rule.check != nil and rule.need != "": every served key states what
//     it needs, "none" included (noACL);
//   - client.served iff handle != nil;
//   - a key the controller role answers on the CONTROLLER listener
//     (controller.served && !ctlLocal) has errorResponse, except the
//     metadata-log reads (Fetch, FetchSnapshot) and DescribeCluster, which
//     every voter answers itself.
type api struct {
	key int16
	// client is what the client listeners serve; handle answers there.
	client versionRange
	handle handlerFunc
	// controller is what the CONTROLLER listener serves. Its requests are
	// answered by this node's controller role (active.Controller.Answer),
	// or, with ctlLocal, by handle as on a client listener (ApiVersions
	// and the SASL keys, which are about the connection, not the cluster).
	controller versionRange
	ctlLocal   bool
	// rule is what the authorizer must allow, on every listener. On the
	// CONTROLLER listener a principal with CLUSTER_ACTION on the cluster (a
	// broker forwarding a request it has already authorized for its
	// client) passes every rule; anyone else meets the rule itself (an
	// admin client given bootstrap.controllers, KIP-919). In Kafka the same
	// holds: CLUSTER_ACTION is what lets a broker send Envelope requests on
	// behalf of any principal.
	rule authzRule
	// ctlRule, if set, is the rule on the CONTROLLER listener instead, with
	// no CLUSTER_ACTION pass: Fetch there reads the metadata log, which
	// only brokers and controllers may.
	ctlRule *authzRule
	// mutates: every request is audited, whatever its outcome, and its
	// line is never dropped (audit.go). auditDetails, if set, adds what
	// the resource names alone do not say (an ACL binding in full, a SCRAM
	// mechanism); never a secret.
	mutates      bool
	auditDetails func(req kmsg.Request) []string
	// errorResponse answers req with code wherever its response carries
	// an error code (the top level, or every resource the request names):
	// NOT_CONTROLLER from a voter that is not the active controller,
	// REQUEST_TIMED_OUT from a broker that could not reach it.
	errorResponse func(req kmsg.Request, code int16) kmsg.Response
}

// apis is the registry, filled by init functions in the NN_name.go files,
// never changed afterwards.
var apis = map[int16]*api{}

// register adds one key's entry; a second entry for a key, or one that
// breaks api's invariants, is a programming error caught at start-up.
func register(a api) {
	if _, dup := apis[a.key]; dup {
		panic(fmt.Sprintf("broker: api key %d registered twice", a.key))
	}
	if err := a.validate(); err != nil {
		panic(err)
	}
	apis[a.key] = &a
}

func (a *api) validate() error {
	switch {
	case !a.client.served && !a.controller.served:
		return fmt.Errorf("broker: api key %d is served on no listener", a.key)
	case a.rule.check == nil || a.rule.need == "":
		return fmt.Errorf("broker: api key %d has no authorization rule", a.key)
	case a.client.served != (a.handle != nil):
		return fmt.Errorf("broker: api key %d: a client range needs a handler, and only it", a.key)
	case a.ctlLocal && a.handle == nil:
		return fmt.Errorf("broker: api key %d answered locally on the CONTROLLER listener without a handler", a.key)
	}
	return nil
}

// errorResponseFor answers req with code through its key's entry; nil for
// a key that has none.
func errorResponseFor(req kmsg.Request, code int16) kmsg.Response {
	if a := apis[req.Key()]; a != nil && a.errorResponse != nil {
		return a.errorResponse(req, code)
	}
	return nil
}

// versionTable implements protocol.Versions for one kind of listener.
type versionTable struct {
	ctl bool
	// sasl: the CONTROLLER listener advertises the SASL keys only when it
	// authenticates with SASL (a broker's raft and Kafka dialers pick their
	// flow from ApiVersions). Client listeners always serve them.
	sasl bool
}

// clientVersions is every client listener's table.
var clientVersions = versionTable{}

func (t versionTable) rangeOf(a *api) versionRange {
	if !t.ctl {
		return a.client
	}
	if (a.key == saslHandshakeKey || a.key == saslAuthenticateKey) && !t.sasl {
		return versionRange{}
	}
	return a.controller
}

func (t versionTable) Supported(key int16) (int16, int16, bool) {
	a, ok := apis[key]
	if !ok {
		return 0, 0, false
	}
	r := t.rangeOf(a)
	return r.min, r.max, r.served
}

func (t versionTable) All() []kmsg.ApiVersionsResponseApiKey {
	out := make([]kmsg.ApiVersionsResponseApiKey, 0, len(apis))
	for k, a := range apis {
		if r := t.rangeOf(a); r.served {
			out = append(out, kmsg.ApiVersionsResponseApiKey{ApiKey: k, MinVersion: r.min, MaxVersion: r.max})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ApiKey < out[j].ApiKey })
	return out
}

const (
	saslHandshakeKey    = 17
	saslAuthenticateKey = 36
)
