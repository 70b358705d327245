package admin

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordlog/fjord/broker/api"
	"github.com/fjordlog/fjord/broker/config"
	"github.com/fjordlog/fjord/broker/replicamgr"
	"github.com/fjordlog/fjord/controller"
)

// Host is what the administration APIs need of the node: forwarding to
// the active controller, the images they read, and the replica manager's
// checks and waits around topic changes.
type Host interface {
	api.Forwarder
	// Image is the image this node's replicas apply (nil before the
	// first).
	Image() *controller.Image
	// LatestImage is the metadata log's latest image on this node, which
	// may run ahead of Image.
	LatestImage() *controller.Image
	// Authorizing reports whether an authorizer is configured
	// (authorizer.class.name): without one the ACL APIs answer
	// SECURITY_DISABLED.
	Authorizing() bool
	Replicas() *replicamgr.Manager
	// Live is the node's running configuration (topic defaults).
	Live() *config.Config
	// TopicName is a request's topic: its name, or (topic-id versions) the
	// name of the id in the current image, "" when unknown.
	TopicName(name string, id [16]byte) string
}

// Entries are the administration APIs' registrations, bound to h.
// Building them never calls h.
func Entries(h Host) []api.Entry {
	return []api.Entry{
		createTopicsEntry(h), deleteTopicsEntry(h), describeAclsEntry(h), createAclsEntry(h), deleteAclsEntry(h),
		createPartitionsEntry(h), electLeadersEntry(h), alterPartitionReassignmentsEntry(h),
		listPartitionReassignmentsEntry(h), describeClientQuotasEntry(h), alterClientQuotasEntry(h),
		describeUserScramCredentialsEntry(h), alterUserScramCredentialsEntry(h),
	}
}

type handler func(h Host, cc *api.Conn, req kmsg.Request, respond func(kmsg.Response))

func bindTo(h Host, f handler) api.Handler {
	return func(cc *api.Conn, req kmsg.Request, respond func(kmsg.Response)) { f(h, cc, req, respond) }
}

// checkWith binds a rule's check that reads the node (a topic id's name).
func checkWith(h Host, c func(h Host, z *api.Authz, req kmsg.Request) (kmsg.Response, func(kmsg.Response))) api.Check {
	return func(z *api.Authz, req kmsg.Request) (kmsg.Response, func(kmsg.Response)) { return c(h, z, req) }
}
