package sharefetch

import (
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordlog/fjord/broker/api"
	"github.com/fjordlog/fjord/group/sharepart"
)

// ShareFetch: v1-2
//
// Behaviour (KIP-932, as Kafka 4.2 serves it):
//   - Acquires records of the share-partitions this node leads for the
//     member, locked to it for the group's record lock duration
//     (AcquisitionLockTimeoutMs), and answers them as AcquiredRecords
//     ranges with their delivery counts, with the log batches holding them.
//     Control batches are gaps, archived, never delivered. The group's
//     share.isolation.level, read for each request, bounds the read:
//     read_uncommitted (the default) up to the high watermark;
//     read_committed up to the last stable offset, with the batches of
//     aborted transactions archived as gaps, never delivered (the bytes
//     sent may still hold such a batch between two acquired ranges, as
//     Kafka's do: clients hand out only AcquiredRecords). group/sharepart
//     decides what is acquired; its records are written to the share
//     coordinator (Persister) before the answer.
//   - Share sessions (session.go): epoch 0 opens one with the request's
//     partitions, a positive epoch adds the request's partitions and drops
//     ForgottenTopicsData (every partition of the session is fetched;
//     one without news is left out of the answer), -1 closes it after its
//     acknowledgements and releases the member's records here.
//     SHARE_SESSION_NOT_FOUND, INVALID_SHARE_SESSION_EPOCH and
//     SHARE_SESSION_LIMIT_REACHED (answered after MaxWaitMs, so a client
//     at the limit does not spin) as Kafka.
//   - Piggybacked acknowledgements are applied first, in the request's
//     order, and answered per partition in AcknowledgeErrorCode; a
//     request that opens a session may carry none (INVALID_REQUEST).
//   - Long poll: until MinBytes can be read from the partitions that can
//     acquire (MinBytes 0: at once), or MaxWaitMs, woken by their high
//     watermarks and by records coming back to their share-partitions;
//     what is then acquired is answered at once. A share-partition loads
//     on the first fetch that names it, meanwhile it counts as empty.
//   - MaxBytes (capped by fetch.max.bytes) is split evenly among the
//     partitions that can acquire, each at least one whole batch (KIP-74);
//     MaxRecords bounds the records acquired across the request, exactly;
//     BatchSize splits AcquiredRecords ranges at log batch boundaries
//     (ShareAcquireMode batch_optimized; record_limit never splits).
//   - Per partition: UNKNOWN_TOPIC_ID, TOPIC_AUTHORIZATION_FAILED (READ on
//     the topic, checked here: an incremental request does not name its
//     session's partitions), UNKNOWN_TOPIC_OR_PARTITION,
//     NOT_LEADER_OR_FOLLOWER with CurrentLeader and NodeEndpoints
//     (KIP-951), LEADER_NOT_AVAILABLE when the share-partition cannot be
//     loaded now, and the share coordinator's failures; a partition's
//     error found while waiting answers at once. READ on the group is the
//     rule's (GROUP_AUTHORIZATION_FAILED at the top).
//   - ThrottleMillis is always 0: client quotas do not apply yet.
//
// Version notes:
//   - v0 (Kafka 4.0's early access, removed in 4.1) is not served.
//   - v1: KIP-932 as released (MaxRecords, BatchSize; no
//     PartitionMaxBytes).
//   - v2 (Kafka 4.2): ShareAcquireMode (KIP-1206; 0 batch_optimized, 1
//     record_limit, anything else INVALID_REQUEST) and IsRenewAck
//     (KIP-1222: acknowledgements may renew locks, type 4; nothing is
//     fetched, and MaxBytes, MinBytes, MaxRecords and MaxWaitMs must be 0
//     and every partition carry acknowledgements, else INVALID_REQUEST).
func shareFetchEntry(h APIHost) api.Entry {
	return api.Entry{
		Key: 78, Client: api.Versions(1, 2), Handle: bindTo(h, handleShareFetch),
		Rule: needRead(func(r kmsg.Request) *string { return r.(*kmsg.ShareFetchRequest).GroupID }),
	}
}

func handleShareFetch(h APIHost, cc *api.Conn, kreq kmsg.Request, respond func(kmsg.Response)) {
	req := kreq.(*kmsg.ShareFetchRequest)
	m := h.Manager()
	resp := req.ResponseKind().(*kmsg.ShareFetchResponse)
	top := func(err error) {
		resp.ErrorCode, resp.ErrorMessage = m.code(err), errorMessage(err)
		resp.Topics = nil
		respond(resp)
	}
	key, ok := identity(req.GroupID, req.MemberID)
	if !ok {
		top(fmt.Errorf("sharefetch: group id and member id must be set, the member id at most 36 characters: %w", kerr.InvalidRequest))
		return
	}
	// Read per request, as Kafka reads the group's config for every share
	// fetch: share.isolation.level applies from the next ShareFetch.
	gc := m.groupConfig(key.group)
	resp.AcquisitionLockTimeoutMillis = gc.Partition.RecordLockDurationMs
	renew := req.Version >= 2 && req.IsRenewAck
	if err := checkShareFetch(req, renew); err != nil {
		top(err)
		return
	}
	parts, acks, forget := shareFetchParts(req)

	var (
		ss    *session
		sp    []sessionPart
		epoch int32 // the session's epoch after this request
		err   error
	)
	switch e := req.ShareSessionEpoch; {
	case e == 0:
		if len(acks) > 0 {
			top(fmt.Errorf("sharefetch: acknowledgements in a request that opens a share session: %w", kerr.InvalidRequest))
			return
		}
		ss, sp, err = m.openSession(key, parts, cc.Ctx)
		epoch = 1
	case e == -1:
		ss, err = m.finalSession(key)
	default:
		ss, sp, err = m.updateSession(key, e, parts, forget)
		epoch = nextEpoch(e)
	}
	if errors.Is(err, errSessionLimit) {
		idleThenAnswer(h, cc, m, time.Duration(req.MaxWaitMillis)*time.Millisecond, func() { top(err) }, respond)
		return
	}
	if err != nil {
		top(err)
		return
	}

	r := &readable{h: h, cc: cc}
	// Applied now, on the reader goroutine, so they precede anything this
	// connection asks next; their writes are waited for below.
	acked := m.acknowledge(r, key.group, key.member, acks, renew)
	final := req.ShareSessionEpoch == -1
	f := &shareFetch{m: m, key: key, ss: ss, epoch: epoch, iso: gc.Isolation}
	if !final && !renew {
		f.parts = rotate(sp, req.ShareSessionEpoch)
		f.resolve(r)
		f.maxBytes = int(max(1, min(req.MaxBytes, m.cfg.FetchMaxBytes)))
		f.minBytes = int(min(req.MinBytes, int32(f.maxBytes)))
		f.maxRecords = int(req.MaxRecords)
		if req.ShareAcquireMode == 0 {
			f.batchSize = int(req.BatchSize)
		}
	}
	wait := time.Duration(max(req.MaxWaitMillis, 0)) * time.Millisecond
	incremental := req.ShareSessionEpoch > 0
	run := func() {
		acked()
		switch {
		case final:
			m.closeSession(ss)
		case len(f.parts) > 0:
			if !f.run(connContext(cc), wait) {
				respond(nil) // the connection is gone
				return
			}
			f.settle()
		}
		if f.stale {
			top(fmt.Errorf("sharefetch: the share session moved on while this request waited: %w", kerr.InvalidShareSessionEpoch))
			return
		}
		codes := fillShareFetch(h, cc, m, resp, f.parts, acks, incremental)
		if !final {
			m.answered(ss, epoch, codes)
		}
		respond(resp)
	}
	if !h.Go(run) {
		respond(nil)
	}
}

// checkShareFetch is the request-wide validation.
func checkShareFetch(req *kmsg.ShareFetchRequest, renew bool) error {
	if req.Version >= 2 && req.ShareAcquireMode != 0 && req.ShareAcquireMode != 1 {
		return fmt.Errorf("sharefetch: share acquire mode %d: %w", req.ShareAcquireMode, kerr.InvalidRequest)
	}
	if !renew {
		return nil
	}
	if req.MaxBytes != 0 || req.MinBytes != 0 || req.MaxRecords != 0 || req.MaxWaitMillis != 0 {
		return fmt.Errorf("sharefetch: a renewing ShareFetch must not ask for records: %w", kerr.InvalidRequest)
	}
	for _, t := range req.Topics {
		for _, p := range t.Partitions {
			if len(p.AcknowledgementBatches) == 0 {
				return fmt.Errorf("sharefetch: a renewing ShareFetch names a partition without acknowledgements: %w", kerr.InvalidRequest)
			}
		}
	}
	return nil
}

// shareFetchParts splits a request into its partitions (each once, in
// order), its acknowledgements and the partitions it forgets.
func shareFetchParts(req *kmsg.ShareFetchRequest) (parts []tp, acks []*ackPart, forget []tp) {
	seen := make(map[tp]struct{})
	for _, t := range req.Topics {
		for _, p := range t.Partitions {
			k := tp{t.TopicID, p.Partition}
			if _, dup := seen[k]; !dup {
				seen[k] = struct{}{}
				parts = append(parts, k)
			}
			if len(p.AcknowledgementBatches) > 0 {
				bs := make([]sharepart.AckBatch, 0, len(p.AcknowledgementBatches))
				for _, b := range p.AcknowledgementBatches {
					bs = append(bs, ackBatch(b.FirstOffset, b.LastOffset, b.AcknowledgeTypes))
				}
				acks = addAck(acks, k, bs)
			}
		}
	}
	for _, t := range req.ForgottenTopicsData {
		for _, p := range t.Partitions {
			forget = append(forget, tp{t.TopicID, p})
		}
	}
	return parts, acks, forget
}

// rotate lists the session's partitions starting at epoch modulo their
// number (Kafka's round-robin), so MaxRecords favours none of them.
func rotate(parts []sessionPart, epoch int32) []*fetchPart {
	out := make([]*fetchPart, len(parts))
	n := len(parts)
	start := 0
	if n > 0 && epoch > 0 {
		start = int(epoch) % n
	}
	for i := range parts {
		sp := parts[(start+i)%n]
		out[i] = &fetchPart{tp: sp.tp, requiresUpdate: sp.requiresUpdate}
	}
	return out
}

// idleThenAnswer answers with answer after wait (Kafka's idle timer for a
// ShareFetch over the session limit), unless the connection ends first.
func idleThenAnswer(h APIHost, cc *api.Conn, m *Manager, wait time.Duration, answer func(), respond func(kmsg.Response)) {
	if wait <= 0 {
		answer()
		return
	}
	if !h.Go(func() {
		t := time.NewTimer(wait)
		defer t.Stop()
		select {
		case <-t.C:
		case <-m.ctx.Done():
		case <-connContext(cc).Done():
			respond(nil)
			return
		}
		answer()
	}) {
		respond(nil)
	}
}

// fillShareFetch writes the answer: the fetched partitions (all of them,
// or for an incremental request those with records, an error, an
// acknowledgement or a pending update) in fetch order, then the
// acknowledged partitions not among them. It returns the codes of the
// session partitions it answered.
func fillShareFetch(h APIHost, cc *api.Conn, m *Manager, resp *kmsg.ShareFetchResponse, parts []*fetchPart, acks []*ackPart, incremental bool) map[tp]int16 {
	acked := make(map[tp]*ackPart, len(acks))
	for _, a := range acks {
		acked[a.tp] = a
	}
	topics := make(map[[16]byte]int)
	where := make(map[tp]int) // index in its topic's partitions
	add := func(t tp) *kmsg.ShareFetchResponseTopicPartition {
		ti, ok := topics[t.id]
		if !ok {
			ti = len(resp.Topics)
			topics[t.id] = ti
			rt := kmsg.NewShareFetchResponseTopic()
			rt.TopicID = t.id
			resp.Topics = append(resp.Topics, rt)
		}
		ps := &resp.Topics[ti].Partitions
		if i, ok := where[t]; ok {
			return &(*ps)[i]
		}
		rp := kmsg.NewShareFetchResponseTopicPartition()
		rp.Partition = t.p
		rp.CurrentLeader.LeaderID, rp.CurrentLeader.LeaderEpoch = -1, -1
		rp.Records = []byte{} // not nullable from v1
		*ps = append(*ps, rp)
		where[t] = len(*ps) - 1
		return &(*ps)[len(*ps)-1]
	}
	hints := leaderHints{h: h, cc: cc}
	codes := make(map[tp]int16, len(parts))
	for _, fp := range parts {
		code := m.code(fp.err)
		if incremental && code == 0 && len(fp.acquired) == 0 && !fp.requiresUpdate && acked[fp.tp] == nil {
			continue
		}
		rp := add(fp.tp)
		rp.ErrorCode = code
		if code != 0 {
			rp.ErrorMessage = errorMessage(fp.err)
			if code == kerr.NotLeaderForPartition.Code {
				rp.CurrentLeader.LeaderID, rp.CurrentLeader.LeaderEpoch = hints.leader(fp.tp)
			}
		}
		if len(fp.acquired) > 0 {
			rp.Records, rp.AcquiredRecords = fp.records, fp.acquired
		}
		codes[fp.tp] = code
	}
	for _, a := range acks {
		rp := add(a.tp)
		rp.AcknowledgeErrorCode = a.code
		if a.code != 0 {
			rp.AcknowledgeErrorMessage = errorMessage(a.err)
		}
	}
	for _, ep := range hints.endpoints {
		ne := kmsg.NewShareFetchResponseNodeEndpoint()
		ne.NodeID, ne.Host, ne.Port, ne.Rack = ep.ID, ep.Host, ep.Port, ep.Rack
		resp.NodeEndpoints = append(resp.NodeEndpoints, ne)
	}
	return codes
}

// leaderHints gathers the current leaders named by NOT_LEADER_OR_FOLLOWER
// answers, and their endpoints, once per node.
type leaderHints struct {
	h         APIHost
	cc        *api.Conn
	endpoints []Leader
}

// leader is t's current leader id and epoch, -1 and -1 when unknown.
func (l *leaderHints) leader(t tp) (int32, int32) {
	ld, ok := l.h.CurrentLeader(l.cc, t.id, t.p)
	if !ok {
		return -1, -1
	}
	known := false
	for _, e := range l.endpoints {
		known = known || e.ID == ld.ID
	}
	if !known {
		l.endpoints = append(l.endpoints, ld)
	}
	return ld.ID, ld.Epoch
}
