package replica

import (
	"math"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// A fetcher keeps a KIP-227 fetch session with its leader, as Kafka's
// FetchSessionHandler does for its replica fetchers: the first fetch is
// full (every partition, epoch 0) and asks for a session; once the leader
// gives one, each fetch names only the partitions whose fetch parameters
// changed since the leader last heard them — fetch offset, durable end
// (DurableEndTag: pipelined replication's high watermark moves only with
// it, so a durable end that moves is always sent), log start, max bytes,
// leader epoch — and forgets those no longer fetched here (paused,
// throttled, moved). The leader fetches every partition of the session
// at the parameters it holds and answers only those with something new.
// So a partition missing from an answer has nothing new: it is never a
// reset, and its last high watermark stands.
//
// Any doubt ends in a full fetch: a failed request (the leader may or may
// not have moved the session's epoch), a session error, a new connection,
// or a partition whose answer this follower could not take (its append
// failed, its fsync failed) — the leader recorded the high watermark as
// sent, and a full answer is the way to hear it again. A full fetch names
// the old session, which the leader then closes, and asks for a new one.

// sessionKey names a partition in the session.
type sessionKey struct {
	topic     string
	id        [16]byte
	partition int32
}

// sentState is what the leader holds for a partition of the session.
type sentState struct {
	fetchOffset, durable, logStart int64
	maxBytes, leaderEpoch          int32
}

// followerSession is a fetcher's session with its leader. Owned by the
// fetcher's run goroutine.
//
// Invariants: id == 0 means no session (the next fetch is full, epoch 0);
// with id != 0, full means the next fetch is full all the same (naming id,
// so the leader closes it), else it is incremental at epoch, and sent
// holds the session's partitions as the leader has them.
type followerSession struct {
	id    int32
	epoch int32
	full  bool
	sent  map[sessionKey]*sentEntry
	// round counts prepares: an entry not marked with the current one was
	// not wanted this round, and is forgotten.
	round uint64
}

// sentEntry is a partition of the session and the last round that
// wanted it.
type sentEntry struct {
	st    sentState
	round uint64
}

// askedPart is a partition named in a request, as named.
type askedPart struct {
	k  sessionKey
	st sentState
}

// sessionRound is one fetch's changes, applied to the session when the
// leader answers.
type sessionRound struct {
	full      bool
	epoch     int32
	asked     []askedPart // the partitions named in the request
	forgotten []sessionKey
}

func keyOf(rt *kmsg.FetchRequestTopic, rp *kmsg.FetchRequestTopicPartition) sessionKey {
	return sessionKey{topic: rt.Topic, id: rt.TopicID, partition: rp.Partition}
}

func stateOf(rp *kmsg.FetchRequestTopicPartition) sentState {
	return sentState{fetchOffset: rp.FetchOffset, durable: FollowerDurableEnd(rp), logStart: rp.LogStartOffset,
		maxBytes: rp.PartitionMaxBytes, leaderEpoch: rp.CurrentLeaderEpoch}
}

// prepare turns req, naming every partition to fetch, into the session's
// fetch: full, or incremental with only the changed partitions and the
// forgotten ones.
func (s *followerSession) prepare(req *kmsg.FetchRequest) sessionRound {
	var r sessionRound
	if s.id == 0 || s.full {
		req.SessionID, req.SessionEpoch = s.id, 0
		r.full = true
		for i := range req.Topics {
			rt := &req.Topics[i]
			for j := range rt.Partitions {
				rp := &rt.Partitions[j]
				r.asked = append(r.asked, askedPart{keyOf(rt, rp), stateOf(rp)})
			}
		}
		return r
	}
	req.SessionID, req.SessionEpoch, r.epoch = s.id, s.epoch, s.epoch
	s.round++
	topics := req.Topics[:0]
	for _, rt := range req.Topics {
		parts := rt.Partitions[:0]
		for j := range rt.Partitions {
			rp := &rt.Partitions[j]
			k, st := keyOf(&rt, rp), stateOf(rp)
			if e := s.sent[k]; e != nil {
				e.round = s.round
				if e.st == st {
					continue
				}
			}
			r.asked = append(r.asked, askedPart{k, st})
			parts = append(parts, *rp)
		}
		if len(parts) > 0 {
			rt.Partitions = parts
			topics = append(topics, rt)
		}
	}
	req.Topics = topics
	for k, e := range s.sent {
		if e.round == s.round {
			continue
		}
		r.forgotten = append(r.forgotten, k)
		var ft *kmsg.FetchRequestForgottenTopic
		for i := range req.ForgottenTopics {
			if t := &req.ForgottenTopics[i]; t.Topic == k.topic && t.TopicID == k.id {
				ft = t
			}
		}
		if ft == nil {
			req.ForgottenTopics = append(req.ForgottenTopics, kmsg.NewFetchRequestForgottenTopic())
			ft = &req.ForgottenTopics[len(req.ForgottenTopics)-1]
			ft.Topic, ft.TopicID = k.topic, k.id
		}
		ft.Partitions = append(ft.Partitions, k.partition)
	}
	return r
}

// answered applies a round the leader answered without a top-level error.
func (s *followerSession) answered(r sessionRound, resp *kmsg.FetchResponse) {
	if r.full {
		s.full = false
		s.id, s.epoch, s.sent = resp.SessionID, 1, nil
		if s.id != 0 {
			s.sent = make(map[sessionKey]*sentEntry, len(r.asked))
			for _, a := range r.asked {
				s.sent[a.k] = &sentEntry{st: a.st, round: s.round}
			}
		}
		return
	}
	if resp.SessionID != s.id || s.epoch != r.epoch {
		s.restart() // the leader closed it (or it moved meanwhile): start again
		return
	}
	for _, a := range r.asked {
		if e := s.sent[a.k]; e != nil {
			e.st = a.st
		} else {
			s.sent[a.k] = &sentEntry{st: a.st, round: s.round}
		}
	}
	for _, k := range r.forgotten {
		delete(s.sent, k)
	}
	if len(s.sent) == 0 {
		// The leader closes a session left empty (and so answers with
		// id 0, handled above); a session never stays empty here either.
		s.id, s.sent = 0, nil
		return
	}
	if s.epoch == math.MaxInt32 {
		s.epoch = 1
	} else {
		s.epoch++
	}
}

// failed takes a failed round: a top-level error code, or 0 for a
// request that got no answer (the leader may have moved the epoch).
func (s *followerSession) failed(code int16) {
	if code == kerr.FetchSessionIDNotFound.Code {
		s.id, s.sent, s.full = 0, nil, false
		return
	}
	s.restart()
}

// restart makes the next fetch full, closing the current session.
func (s *followerSession) restart() {
	s.full = true
	s.sent = nil
}
