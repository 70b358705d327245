package config

import (
	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordlog/fjord/broker/acl"
	"github.com/fjordlog/fjord/broker/api"
	"github.com/fjordlog/fjord/broker/pwenc"
	"github.com/fjordlog/fjord/broker/tlsconf"
	"github.com/fjordlog/fjord/controller"
)

// APIHost is what the configuration APIs need of the node: forwarding to
// the active controller, the image and configuration they describe, the
// password encoder they seal with, its one logger's level and its TLS
// listeners (a change of its own ssl.* settings is checked here first).
type APIHost interface {
	api.Forwarder
	// Image is the image this node's replicas apply (nil before the
	// first).
	Image() *controller.Image
	// Static is the configuration the node started with (its node id,
	// the static layer of LayersOf); never changed.
	Static() *Config
	// Live is the running configuration (Live of Static and Image).
	Live() *Config
	// Passwords seals and opens password configs; nil without
	// password.encoder.secret.
	Passwords() *pwenc.Encoder
	// TopicConfigs is a topic's stored configs (its overrides), false when
	// this node does not know the topic (the replica manager's topic map).
	// The map is read-only.
	TopicConfigs(name string) (map[string]string, bool)
	// LogLevel and SetLogLevel are the node's log level, its one
	// BROKER_LOGGER ("root"; loggers.go).
	LogLevel() zerolog.Level
	SetLogLevel(zerolog.Level)
	// TLS is the live TLS configuration of the node's listeners; nil
	// without TLS listeners.
	TLS() *tlsconf.Listeners
}

// APIEntries are the configuration APIs' registrations (DescribeConfigs,
// AlterConfigs, IncrementalAlterConfigs, UpdateFeatures), bound to h.
// Building them never calls h.
func APIEntries(h APIHost) []api.Entry {
	return []api.Entry{
		describeConfigsEntry(h), alterConfigsEntry(h), incrementalAlterConfigsEntry(h), updateFeaturesEntry(),
	}
}

type handler func(h APIHost, cc *api.Conn, req kmsg.Request, respond func(kmsg.Response))

func bindTo(h APIHost, f handler) api.Handler {
	return func(cc *api.Conn, req kmsg.Request, respond func(kmsg.Response)) { f(h, cc, req, respond) }
}

// checkWith binds a rule's check that reads the node (the stored
// super.users).
func checkWith(h APIHost, c func(h APIHost, z *api.Authz, req kmsg.Request) (kmsg.Response, func(kmsg.Response))) api.Check {
	return func(z *api.Authz, req kmsg.Request) (kmsg.Response, func(kmsg.Response)) { return c(h, z, req) }
}

// configResourceAllowed: topic configs need op on the topic, group
// configs op on the group (as Kafka: not on the cluster), broker and
// broker-logger configs op on the cluster.
func configResourceAllowed(z *api.Authz, op acl.Operation, typ kmsg.ConfigResourceType, name string) (bool, int16) {
	switch typ {
	case kmsg.ConfigResourceTypeTopic:
		return z.Ok(op, acl.ResourceTopic, name), api.TopicDenied
	case kmsg.ConfigResourceTypeGroupConfig:
		return z.Ok(op, acl.ResourceGroup, name), api.GroupDenied
	}
	return z.Cluster(op), api.ClusterDenied
}

// superUsersKey is the config that names who may do everything.
const superUsersKey = "super.users"

// SuperUsersDenied is the message of a change to super.users refused to a
// principal that is not a super user.
const SuperUsersDenied = "only a super user may change " + superUsersKey

// superUsersChangeAllowed: a change to super.users on a broker resource
// (the cluster default, or a broker, which the config policy refuses
// later anyway) needs a super user. super.users decides who may do
// everything, so with ALTER_CONFIGS on the cluster sufficing a tuning
// permission would be every permission (Kafka has that hole; Fjord
// closes it). changes says whether the request changes the key for this
// resource; a refusal is audited as a denial of ALTER_CONFIGS on the
// cluster (the admin line that follows names super.users among the
// request's resources).
func superUsersChangeAllowed(z *api.Authz, typ kmsg.ConfigResourceType, changes bool) bool {
	if typ != kmsg.ConfigResourceTypeBroker || !changes || z.Az.IsSuperUser(z.Conn.Principal) {
		return true
	}
	z.Deny(acl.OpAlterConfigs, acl.ResourceCluster, acl.ClusterName)
	return false
}
