package api

import (
	"fmt"
	"sort"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Handler answers one request. It runs on the connection's reader
// goroutine and must not block: work that waits calls respond later from
// another goroutine. respond must be called exactly once.
type Handler func(cc *Conn, req kmsg.Request, respond func(kmsg.Response))

// Range is the versions one kind of listener serves of a key. The zero
// value serves none.
type Range struct {
	Min, Max int16
	Served   bool
}

// Versions serves [min, max].
func Versions(min, max int16) Range { return Range{Min: min, Max: max, Served: true} }

// Entry is one key's registration.
//
// Invariants (checked by Register):
//   - served on at least one kind of listener;
//   - Rule.Check != nil and Rule.Need != "": every served key states what
//     it needs, "none" included (NoACL);
//   - Client.Served iff Handle != nil;
//   - CtlLocal only with a Handle.
type Entry struct {
	Key int16
	// Client is what the client listeners serve; Handle answers there.
	Client Range
	Handle Handler
	// Controller is what the CONTROLLER listener serves. Its requests are
	// answered by this node's controller role, or, with CtlLocal, by
	// Handle as on a client listener (ApiVersions and the SASL keys, which
	// are about the connection, not the cluster).
	Controller Range
	CtlLocal   bool
	// Rule is what the authorizer must allow, on every listener. On the
	// CONTROLLER listener a principal with CLUSTER_ACTION on the cluster (a
	// broker forwarding a request it has already authorized for its
	// client) passes every rule; anyone else meets the rule itself (an
	// admin client given bootstrap.controllers, KIP-919). In Kafka the same
	// holds: CLUSTER_ACTION is what lets a broker send Envelope requests on
	// behalf of any principal.
	Rule Rule
	// CtlRule, if set, is the rule on the CONTROLLER listener instead, with
	// no CLUSTER_ACTION pass: Fetch there reads the metadata log, which
	// only brokers and controllers may.
	CtlRule *Rule
	// Mutates: every request is audited, whatever its outcome, and its
	// line is never dropped. AuditDetails, if set, adds what the resource
	// names alone do not say (an ACL binding in full, a SCRAM mechanism);
	// never a secret.
	Mutates      bool
	AuditDetails func(req kmsg.Request) []string
	// ErrorResponse answers req with code wherever its response carries
	// an error code (the top level, or every resource the request names):
	// NOT_CONTROLLER from a voter that is not the active controller,
	// REQUEST_TIMED_OUT from a broker that could not reach it.
	ErrorResponse func(req kmsg.Request, code int16) kmsg.Response
}

func (e *Entry) validate() error {
	switch {
	case !e.Client.Served && !e.Controller.Served:
		return fmt.Errorf("api key %d is served on no listener", e.Key)
	case e.Rule.Check == nil || e.Rule.Need == "":
		return fmt.Errorf("api key %d has no authorization rule", e.Key)
	case e.Client.Served != (e.Handle != nil):
		return fmt.Errorf("api key %d: a client range needs a handler, and only it", e.Key)
	case e.CtlLocal && e.Handle == nil:
		return fmt.Errorf("api key %d answered locally on the CONTROLLER listener without a handler", e.Key)
	}
	return nil
}

// Registry is every key one node serves. It is filled while the node is
// built, by each room's registration, and never changed afterwards, so it
// is read without locks.
type Registry struct {
	m map[int16]*Entry
}

// NewRegistry registers es; a second entry for a key, or one that breaks
// Entry's invariants, is a programming error, reported as such.
func NewRegistry(es ...Entry) (*Registry, error) {
	r := &Registry{m: make(map[int16]*Entry, len(es))}
	for i := range es {
		e := es[i]
		if _, dup := r.m[e.Key]; dup {
			return nil, fmt.Errorf("api key %d registered twice", e.Key)
		}
		if err := e.validate(); err != nil {
			return nil, err
		}
		r.m[e.Key] = &e
	}
	return r, nil
}

// Get is key's entry, nil when the node does not serve it.
func (r *Registry) Get(key int16) *Entry { return r.m[key] }

// Keys is every registered key, ascending.
func (r *Registry) Keys() []int16 {
	ks := make([]int16, 0, len(r.m))
	for k := range r.m {
		ks = append(ks, k)
	}
	sort.Slice(ks, func(i, j int) bool { return ks[i] < ks[j] })
	return ks
}

// ErrorResponse answers req with code through its key's entry; nil for a
// key that has none.
func (r *Registry) ErrorResponse(req kmsg.Request, code int16) kmsg.Response {
	if e := r.m[req.Key()]; e != nil && e.ErrorResponse != nil {
		return e.ErrorResponse(req, code)
	}
	return nil
}

// SASL's keys: the CONTROLLER listener serves them only when it
// authenticates with SASL.
const (
	SASLHandshakeKey    = 17
	SASLAuthenticateKey = 36
)

// Table is the version table of one kind of listener, for the front end
// (protocol.Versions) and ApiVersions.
type Table struct {
	r   *Registry
	ctl bool
	// sasl: the CONTROLLER listener advertises the SASL keys only when it
	// authenticates with SASL (a broker's raft and Kafka dialers pick their
	// flow from ApiVersions). Client listeners always serve them.
	sasl bool
}

// ClientTable is every client listener's table.
func (r *Registry) ClientTable() Table { return Table{r: r} }

// ControllerTable is the CONTROLLER listener's table; sasl says whether it
// authenticates with SASL.
func (r *Registry) ControllerTable(sasl bool) Table { return Table{r: r, ctl: true, sasl: sasl} }

// Range is what t's listener serves of e.
func (t Table) Range(e *Entry) Range {
	if !t.ctl {
		return e.Client
	}
	if (e.Key == SASLHandshakeKey || e.Key == SASLAuthenticateKey) && !t.sasl {
		return Range{}
	}
	return e.Controller
}

// Supported implements protocol.Versions.
func (t Table) Supported(key int16) (int16, int16, bool) {
	e := t.r.m[key]
	if e == nil {
		return 0, 0, false
	}
	v := t.Range(e)
	return v.Min, v.Max, v.Served
}

// All is ApiVersions' list for t's listener, by key.
func (t Table) All() []kmsg.ApiVersionsResponseApiKey {
	out := make([]kmsg.ApiVersionsResponseApiKey, 0, len(t.r.m))
	for _, k := range t.r.Keys() {
		if v := t.Range(t.r.m[k]); v.Served {
			out = append(out, kmsg.ApiVersionsResponseApiKey{ApiKey: k, MinVersion: v.Min, MaxVersion: v.Max})
		}
	}
	return out
}
