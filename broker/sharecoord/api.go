package sharecoord

import (
	"context"
	"sync"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordlog/fjord/broker/acl"
	"github.com/fjordlog/fjord/broker/api"
)

// The share-group state APIs (KIP-932): this package is their room. They
// are Kafka's inter-broker RPCs between share-partition leaders (their
// persisters) and share coordinators, served, as in Kafka, on the broker
// listeners and only to principals with CLUSTER_ACTION on the cluster.
// Each key is one file (NN_name.go, headed by its versions and
// behaviour); Entries gives the node's registry all of them, bound to the
// node through APIHost.
//
// Common behaviour, Kafka's ShareCoordinatorService's:
//   - each share-partition named is one operation on this node's
//     coordinator, all of a request's at once (at most apiParallelism),
//     each answered once its records are committed; the response lists
//     the topics and partitions in the request's order;
//   - an empty group id, no topics, or a topic without partitions: an
//     empty response;
//   - a node without a share coordinator: COORDINATOR_NOT_AVAILABLE on
//     every partition;
//   - a partition's error carries a message (the error's text).

// APIHost is what the share-group state APIs need of the node.
type APIHost interface {
	// Shares is the node's share coordinator; nil when the node runs
	// none.
	Shares() *Coordinator
	// Code maps an error to its Kafka code (the node's one mapping; see
	// the package documentation for this package's errors).
	Code(err error) int16
	// Go runs fn on a goroutine the node tracks; false once it is closing.
	Go(fn func()) bool
}

// Entries are the share-group state APIs' registrations, bound to h.
// Building them never calls h.
func Entries(h APIHost) []api.Entry {
	return []api.Entry{
		initializeShareGroupStateEntry(h), readShareGroupStateEntry(h), writeShareGroupStateEntry(h),
		deleteShareGroupStateEntry(h), readShareGroupStateSummaryEntry(h),
	}
}

type handler func(h APIHost, cc *api.Conn, req kmsg.Request, respond func(kmsg.Response))

func bindTo(h APIHost, f handler) api.Handler {
	return func(cc *api.Conn, req kmsg.Request, respond func(kmsg.Response)) { f(h, cc, req, respond) }
}

// clusterAction is the rule of every key here: CLUSTER_ACTION on the
// cluster, else CLUSTER_AUTHORIZATION_FAILED on every partition (Kafka's
// getErrorResponse).
func clusterAction(errResp func(kmsg.Request, int16) kmsg.Response) api.Rule {
	return api.Needs("CLUSTER_ACTION on CLUSTER", 3, api.WholeDenied(acl.OpClusterAction, errResp))
}

// apiParallelism bounds the operations one request runs at once (each
// waits for its state partition's replicas).
const apiParallelism = 16

// job is one share-partition of a request: run does it and sets its
// answer; fail answers code instead when it cannot run.
type job struct {
	run  func(ctx context.Context, c *Coordinator)
	fail func(code int16, msg string)
}

// runJobs runs jobs on the host's goroutines and then calls done, from
// one of them (or at once when there are none).
func runJobs(h APIHost, cc *api.Conn, jobs []job, done func()) {
	c := h.Shares()
	if c == nil {
		for _, j := range jobs {
			j.fail(kerr.CoordinatorNotAvailable.Code, "this node runs no share coordinator")
		}
		done()
		return
	}
	if len(jobs) == 0 {
		done()
		return
	}
	ctx := cc.Ctx
	if ctx == nil {
		ctx = context.Background()
	}
	if !h.Go(func() {
		var wg sync.WaitGroup
		sem := make(chan struct{}, apiParallelism)
		for _, j := range jobs {
			sem <- struct{}{}
			wg.Add(1)
			if !h.Go(func() {
				defer func() { <-sem; wg.Done() }()
				j.run(ctx, c)
			}) {
				<-sem
				wg.Done()
				j.fail(kerr.CoordinatorNotAvailable.Code, "the node is shutting down")
			}
		}
		wg.Wait()
		done()
	}) {
		for _, j := range jobs {
			j.fail(kerr.CoordinatorNotAvailable.Code, "the node is shutting down")
		}
		done()
	}
}

// answer is an operation's outcome as a partition's code and message.
func answer(h APIHost, err error) (int16, *string) {
	if err == nil {
		return 0, nil
	}
	msg := err.Error()
	return h.Code(err), &msg
}

func strPtr(s string) *string { return &s }
