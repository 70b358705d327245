package broker

import (
	"reflect"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordlog/fjord/broker/acl"
	"github.com/fjordlog/fjord/broker/config"
	"github.com/fjordlog/fjord/controller"
)

// Authorization: which ACL each API needs, and its enforcement before the
// handler runs.
//
// Design: each API's registration (registry.go) holds its rule, the only
// place that says what the API requires; docs/security.md is written from
// the registry, and registration refuses a key without a rule. A rule runs on the
// reader goroutine before the handler (the authorizer is immutable and
// in memory, so this never waits) and either
//   - denies the whole request: it returns the complete response, with
//     Kafka's error code where Kafka puts it, and the handler never runs;
//   - or removes the denied topics, partitions or groups from the request
//     (the handler serves the rest) and returns a fix that adds them back
//     to the handler's response with the authorization error;
//   - or filters what the handler lists (Metadata of all topics,
//     ListGroups) in the fix.
// With no authorizer configured (authorizer.class.name unset) no rule
// runs at all.
//
// Principals: cc.principal, "User:ANONYMOUS" on a PLAINTEXT connection.
// Brokers fetch from each other through the same listeners, so with the
// authorizer on, the inter-broker principal needs CLUSTER_ACTION on the
// cluster (or to be a super user), as in Kafka.

// authzCache is the authorizer built from one image's ACLs and the running
// super.users (dynamic: the image's cluster default may change it).
// Rebuilt when the image's ACL set changes (controller.Image.SameACLs) or
// super.users does, not on every image.
type authzCache struct {
	img   *controller.Image
	super string
	az    *acl.Authorizer
}

// authorizer returns the authorizer for the current image, nil when
// authorizer.class.name is unset.
func (b *Broker) authorizer() *acl.Authorizer {
	if b.cfg.AuthorizerClass == "" {
		return nil
	}
	img, super := b.authzView()
	c := b.authzCache.Load()
	if c != nil && c.super == super && (c.img == img || c.img.SameACLs(img)) {
		return c.az
	}
	as := img.ACLs()
	bs := make([]acl.Binding, len(as))
	for i, a := range as {
		bs[i] = bindingOf(a)
	}
	az := acl.New(acl.Config{SuperUsers: acl.ParseSuperUsers(super), AllowIfNoACL: b.cfg.AllowEveryoneIfNoACL}, bs)
	if c != nil && c.super != super {
		b.log.Info().Str("super_users", super).Msg("super.users changed: the authorizer follows")
	}
	b.authzCache.Store(&authzCache{img: img, super: super, az: az})
	return az
}

// authzView is the image whose ACLs the authorizer enforces and the
// super.users it runs with: the broker's applied image and live config;
// on a controller-only node, which applies no images as a broker (no
// publish loop) but serves the CONTROLLER listener, the controller role's
// image and the dynamic config it holds. Before any image: none, and the
// static super.users.
func (b *Broker) authzView() (*controller.Image, string) {
	if img := b.image(); img != nil {
		return img, b.live().SuperUsers
	}
	if b.meta != nil && !b.cfg.HasRole("broker") {
		if img := b.meta.Image(); img != nil {
			if c := b.authzCache.Load(); c != nil && c.img == img {
				return img, c.super // config.Live builds maps: once per image
			}
			return img, config.Live(&b.cfg, img, b.log).SuperUsers
		}
	}
	return &controller.Image{}, b.cfg.SuperUsers
}

func bindingOf(a controller.ACL) acl.Binding {
	return acl.Binding{ResourceType: acl.ResourceType(a.ResourceType), Name: a.Name, Pattern: acl.PatternType(a.PatternType),
		Principal: a.Principal, Host: a.Host, Operation: acl.Operation(a.Operation), Permission: acl.Permission(a.Permission)}
}

// authz is one request's authorization context.
type authz struct {
	b   *Broker
	cc  *connCtx
	az  *acl.Authorizer
	api int16
}

// ok asks the authorizer and audits a denial.
func (z *authz) ok(op acl.Operation, rt acl.ResourceType, name string) bool {
	if z.az.Authorize(z.cc.principal, z.cc.clientHost, op, rt, name) {
		return true
	}
	z.b.audit.denied(z.cc, z.api, op, rt, name)
	return false
}

// quiet asks without auditing: for filtering what a listing shows.
func (z *authz) quiet(op acl.Operation, rt acl.ResourceType, name string) bool {
	return z.az.Authorize(z.cc.principal, z.cc.clientHost, op, rt, name)
}

func (z *authz) cluster(op acl.Operation) bool { return z.ok(op, acl.ResourceCluster, acl.ClusterName) }

// authzRule is one API's requirement: what docs/security.md says (need,
// and blast, the rank of what a holder of it can damage: 0 = read-only
// metadata, up to 5 = the cluster's shape) and the check.
type authzRule struct {
	need  string
	blast int
	check func(z *authz, req kmsg.Request) (deny kmsg.Response, fix func(kmsg.Response))
}

// authzClose is the denial of a request that gets no response (acks=0
// produce): the connection is closed instead.
type authzClose struct {
	kmsg.Response // nil: never encoded
	err           error
}

// authorize runs a's rule for req; a nil authorizer allows all. On the
// CONTROLLER listener, CLUSTER_ACTION on the cluster passes every rule but
// the key's own controller rule (api.rule's comment says why).
func (b *Broker) authorize(cc *connCtx, a *api, req kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
	az := b.authorizer()
	if az == nil || req == nil {
		return nil, nil
	}
	z := &authz{b: b, cc: cc, az: az, api: a.key}
	rule := a.rule
	if cc.listener == ctlListener {
		if a.ctlRule != nil {
			return a.ctlRule.check(z, req)
		}
		if z.quiet(acl.OpClusterAction, acl.ResourceCluster, acl.ClusterName) {
			return nil, nil
		}
	}
	return rule.check(z, req)
}

// noACL is the rule of an API that needs no ACL (as in Kafka): ApiVersions,
// the SASL exchange, DescribeCluster, telemetry.
func noACL(*authz, kmsg.Request) (kmsg.Response, func(kmsg.Response)) { return nil, nil }

// topErrorResponse is the error response of a request whose response has
// one, top-level, error code.
func topErrorResponse(req kmsg.Request, code int16) kmsg.Response {
	return setTopError(req.ResponseKind(), code)
}

// wholeDenied is a rule that needs op on the cluster for the whole request
// and, denied, answers with errResp's shape: the error on every resource
// the request names.
func wholeDenied(op acl.Operation, errResp func(kmsg.Request, int16) kmsg.Response) func(*authz, kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
	return func(z *authz, req kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
		if z.cluster(op) {
			return nil, nil
		}
		return errResp(req, clusterDenied), nil
	}
}

// setTopError sets resp's top-level ErrorCode field, which every response
// a whole-request denial answers has.
func setTopError(resp kmsg.Response, code int16) kmsg.Response {
	if f := reflect.ValueOf(resp).Elem().FieldByName("ErrorCode"); f.IsValid() && f.CanSet() {
		f.SetInt(int64(code))
	}
	return resp
}

// top is a rule that needs one operation on one resource for the whole
// request; code is the top-level error when it is denied.
func top(op acl.Operation, rt acl.ResourceType, name func(kmsg.Request) string, code int16) func(*authz, kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
	return func(z *authz, req kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
		n := acl.ClusterName
		if name != nil {
			n = name(req)
		}
		if z.ok(op, rt, n) {
			return nil, nil
		}
		return setTopError(req.ResponseKind(), code), nil
	}
}

func clusterTop(op acl.Operation) func(*authz, kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
	return top(op, acl.ResourceCluster, nil, kerr.ClusterAuthorizationFailed.Code)
}

func groupTop(op acl.Operation, name func(kmsg.Request) string) func(*authz, kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
	return top(op, acl.ResourceGroup, name, kerr.GroupAuthorizationFailed.Code)
}

func txnTop(name func(kmsg.Request) string) func(*authz, kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
	return top(acl.OpWrite, acl.ResourceTransactionalID, name, kerr.TransactionalIDAuthorizationFailed.Code)
}

// all chains checks: the first denial wins, fixes compose.
func all(checks ...func(*authz, kmsg.Request) (kmsg.Response, func(kmsg.Response))) func(*authz, kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
	return func(z *authz, req kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
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

var (
	topicDenied   = kerr.TopicAuthorizationFailed.Code
	groupDenied   = kerr.GroupAuthorizationFailed.Code
	clusterDenied = kerr.ClusterAuthorizationFailed.Code
	txnDenied     = kerr.TransactionalIDAuthorizationFailed.Code
)

// split divides ts by whether op on each one's topic is allowed; keep is
// never nil when ts is not (an empty list must stay a list, not "all").
func split[T any](z *authz, op acl.Operation, ts []T, name func(T) string) (keep, denied []T) {
	if ts == nil {
		return nil, nil
	}
	keep = make([]T, 0, len(ts))
	for _, t := range ts {
		if z.ok(op, acl.ResourceTopic, name(t)) {
			keep = append(keep, t)
		} else {
			denied = append(denied, t)
		}
	}
	return keep, denied
}

// sift splits ts into those allow lets through and, for the others, the
// denials allow builds; keep is never nil when ts is not (an empty list
// must stay a list, not "all").
func sift[T, D any](ts []T, allow func(T) (D, bool)) (keep []T, denied []D) {
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

// partial ends a rule that took denied parts out of a request (topics,
// groups, resources): nothing denied, nothing to do; nothing kept, the
// denials alone are the response and the handler never runs; else a fix
// adds them to the handler's response.
func partial[Resp kmsg.Response](req kmsg.Request, denied, kept int, add func(Resp)) (kmsg.Response, func(kmsg.Response)) {
	if denied > 0 && kept == 0 {
		resp := req.ResponseKind().(Resp)
		add(resp)
		return resp, nil
	}
	return nil, amend(denied, add)
}

// amend is the fix of a rule whose handler runs even when every part was
// denied (a DescribeGroups of no groups is still answered by the handler,
// which times it and charges its quota): nil when nothing was denied,
// else a fix that adds the denials to the handler's response.
func amend[Resp kmsg.Response](denied int, add func(Resp)) func(kmsg.Response) {
	if denied == 0 {
		return nil
	}
	return func(r kmsg.Response) {
		if resp, ok := r.(Resp); ok {
			add(resp)
		}
	}
}

// visible keeps the resources of type rt in ts that the principal may
// describe, in place (ts's backing array is reused): a listing's filter,
// so what it hides is not audited as a denial.
func visible[T any](z *authz, rt acl.ResourceType, ts []T, name func(T) string) []T {
	kept := ts[:0]
	for _, t := range ts {
		if z.quiet(acl.OpDescribe, rt, name(t)) {
			kept = append(kept, t)
		}
	}
	return kept
}

// siftGroups splits group ids by whether op on each is allowed; as sift,
// keep is never nil when gs is not.
func siftGroups(z *authz, op acl.Operation, gs []string) (keep, denied []string) {
	return sift(gs, func(g string) (string, bool) { return g, z.ok(op, acl.ResourceGroup, g) })
}

// configResourceAllowed: topic configs need op on the topic, broker and
// broker-logger configs op on the cluster.
func configResourceAllowed(z *authz, op acl.Operation, typ kmsg.ConfigResourceType, name string) (bool, int16) {
	if typ == kmsg.ConfigResourceTypeTopic {
		return z.ok(op, acl.ResourceTopic, name), topicDenied
	}
	return z.cluster(op), clusterDenied
}

// superUsersKey is the config that names who may do everything.
const superUsersKey = "super.users"

// superUsersDenied is the message of a change to super.users refused to a
// principal that is not a super user.
var superUsersDenied = "only a super user may change " + superUsersKey

// superUsersChangeAllowed: a change to super.users on a broker resource
// (the cluster default, or a broker, which the config policy refuses
// later anyway) needs a super user. super.users decides who may do
// everything, so with ALTER_CONFIGS on the cluster sufficing a tuning
// permission would be every permission (Kafka has that hole; Fjord
// closes it). changes says whether the request changes the key for this
// resource; a refusal is audited as a denial of ALTER_CONFIGS on the
// cluster (the admin line that follows names super.users among the
// request's resources).
func superUsersChangeAllowed(z *authz, typ kmsg.ConfigResourceType, changes bool) bool {
	if typ != kmsg.ConfigResourceTypeBroker || !changes || z.az.IsSuperUser(z.cc.principal) {
		return true
	}
	z.b.audit.denied(z.cc, z.api, acl.OpAlterConfigs, acl.ResourceCluster, acl.ClusterName)
	return false
}

// isFollower reports whether a Fetch or OffsetForLeaderEpoch comes from a
// replica (a broker), not a consumer.
func isFollowerFetch(r *kmsg.FetchRequest) bool {
	return r.ReplicaID >= 0 || (r.Version >= 15 && r.ReplicaState.ID >= 0)
}

// topicName resolves a request's topic: its name, or (topic-id versions)
// the name of the id in the current image, "" when unknown.
func (b *Broker) topicName(name string, id [16]byte) string {
	if name != "" || id == ([16]byte{}) {
		return name
	}
	if t := b.replicas.TopicByID(id); t != nil {
		return t.Name
	}
	return ""
}

// authorizedOps is KIP-430's answer for cc's principal on one resource:
// the bit set of the operations the authorizer allows it, every operation
// of the resource type when no authorizer is configured (as Kafka). Not
// audited: asking is not being denied.
func (b *Broker) authorizedOps(cc *connCtx, rt acl.ResourceType, name string) int32 {
	return b.authorizer().AuthorizedOperations(cc.principal, cc.clientHost, rt, name)
}

// clusterOps is KIP-430's answer for the cluster. As Kafka, a principal
// that may not DESCRIBE the cluster is told 0, not what else it may do.
func (b *Broker) clusterOps(cc *connCtx) int32 {
	ops := b.authorizedOps(cc, acl.ResourceCluster, acl.ClusterName)
	if ops&(1<<acl.OpDescribe) == 0 {
		return 0
	}
	return ops
}

// principalHost is the host part of cc for audit lines and ACL hosts.
func principalHost(cc *connCtx) string { return strings.TrimPrefix(cc.clientHost, "/") }
