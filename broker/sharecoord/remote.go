package sharecoord

import (
	"context"
	"fmt"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordlog/fjord/broker/sharestate"
	"github.com/fjordlog/fjord/group/sharepart"
)

// remoteBackend is another node's coordinator, reached with Kafka's RPCs,
// one share-partition per request.
type remoteBackend struct {
	p    *Persister
	node int32
}

// ask sends req to the coordinator, at most the Persister's ask timeout; a
// failed exchange is sharestate.ErrNotAvailable.
func (r remoteBackend) ask(ctx context.Context, req kmsg.Request) (kmsg.Response, error) {
	actx, cancel := context.WithTimeout(ctx, r.p.askTimeout)
	defer cancel()
	resp, err := r.p.host.Ask(actx, r.node, req)
	if err != nil {
		return nil, fmt.Errorf("%w: asking coordinator %d: %v", sharestate.ErrNotAvailable, r.node, err)
	}
	return resp, nil
}

// codeError is a share-state RPC's per-partition error code as this
// package's errors: the ones the Persister retries or reports as
// sharestate's, and a plain error for the rest.
func codeError(node int32, code int16, msg *string) error {
	if code == 0 {
		return nil
	}
	text := kerr.ErrorForCode(code).Error()
	if msg != nil && *msg != "" {
		text += ": " + *msg
	}
	var class error
	switch code {
	case kerr.NotCoordinator.Code:
		class = ErrNotCoordinator
	case kerr.CoordinatorLoadInProgress.Code:
		class = ErrLoading
	case kerr.CoordinatorNotAvailable.Code, kerr.RequestTimedOut.Code, kerr.NotEnoughReplicas.Code,
		kerr.NotEnoughReplicasAfterAppend.Code, kerr.KafkaStorageError.Code:
		class = sharestate.ErrNotAvailable
	case kerr.FencedLeaderEpoch.Code:
		class = sharestate.ErrFencedLeaderEpoch
	case kerr.FencedStateEpoch.Code:
		class = ErrFencedStateEpoch
	case kerr.UnknownTopicOrPartition.Code:
		class = ErrUnknownTopicOrPartition
	case kerr.InvalidRequest.Code:
		// Kafka answers a read or write of a share-partition without state
		// so ("... uninitialized share partition ..."), as this package
		// does ("... not initialized ...").
		class = ErrInvalidRequest
		if msg != nil && (strings.Contains(*msg, "uninitialized") || strings.Contains(*msg, "not initialized")) {
			class = ErrUninitialized
		}
	default:
		return fmt.Errorf("sharecoord: coordinator %d answered %s", node, text)
	}
	return fmt.Errorf("%w (coordinator %d answered %s)", class, node, text)
}

// missing is a response without the share-partition asked about.
func (r remoteBackend) missing(k sharepart.Key) error {
	return fmt.Errorf("%w: coordinator %d did not answer for %s", sharestate.ErrNotAvailable, r.node, k)
}

func (r remoteBackend) read(ctx context.Context, k sharepart.Key, leaderEpoch int32) (State, error) {
	req := kmsg.NewPtrReadShareGroupStateRequest()
	req.GroupID = k.Group
	t := kmsg.NewReadShareGroupStateRequestTopic()
	t.TopicID = k.TopicID
	rp := kmsg.NewReadShareGroupStateRequestTopicPartition()
	rp.Partition, rp.LeaderEpoch = k.Partition, leaderEpoch
	t.Partitions = append(t.Partitions, rp)
	req.Topics = append(req.Topics, t)
	kresp, err := r.ask(ctx, req)
	if err != nil {
		return State{}, err
	}
	resp, _ := kresp.(*kmsg.ReadShareGroupStateResponse)
	if resp == nil {
		return State{}, r.missing(k)
	}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if t.TopicID != k.TopicID || p.Partition != k.Partition {
				continue
			}
			if err := codeError(r.node, p.ErrorCode, p.ErrorMessage); err != nil {
				return State{}, err
			}
			return State{StateEpoch: p.StateEpoch, LeaderEpoch: leaderEpoch, StartOffset: p.StartOffset,
				DeliveryCompleteCount: -1, Batches: fromReadBatches(p.StateBatches)}, nil
		}
	}
	return State{}, r.missing(k)
}

func (r remoteBackend) write(ctx context.Context, k sharepart.Key, w WriteState) error {
	req := kmsg.NewPtrWriteShareGroupStateRequest()
	req.GroupID = k.Group
	t := kmsg.NewWriteShareGroupStateRequestTopic()
	t.TopicID = k.TopicID
	wp := kmsg.NewWriteShareGroupStateRequestTopicPartition()
	wp.Partition, wp.LeaderEpoch, wp.StateEpoch, wp.StartOffset = k.Partition, w.LeaderEpoch, w.StateEpoch, w.StartOffset
	wp.DeliveryCompleteCount, wp.StateBatches = w.DeliveryCompleteCount, toWriteBatches(w.Batches)
	t.Partitions = append(t.Partitions, wp)
	req.Topics = append(req.Topics, t)
	kresp, err := r.ask(ctx, req)
	if err != nil {
		return err
	}
	resp, _ := kresp.(*kmsg.WriteShareGroupStateResponse)
	if resp == nil {
		return r.missing(k)
	}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if t.TopicID == k.TopicID && p.Partition == k.Partition {
				return codeError(r.node, p.ErrorCode, p.ErrorMessage)
			}
		}
	}
	return r.missing(k)
}

func (r remoteBackend) initialize(ctx context.Context, k sharepart.Key, stateEpoch int32, start int64) error {
	req := kmsg.NewPtrInitializeShareGroupStateRequest()
	req.GroupID = k.Group
	t := kmsg.NewInitializeShareGroupStateRequestTopic()
	t.TopicID = k.TopicID
	ip := kmsg.NewInitializeShareGroupStateRequestTopicPartition()
	ip.Partition, ip.StateEpoch, ip.StartOffset = k.Partition, stateEpoch, start
	t.Partitions = append(t.Partitions, ip)
	req.Topics = append(req.Topics, t)
	kresp, err := r.ask(ctx, req)
	if err != nil {
		return err
	}
	resp, _ := kresp.(*kmsg.InitializeShareGroupStateResponse)
	if resp == nil {
		return r.missing(k)
	}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if t.TopicID == k.TopicID && p.Partition == k.Partition {
				return codeError(r.node, p.ErrorCode, p.ErrorMessage)
			}
		}
	}
	return r.missing(k)
}

// summary is ReadShareGroupStateSummary; false when k has no state with a
// start offset (Kafka answers start offset -1 for none).
func (r remoteBackend) summary(ctx context.Context, k sharepart.Key) (State, bool, error) {
	req := kmsg.NewPtrReadShareGroupStateSummaryRequest()
	req.GroupID = k.Group
	t := kmsg.NewReadShareGroupStateSummaryRequestTopic()
	t.TopicID = k.TopicID
	sp := kmsg.NewReadShareGroupStateSummaryRequestTopicPartition()
	sp.Partition, sp.LeaderEpoch = k.Partition, -1
	t.Partitions = append(t.Partitions, sp)
	req.Topics = append(req.Topics, t)
	kresp, err := r.ask(ctx, req)
	if err != nil {
		return State{}, false, err
	}
	resp, _ := kresp.(*kmsg.ReadShareGroupStateSummaryResponse)
	if resp == nil {
		return State{}, false, r.missing(k)
	}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if t.TopicID != k.TopicID || p.Partition != k.Partition {
				continue
			}
			if err := codeError(r.node, p.ErrorCode, p.ErrorMessage); err != nil {
				return State{}, false, err
			}
			st := State{StateEpoch: p.StateEpoch, LeaderEpoch: p.LeaderEpoch, StartOffset: p.StartOffset,
				DeliveryCompleteCount: p.DeliveryCompleteCount}
			return st, p.StartOffset != -1, nil
		}
	}
	return State{}, false, r.missing(k)
}

// writeSnapshot is Coordinator.writeSnapshot over the wire: the summary
// decides whether the snapshot starts the state afresh (by the same rule;
// a summary without state answers leader epoch -1, an initialized one 0
// or more); if so Initialize, then a Read at the leader epoch (Kafka
// records a leader epoch on reads only), then the Write of the batches.
// Unlike the local path these are three requests: a newer leader that
// reads between them fences the rest.
func (r remoteBackend) writeSnapshot(ctx context.Context, k sharepart.Key, leaderEpoch int32, v *sharepart.SnapshotValue) error {
	w := WriteState{LeaderEpoch: leaderEpoch, StateEpoch: v.StateEpoch, StartOffset: v.StartOffset,
		DeliveryCompleteCount: v.DeliveryCompleteCount, Batches: v.StateBatches}
	st, ok, err := r.summary(ctx, k)
	if err != nil {
		return err
	}
	exists := st.LeaderEpoch != -1
	switch {
	case ok:
		return r.write(ctx, k, w)
	case !exists && v.SnapshotEpoch != 0:
		return fmt.Errorf("%w: snapshot %d of %s, coordinator %d has none (deleted since its leader loaded it?)", ErrUninitialized, v.SnapshotEpoch, k, r.node)
	case exists && v.StateEpoch != st.StateEpoch:
		return fmt.Errorf("%w: %s: snapshot at state epoch %d, coordinator %d has %d", ErrFencedStateEpoch, k, v.StateEpoch, r.node, st.StateEpoch)
	case exists && leaderEpoch != -1 && st.LeaderEpoch > leaderEpoch:
		return fmt.Errorf("%s: snapshot at leader epoch %d, coordinator %d has %d: %w", k, leaderEpoch, r.node, st.LeaderEpoch, sharestate.ErrFencedLeaderEpoch)
	}
	if err := r.initialize(ctx, k, v.StateEpoch, v.StartOffset); err != nil {
		return err
	}
	if leaderEpoch != -1 {
		if _, err := r.read(ctx, k, leaderEpoch); err != nil {
			return err
		}
	}
	return r.write(ctx, k, w)
}

func (r remoteBackend) remove(ctx context.Context, k sharepart.Key) error {
	req := kmsg.NewPtrDeleteShareGroupStateRequest()
	req.GroupID = k.Group
	t := kmsg.NewDeleteShareGroupStateRequestTopic()
	t.TopicID = k.TopicID
	dp := kmsg.NewDeleteShareGroupStateRequestTopicPartition()
	dp.Partition = k.Partition
	t.Partitions = append(t.Partitions, dp)
	req.Topics = append(req.Topics, t)
	kresp, err := r.ask(ctx, req)
	if err != nil {
		return err
	}
	resp, _ := kresp.(*kmsg.DeleteShareGroupStateResponse)
	if resp == nil {
		return r.missing(k)
	}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if t.TopicID == k.TopicID && p.Partition == k.Partition {
				return codeError(r.node, p.ErrorCode, p.ErrorMessage)
			}
		}
	}
	return r.missing(k)
}

// Conversions between sharepart's state batches and the RPCs'.

func toWriteBatches(bs []sharepart.StateBatch) []kmsg.WriteShareGroupStateRequestTopicPartitionStateBatch {
	out := make([]kmsg.WriteShareGroupStateRequestTopicPartitionStateBatch, len(bs))
	for i, b := range bs {
		wb := kmsg.NewWriteShareGroupStateRequestTopicPartitionStateBatch()
		wb.FirstOffset, wb.LastOffset, wb.DeliveryState, wb.DeliveryCount = b.FirstOffset, b.LastOffset, int8(b.DeliveryState), b.DeliveryCount
		out[i] = wb
	}
	return out
}

func fromWriteBatches(bs []kmsg.WriteShareGroupStateRequestTopicPartitionStateBatch) []sharepart.StateBatch {
	out := make([]sharepart.StateBatch, len(bs))
	for i, b := range bs {
		out[i] = sharepart.StateBatch{FirstOffset: b.FirstOffset, LastOffset: b.LastOffset,
			DeliveryState: sharepart.State(b.DeliveryState), DeliveryCount: b.DeliveryCount}
	}
	return out
}

func toReadBatches(bs []sharepart.StateBatch) []kmsg.ReadShareGroupStateResponseTopicPartitionStateBatch {
	out := make([]kmsg.ReadShareGroupStateResponseTopicPartitionStateBatch, len(bs))
	for i, b := range bs {
		rb := kmsg.NewReadShareGroupStateResponseTopicPartitionStateBatch()
		rb.FirstOffset, rb.LastOffset, rb.DeliveryState, rb.DeliveryCount = b.FirstOffset, b.LastOffset, int8(b.DeliveryState), b.DeliveryCount
		out[i] = rb
	}
	return out
}

func fromReadBatches(bs []kmsg.ReadShareGroupStateResponseTopicPartitionStateBatch) []sharepart.StateBatch {
	out := make([]sharepart.StateBatch, len(bs))
	for i, b := range bs {
		out[i] = sharepart.StateBatch{FirstOffset: b.FirstOffset, LastOffset: b.LastOffset,
			DeliveryState: sharepart.State(b.DeliveryState), DeliveryCount: b.DeliveryCount}
	}
	return out
}
