package sharefetch

import (
	"context"
	"strings"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordlog/fjord/broker/acl"
	"github.com/fjordlog/fjord/broker/api"
)

// The share APIs a partition leader serves (KIP-932): this package is
// their room. Each key is one file (NN_name.go, headed by its versions and
// behaviour) holding its entry, handler and rule; Entries gives the node's
// registry both, bound to the node through APIHost.

// APIHost is what the share APIs need of the node beyond the Manager.
type APIHost interface {
	// Manager is the node's share-partition manager, built before the
	// node serves a request.
	Manager() *Manager
	// TopicReadable reports whether cc's principal may READ topic,
	// auditing a denial; true when no authorizer is configured. The
	// handlers ask it per topic, not the rule: an incremental ShareFetch
	// fetches its session's partitions, which the request does not name.
	TopicReadable(cc *api.Conn, topic string) bool
	// CurrentLeader is the partition's leader now, for answers that say
	// NOT_LEADER_OR_FOLLOWER (KIP-951): its id and epoch, and its
	// endpoint on cc's listener; false when the image has no leader for
	// it.
	CurrentLeader(cc *api.Conn, topicID [16]byte, partition int32) (Leader, bool)
	// Go runs fn on a goroutine the node tracks; false once it is closing.
	Go(fn func()) bool
}

// Leader is a partition's current leader, as a NOT_LEADER_OR_FOLLOWER
// answer names it.
type Leader struct {
	ID, Epoch int32
	Host      string
	Port      int32
	Rack      *string
}

// Entries are the share APIs' registrations, bound to h. Building them
// never calls h.
func Entries(h APIHost) []api.Entry {
	return []api.Entry{shareFetchEntry(h), shareAcknowledgeEntry(h)}
}

// handler is a share API's handler before it is bound to its host.
type handler func(h APIHost, cc *api.Conn, req kmsg.Request, respond func(kmsg.Response))

func bindTo(h APIHost, f handler) api.Handler {
	return func(cc *api.Conn, req kmsg.Request, respond func(kmsg.Response)) { f(h, cc, req, respond) }
}

// needRead is both keys' rule: READ on the group for the whole request
// (GROUP_AUTHORIZATION_FAILED at the top, as Kafka), READ on each topic
// per partition, which the handlers check.
func needRead(groupOf func(kmsg.Request) *string) api.Rule {
	return api.Needs("READ on GROUP; READ on each TOPIC fetched or acknowledged (per partition: TOPIC_AUTHORIZATION_FAILED)", 1,
		api.GroupTop(acl.OpRead, func(r kmsg.Request) string { return deref(groupOf(r)) }))
}

// readable remembers one request's topic authorizations, so a topic is
// asked (and a denial audited) once per request.
type readable struct {
	h    APIHost
	cc   *api.Conn
	seen map[string]bool
}

func (r *readable) ok(topic string) bool {
	if v, ok := r.seen[topic]; ok {
		return v
	}
	if r.seen == nil {
		r.seen = make(map[string]bool)
	}
	v := r.h.TopicReadable(r.cc, topic)
	r.seen[topic] = v
	return v
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// identity is a request's group and member ids, copied out of the request
// (kmsg's UnsafeReadFrom aliases the request's buffer, and both are kept:
// in the session, and in the records a member acquires). Kafka's member
// ids are UUIDs; like Kafka, an empty one (or one longer than a UUID's 36
// characters) is INVALID_REQUEST, as is an empty group id.
func identity(group, member *string) (sessionKey, bool) {
	g, m := deref(group), deref(member)
	if g == "" || m == "" || len(m) > 36 {
		return sessionKey{}, false
	}
	return sessionKey{strings.Clone(g), strings.Clone(m)}, true
}

// connContext is the connection's context (never nil).
func connContext(cc *api.Conn) context.Context {
	if cc.Ctx == nil {
		return context.Background()
	}
	return cc.Ctx
}

// errorMessage is the optional message of a partition's error.
func errorMessage(err error) *string {
	if err == nil {
		return nil
	}
	s := err.Error()
	return &s
}
