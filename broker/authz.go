package broker

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordlog/fjord/broker/acl"
	"github.com/fjordlog/fjord/broker/api"
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
// Principals: cc.Principal, "User:ANONYMOUS" on a PLAINTEXT connection.
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
		bs[i] = acl.FromRecord(a)
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

// authorize runs a's rule for req with the current authorizer (none:
// everything is allowed), auditing denials.
func (b *Broker) authorize(cc *api.Conn, a *api.Entry, req kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
	az := b.authorizer()
	if az == nil {
		return nil, nil
	}
	return api.Authorize(&api.Authz{Conn: cc, Az: az, Key: a.Key, Denied: b.audit.Denied}, a, req)
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
func (b *Broker) authorizedOps(cc *api.Conn, rt acl.ResourceType, name string) int32 {
	return b.authorizer().AuthorizedOperations(cc.Principal, cc.ClientHost, rt, name)
}

// clusterOps is KIP-430's answer for the cluster. As Kafka, a principal
// that may not DESCRIBE the cluster is told 0, not what else it may do.
func (b *Broker) clusterOps(cc *api.Conn) int32 {
	ops := b.authorizedOps(cc, acl.ResourceCluster, acl.ClusterName)
	if ops&(1<<acl.OpDescribe) == 0 {
		return 0
	}
	return ops
}
