package txncoord

import (
	"context"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordlog/fjord/broker/acl"
	"github.com/fjordlog/fjord/broker/api"
	"github.com/fjordlog/fjord/broker/coordinator"
	"github.com/fjordlog/fjord/broker/replica"
	"github.com/fjordlog/fjord/storage"
)

// WriteTxnMarkers: v0-2
//
// Behaviour:
//   - Sent by transaction coordinators to partition leaders (and by this
//     node's coordinator to itself without the network): each marker ends
//     a producer's transaction on the named partitions with a control
//     batch (commit or abort), appended as the leader and committed like an
//     acks=all produce before the partition's code is 0. A marker ends the
//     producer's open transaction there, moves the last stable offset, and
//     an abort enters the aborted transaction index (storage).
//   - Per partition: NOT_LEADER_OR_FOLLOWER / UNKNOWN_TOPIC_OR_PARTITION as
//     for a produce; a producer epoch older than the partition's is
//     INVALID_PRODUCER_EPOCH, a coordinator epoch older than the last
//     marker's TRANSACTION_COORDINATOR_FENCED; NOT_ENOUGH_REPLICAS...
//     and REQUEST_TIMED_OUT when the in-sync replicas do not confirm.
//   - On __consumer_offsets the marker also settles the transaction's
//     pending offset commits in the group coordinator.
//
// Version notes: v1: flexible; v2: transaction version (KIP-890 part 2).
func writeTxnMarkersEntry(h APIHost) api.Entry {
	return api.Entry{
		Key: 27, Client: api.Versions(0, 2), Handle: bind(h, handleWriteTxnMarkers),
		Rule: api.Needs("CLUSTER_ACTION on CLUSTER", 3, checkWriteTxnMarkers),
	}
}

func handleWriteTxnMarkers(h APIHost, cc *api.Conn, kreq kmsg.Request, respond func(kmsg.Response)) {
	req := kreq.(*kmsg.WriteTxnMarkersRequest)
	h.Go(func() {
		ctx, cancel := context.WithTimeout(cc.Ctx, requestTimeout)
		defer cancel()
		resp := WriteMarkers(ctx, h, req)
		resp.Version = req.Version
		respond(resp)
	})
}

// markerParallelism bounds the partitions one WriteTxnMarkers writes at
// once (each waits for its replicas).
const markerParallelism = 16

// markerCommitTimeout bounds the wait for a marker's in-sync replicas.
const markerCommitTimeout = 15 * time.Second

// WriteMarkers appends every marker of req on its local leaders and waits
// until each is committed; partitions are written concurrently. It is
// WriteTxnMarkers served here, and what Host.WriteMarkers does when the
// node is this one (no network between a coordinator and itself).
func WriteMarkers(ctx context.Context, h APIHost, req *kmsg.WriteTxnMarkersRequest) *kmsg.WriteTxnMarkersResponse {
	resp := kmsg.NewPtrWriteTxnMarkersResponse()
	var wg sync.WaitGroup
	// At most markerParallelism partitions of one request at a time.
	sem := make(chan struct{}, markerParallelism)
	for _, m := range req.Markers {
		rm := kmsg.NewWriteTxnMarkersResponseMarker()
		rm.ProducerID = m.ProducerID
		for _, t := range m.Topics {
			rt := kmsg.NewWriteTxnMarkersResponseMarkerTopic()
			rt.Topic = t.Topic
			rt.Partitions = make([]kmsg.WriteTxnMarkersResponseMarkerTopicPartition, len(t.Partitions))
			for i, idx := range t.Partitions {
				rp := &rt.Partitions[i]
				*rp = kmsg.NewWriteTxnMarkersResponseMarkerTopicPartition()
				rp.Partition = idx
				mk := storage.TxnMarker{ProducerID: m.ProducerID, ProducerEpoch: m.ProducerEpoch, Commit: m.Committed,
					CoordinatorEpoch: m.CoordinatorEpoch, TransactionVersion: m.TransactionVersion}
				wg.Add(1)
				sem <- struct{}{}
				go func() {
					defer func() { <-sem; wg.Done() }()
					rp.ErrorCode = writeMarker(ctx, h, t.Topic, idx, mk)
				}()
			}
			rm.Topics = append(rm.Topics, rt)
		}
		resp.Markers = append(resp.Markers, rm)
	}
	wg.Wait()
	return resp
}

// writeMarker appends one marker to a partition this node leads and waits
// until it is committed; it returns the partition's code.
func writeMarker(ctx context.Context, h APIHost, topic string, idx int32, mk storage.TxnMarker) int16 {
	p, _, _, code := h.Topic(topic).Serving(idx, replica.Produce)
	if code != 0 {
		return code
	}
	off, v, err := p.AppendMarkerAsLeader(mk, time.Now().UnixMilli())
	if err == nil {
		err = p.Flush()
	}
	if err == nil {
		expire := time.NewTimer(markerCommitTimeout)
		err = p.WaitCommitted(ctx, off+1, v.LeaderEpoch, expire.C)
		expire.Stop()
	}
	if err != nil {
		return h.Code(err)
	}
	if topic == coordinator.OffsetsTopic {
		h.Offsets().TxnCompleted(idx, mk.ProducerID, off, mk.Commit)
	}
	return 0
}

func checkWriteTxnMarkers(z *api.Authz, kreq kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
	req := kreq.(*kmsg.WriteTxnMarkersRequest)
	if z.Cluster(acl.OpClusterAction) {
		return nil, nil
	}
	resp := req.ResponseKind().(*kmsg.WriteTxnMarkersResponse)
	for _, m := range req.Markers {
		rm := kmsg.NewWriteTxnMarkersResponseMarker()
		rm.ProducerID = m.ProducerID
		for _, t := range m.Topics {
			rt := kmsg.NewWriteTxnMarkersResponseMarkerTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewWriteTxnMarkersResponseMarkerTopicPartition()
				rp.Partition, rp.ErrorCode = p, api.ClusterDenied
				rt.Partitions = append(rt.Partitions, rp)
			}
			rm.Topics = append(rm.Topics, rt)
		}
		resp.Markers = append(resp.Markers, rm)
	}
	return resp, nil
}
