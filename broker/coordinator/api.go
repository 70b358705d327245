package coordinator

import (
	"context"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordlog/fjord/broker/acl"
	"github.com/fjordlog/fjord/broker/api"
	"github.com/fjordlog/fjord/group/consumer"
)

// The group APIs: this package is their room. Each key is one file
// (NN_name.go, headed by its versions and behaviour) holding its entry,
// handler and rule; Entries gives the node's registry all of them, bound
// to the node through APIHost. The next group protocols (KIP-848's
// ConsumerGroupHeartbeat, KIP-932's share groups) register here too.

// APIHost is what the group APIs need of the node beyond the coordinator.
type APIHost interface {
	// Coordinator is the node's coordinator, built before the node
	// serves a request.
	Coordinator() *Coordinator
	// HasPartition reports whether the node's image has partition p of
	// topic: offsets are committed for partitions that exist.
	HasPartition(topic string, p int32) bool
	// TopicName is the name of topic id in the node's metadata image
	// (KIP-516: OffsetCommit v10, OffsetFetch v10 name topics by id),
	// "" when the image has no such topic or id is zero.
	TopicName(id [16]byte) string
	// TopicID is the id of the named topic in that image, zero when it
	// has none.
	TopicID(name string) [16]byte
	// Code maps an error to its Kafka code (the node's one mapping).
	Code(err error) int16
	// AuthorizedOps is KIP-430's answer for cc's principal on one
	// resource.
	AuthorizedOps(cc *api.Conn, rt acl.ResourceType, name string) int32
	// MayDescribeTopics is cc's principal's DESCRIBE on topics, asked
	// without auditing (a filter, as Kafka's filterByAuthorized);
	// consumer.AllTopics without an authorizer.
	MayDescribeTopics(cc *api.Conn) consumer.Visibility
	// Go runs fn on a goroutine the node tracks; false once it is closing.
	Go(fn func()) bool
	Log() *zerolog.Logger
	// ShareStates is the share coordinator, as the share-group offsets
	// APIs reach it (shareoffsets.go).
	ShareStates() ShareStates
	// UnloadShareGroup drops the share-partitions of group that this
	// node leads (their delivery state in memory), so that the next fetch
	// reads the state an offsets change left.
	UnloadShareGroup(group string)
	// LatestOffsets is the end offset of each of partitions of topic, in
	// order, as its leader answers ListOffsets (latest,
	// read_uncommitted): from this node's replica, or asked of the
	// leader. Every call returns, at most when ctx ends.
	LatestOffsets(ctx context.Context, topic string, partitions []int32) []PartitionEnd
}

// Entries are the group APIs' registrations, bound to h. Building them
// never calls h.
func Entries(h APIHost) []api.Entry {
	return []api.Entry{
		offsetCommitEntry(h), offsetFetchEntry(h), joinGroupEntry(h), heartbeatEntry(h),
		leaveGroupEntry(h), syncGroupEntry(h), describeGroupsEntry(h), listGroupsEntry(h),
		deleteGroupsEntry(h), offsetDeleteEntry(h), consumerGroupHeartbeatEntry(h), consumerGroupDescribeEntry(h),
		shareGroupHeartbeatEntry(h), shareGroupDescribeEntry(h),
		describeShareGroupOffsetsEntry(h), alterShareGroupOffsetsEntry(h), deleteShareGroupOffsetsEntry(h),
	}
}

// handler is a group API's handler before it is bound to its host.
type handler func(h APIHost, cc *api.Conn, req kmsg.Request, respond func(kmsg.Response))

func bindTo(h APIHost, f handler) api.Handler {
	return func(cc *api.Conn, req kmsg.Request, respond func(kmsg.Response)) { f(h, cc, req, respond) }
}

// check is a rule that needs the node (to resolve topic ids), before it
// is bound to its host.
type check func(h APIHost, z *api.Authz, req kmsg.Request) (kmsg.Response, func(kmsg.Response))

func bindCheck(h APIHost, c check) api.Check {
	return func(z *api.Authz, req kmsg.Request) (kmsg.Response, func(kmsg.Response)) { return c(h, z, req) }
}

// topicName is the name a request's topic is served under: its name before
// the versions that name topics by id (byID false); from them, the name the
// authorization rule resolved when it ran (so the topic authorized is the
// topic served, even if the image changes in between), else the name of id
// in the node's image now. "" when id is unknown.
func topicName(h APIHost, byID bool, name string, id [16]byte) string {
	if !byID || name != "" {
		return name
	}
	return h.TopicName(id)
}

// errorMessage is a v6+ DescribeGroups' or v3+ DeleteGroups' message for
// code (KIP-1043): Kafka's text for the error, nil without one.
func errorMessage(code int16) *string {
	if code == 0 {
		return nil
	}
	m := kerr.TypedErrorForCode(code).Description
	return &m
}

// requestCode is the error for a group request this node cannot take now:
// an empty group id, NOT_COORDINATOR when another node coordinates the
// group, COORDINATOR_LOAD_IN_PROGRESS while its offsets partition loads
// here; else 0.
func requestCode(h APIHost, id string) int16 { return h.Coordinator().RequestCode(id, h.Code) }

// RequestCode is requestCode for any room whose requests name a group
// (TxnOffsetCommit); code is the node's mapping of errors to codes.
func (c *Coordinator) RequestCode(id string, code func(error) int16) int16 {
	if id == "" {
		return kerr.InvalidGroupID.Code
	}
	return code(c.Status(id))
}
