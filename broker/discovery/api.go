package discovery

import (
	"context"
	"time"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordlog/fjord/broker/acl"
	"github.com/fjordlog/fjord/broker/api"
	"github.com/fjordlog/fjord/broker/coordinator"
	"github.com/fjordlog/fjord/broker/sharecoord"
	"github.com/fjordlog/fjord/broker/txncoord"
	"github.com/fjordlog/fjord/controller"
)

// Host is what the discovery APIs need of the node.
type Host interface {
	// Go runs fn on a goroutine the node tracks; false once it is closing.
	Go(fn func()) bool
	// Image is the image this node's replicas apply.
	Image() *controller.Image
	ClusterID() string
	NodeID() int32
	// ListenerName is the name of the client listener cc came in on: the
	// endpoints a client is told are those of its own listener.
	ListenerName(cc *api.Conn) string
	// ControllerID is the controller id clients are told (KIP-590: a live
	// broker, as clients send admin requests there).
	ControllerID(img *controller.Image) int32
	// AuthorizedOps and ClusterOps are KIP-430's answers for cc's
	// principal.
	AuthorizedOps(cc *api.Conn, rt acl.ResourceType, name string) int32
	ClusterOps(cc *api.Conn) int32
	// TopicName resolves a request's topic by name or id; "" when unknown.
	TopicName(name string, id [16]byte) string
	// AutoCreateTopics is auto.create.topics.enable; AutoCreate creates one
	// topic with the defaults and answers its code.
	AutoCreateTopics() bool
	AutoCreate(ctx context.Context, name string) int16
	// Groups and Txns are the coordinators FindCoordinator places keys
	// with; EnsureOffsetsTopic and EnsureTxnTopic ask for their topics.
	Groups() *coordinator.Coordinator
	Txns() *txncoord.Coordinator
	EnsureOffsetsTopic()
	EnsureTxnTopic()
	// FromPeer reports whether cc is another broker of the cluster asking
	// through its peer client (its client id, on the inter-broker
	// listener): FindCoordinator answers it for this node only.
	FromPeer(cc *api.Conn) bool
	// AskPeer sends req to broker peer's inter-broker listener and waits
	// at most timeout (and while ctx lives) for its response.
	AskPeer(ctx context.Context, peer int32, req kmsg.Request, timeout time.Duration) (kmsg.Response, error)
	// Code maps an error to its Kafka code (the node's one mapping).
	Code(err error) int16
	Log() *zerolog.Logger
	ShareHost
}

// ShareHost is what FindCoordinator needs of a node for share keys (key
// type 2, KIP-932). A node whose Shares is nil runs no share coordinator:
// share keys are INVALID_REQUEST, as on a Kafka broker without one.
type ShareHost interface {
	// Shares is the share coordinator FindCoordinator places share keys
	// with, nil when the node runs none.
	Shares() *sharecoord.Coordinator
	// EnsureShareStateTopic asks the controller for the share-group state
	// topic (sharecoord.Topic, with sharecoord.TopicConfigs) if the image
	// lacks it; failure is left to the next FindCoordinator.
	EnsureShareStateTopic()
}

// Entries are the discovery APIs' registrations, bound to h. Building
// them never calls h.
func Entries(h Host) []api.Entry {
	return []api.Entry{metadataEntry(h), findCoordinatorEntry(h), describeClusterEntry(h), describeTopicPartitionsEntry(h)}
}

type handler func(h Host, cc *api.Conn, req kmsg.Request, respond func(kmsg.Response))

func bindTo(h Host, f handler) api.Handler {
	return func(cc *api.Conn, req kmsg.Request, respond func(kmsg.Response)) { f(h, cc, req, respond) }
}

// checkWith binds a rule's check that reads the node (a topic id's name,
// the image).
func checkWith(h Host, c func(h Host, z *api.Authz, req kmsg.Request) (kmsg.Response, func(kmsg.Response))) api.Check {
	return func(z *api.Authz, req kmsg.Request) (kmsg.Response, func(kmsg.Response)) { return c(h, z, req) }
}
