package txncoord

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordlog/fjord/broker/api"
	"github.com/fjordlog/fjord/broker/coordinator"
	"github.com/fjordlog/fjord/broker/replicamgr"
	"github.com/fjordlog/fjord/controller"
)

// The transaction room's API keys: one file per key (NN_name.go, headed
// by its versions and behaviour, with its handler and its rule), each
// registering one api.Entry through Entries, bound to an APIHost.

// APIHost is what the transaction APIs need of the broker that serves
// them. Entries binds to it and calls nothing, so a registry can be built
// before the broker is (or, in tests, with no broker at all); its methods
// are called only while a request is served.
type APIHost interface {
	// Txns is this node's transaction coordinator.
	Txns() *Coordinator
	// Go runs fn on a tracked goroutine; false once the broker closes.
	Go(fn func()) bool
	// Code maps an error of a replica, storage or a coordinator to a
	// Kafka error code.
	Code(err error) int16
	// NodeID is this node's id.
	NodeID() int32
	// Image is the metadata image this node has applied.
	Image() *controller.Image
	// Topic is that image's topic with this node's replicas of it; nil
	// when the image has no such topic.
	Topic(name string) *replicamgr.Topic
	// TopicByID is that image's topic with id (KIP-516), nil when it has
	// none.
	TopicByID(id [16]byte) *replicamgr.Topic
	// Ask sends req to broker node's inter-broker listener and returns
	// its answer.
	Ask(ctx context.Context, node int32, req kmsg.Request) (kmsg.Response, error)
	// Offsets is the group coordinator's side of transactional offsets.
	Offsets() Offsets
	// GroupCode is the error for a request about group that this node
	// cannot take now (an empty id, NOT_COORDINATOR,
	// COORDINATOR_LOAD_IN_PROGRESS); else 0.
	GroupCode(group string) int16
	// CommitCode maps why an offset commit was not persisted to the code
	// the client gets.
	CommitCode(err error) int16
	// EnsureOffsetsTopic asks the controller for __consumer_offsets if the
	// image lacks it.
	EnsureOffsetsTopic()
}

// Offsets is what the transaction APIs need of the group coordinator
// (*coordinator.Coordinator): the offsets partition a group's transactional
// commits go to, the commits themselves, and the settling of them when a
// transaction's marker lands on that partition.
type Offsets interface {
	PartitionFor(group string) int32
	ValidateCommit(group, member string, instance *string, generation int32) error
	TxnCommit(group string, pid int64, epoch int16, offs map[coordinator.TopicPartition]*coordinator.Committed, done func(error))
	TxnCompleted(partition int32, pid int64, markerOffset int64, commit bool)
}

// handler is a transaction API's handler, given the host it runs on.
type handler func(h APIHost, cc *api.Conn, req kmsg.Request, respond func(kmsg.Response))

// bind makes f an api.Handler on h; h is not called until a request
// comes.
func bind(h APIHost, f handler) api.Handler {
	return func(cc *api.Conn, req kmsg.Request, respond func(kmsg.Response)) { f(h, cc, req, respond) }
}

// check is a rule that needs the node (to resolve topic ids), before it
// is bound to its host.
type check func(h APIHost, z *api.Authz, req kmsg.Request) (kmsg.Response, func(kmsg.Response))

func bindCheck(h APIHost, c check) api.Check {
	return func(z *api.Authz, req kmsg.Request) (kmsg.Response, func(kmsg.Response)) { return c(h, z, req) }
}

// Entries are the transaction APIs' registrations, bound to h: 22
// InitProducerID, 24 AddPartitionsToTxn, 25 AddOffsetsToTxn, 26 EndTxn,
// 27 WriteTxnMarkers, 28 TxnOffsetCommit, 61 DescribeProducers, 65
// DescribeTransactions and 66 ListTransactions.
func Entries(h APIHost) []api.Entry {
	return []api.Entry{
		initProducerIDEntry(h),
		addPartitionsToTxnEntry(h),
		addOffsetsToTxnEntry(h),
		endTxnEntry(h),
		writeTxnMarkersEntry(h),
		txnOffsetCommitEntry(h),
		describeProducersEntry(h),
		describeTransactionsEntry(h),
		listTransactionsEntry(h),
	}
}

// requestCode is the error for a request about transactional id id that
// this node cannot take now: INVALID_REQUEST for an empty id,
// NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS; else 0.
func requestCode(h APIHost, id string) int16 {
	if id == "" {
		return kerr.InvalidRequest.Code
	}
	return h.Code(h.Txns().Status(id))
}

// requestTimeout bounds the work a handler does on its own goroutine (a
// producer-id block from the controller, markers waiting for their
// replicas): the broker's bound on admin requests whose client gave none.
const requestTimeout = 30 * time.Second
