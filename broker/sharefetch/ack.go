package sharefetch

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/fjordlog/fjord/group/sharepart"
)

// ackPart is one partition's acknowledgements in a ShareFetch or a
// ShareAcknowledge, and their outcome.
type ackPart struct {
	tp
	batches []sharepart.AckBatch
	code    int16
	err     error // the error behind code, for the message
	write   *pendingWrite
}

// ackBatch copies a batch's acknowledge types out of the request.
func ackBatch(first, last int64, types []int8) sharepart.AckBatch {
	return sharepart.AckBatch{First: first, Last: last, Types: append([]int8(nil), types...)}
}

// addAck records one request partition's batches; a partition named
// twice keeps the last (as Kafka's map of them does).
func addAck(acks []*ackPart, t tp, batches []sharepart.AckBatch) []*ackPart {
	for _, a := range acks {
		if a.tp == t {
			a.batches = batches
			return acks
		}
	}
	return append(acks, &ackPart{tp: t, batches: batches})
}

// acknowledge applies acks as member's, partition by partition, in the
// order Kafka checks: the topic id is known (UNKNOWN_TOPIC_ID), its topic
// may be read (TOPIC_AUTHORIZATION_FAILED), the batches use renew (type 4)
// only when the request says IsRenewAck (INVALID_REQUEST), this node leads
// the partition (NOT_LEADER_OR_FOLLOWER) and has its share-partition
// loaded (UNKNOWN_TOPIC_OR_PARTITION when not, LEADER_NOT_AVAILABLE while
// it loads), then the state machine's own checks (INVALID_REQUEST,
// INVALID_RECORD_STATE). A partition with no batches is answered NONE.
// The steps run now, in this order; done waits for their writes.
func (m *Manager) acknowledge(r *readable, groupID, member string, acks []*ackPart, renew bool) (done func()) {
	now := m.now()
	for _, a := range acks {
		a.err = m.ackOne(r, groupID, member, a, renew, now)
		a.code = m.code(a.err)
	}
	return func() {
		for _, a := range acks {
			if a.write == nil {
				continue
			}
			if err := a.write.wait(); err != nil && a.code == 0 {
				a.err, a.code = err, m.code(err)
			}
		}
	}
}

func (m *Manager) ackOne(r *readable, groupID, member string, a *ackPart, renew bool, now int64) error {
	name := m.host.TopicName(a.id)
	switch {
	case name == "":
		return fmt.Errorf("sharefetch: topic id %x: %w", a.id, kerr.UnknownTopicID)
	case !r.ok(name):
		return fmt.Errorf("sharefetch: topic %s: %w", name, kerr.TopicAuthorizationFailed)
	case len(a.batches) == 0:
		return nil
	}
	if !renew {
		for _, b := range a.batches {
			for _, t := range b.Types {
				if t == sharepart.AckRenew {
					return fmt.Errorf("sharefetch: renew acknowledgement without IsRenewAck: %w", kerr.InvalidRequest)
				}
			}
		}
	}
	key := sharepart.Key{Group: groupID, TopicID: a.id, Partition: a.p}
	rep, code := m.host.Partition(a.id, a.p)
	if code != 0 {
		m.lost(key, code)
		return fmt.Errorf("sharefetch: %s-%d: %w", name, a.p, codeError(code))
	}
	sp, err := m.loaded(key, rep)
	if err != nil {
		return err
	}
	if sp == nil {
		return fmt.Errorf("sharefetch: %s: not loaded here: %w", key, kerr.UnknownTopicOrPartition)
	}
	var ackErr error
	a.write, err = sp.step(true, func(p *sharepart.Partition) []sharepart.Record {
		var recs []sharepart.Record
		recs, ackErr = p.Acknowledge(now, member, a.batches)
		return recs
	})
	if err != nil {
		return err
	}
	return ackErr
}
