package partitions

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordlog/fjord/broker/acl"
	"github.com/fjordlog/fjord/broker/api"
	"github.com/fjordlog/fjord/broker/metrics"
	"github.com/fjordlog/fjord/broker/replica"
	"github.com/fjordlog/fjord/broker/replicamgr"
	"github.com/fjordlog/fjord/broker/txn"
	"github.com/fjordlog/fjord/storage"
	"github.com/fjordlog/fjord/storage/recordbatch"
)

// Produce: v0-13
//
// Behaviour:
//   - Each partition's data must be exactly one record batch of magic 2,
//     fully validated (length, CRC-32C, codec, record count, records) before
//     anything is appended; compressed batches are stored as sent.
//   - Idempotent batches are checked against the partition's producer state:
//     a retried duplicate gets its original offset, a gap
//     OUT_OF_ORDER_SEQUENCE_NUMBER, a stale epoch INVALID_PRODUCER_EPOCH.
//   - acks=1 and acks=-1 answer once the batch is durable (fsync, shared
//     between concurrent producers) on topics with flush.messages=1, the
//     default; on relaxed topics once it is in the log. With one node the
//     ISR is {this node}: acks=-1 on a topic whose min.insync.replicas is
//     above 1 is refused with NOT_ENOUGH_REPLICAS before anything is written.
//   - acks=0 gets no response; an error closes the connection, as in Kafka,
//     so the client notices.
//   - Transactional batches (from a producer with a transactional.id) are
//     appended like others; the log tracks the producer's open transaction
//     until its coordinator's marker ends it (docs/transactions.md).
//     Control batches come only from coordinators (WriteTxnMarkers): a
//     client's is INVALID_RECORD.
//   - A topic with fjord.transactional.writes.required=true (Fjord's own
//     topic config) refuses non-transactional batches with INVALID_RECORD
//     and a message naming the config, so that a settlement topic cannot be
//     written outside a transaction.
//   - A topic with fjord.produce.acks.all.required=true (Fjord's own topic
//     config) refuses acks=0 and acks=1 with INVALID_REQUIRED_ACKS before
//     anything is written, so a misconfigured producer cannot write a
//     settlement record without ISR durability (acks=0: the connection
//     closes, as for any acks=0 error).
//   - KIP-890 part 1: a transactional batch that would open the producer's
//     transaction on a partition is appended only once the transactional
//     id's coordinator confirms the partition is in that transaction
//     (AddPartitionsToTxn v4 VerifyOnly; local when this node coordinates
//     the id). A late batch of a transaction that has ended would
//     otherwise open a transaction no coordinator knows of, and hold back
//     the partition's last stable offset for good. Not in the transaction:
//     INVALID_TXN_STATE (TRANSACTION_ABORTABLE from v11, below); the
//     coordinator unreachable, loading or busy:
//     NOT_ENOUGH_REPLICAS, which clients retry (Kafka's mapping). The check
//     runs on the connection's reader, as Kafka serves one request per
//     connection at a time, so the producer's pipelined batches keep their
//     order; it happens once per transaction and partition, bounded by
//     txncoord.VerifyTimeout (broker/txncoord/verify.go).
//   - KIP-890 part 2: from v12 the same check adds the partition to the
//     producer's transaction instead of only verifying it (AddPartitionsToTxn
//     v4+ without VerifyOnly, Kafka's "addPartition" operation): a
//     transactional producer at v12+ sends no AddPartitionsToTxn of its
//     own. The add obeys the coordinator's rules for a client's add — an
//     unknown producer id is INVALID_PRODUCER_ID_MAPPING, a stale epoch
//     INVALID_PRODUCER_EPOCH (Kafka's PRODUCER_FENCED on Produce), a
//     transaction being committed or aborted CONCURRENT_TRANSACTIONS,
//     which v12 passes on where older versions get NOT_ENOUGH_REPLICAS — and
//     starts the transaction's timeout if it opens it. A partition not in
//     the transaction at v11 is TRANSACTION_ABORTABLE (v11 added the code),
//     at v10 and below INVALID_TXN_STATE, as Kafka maps them.
//     transaction.version stays 1, so franz-go and the Java client still
//     cap transactional produces at v11 and add partitions themselves;
//     only a client that chooses v12 uses this.
//   - v13 names topics by id: an id that names no topic is
//     UNKNOWN_TOPIC_ID for its partitions (before authorization: there is
//     no name to authorize), and the response carries the id. Quotas,
//     metrics, ACLs and the audit log see the topic's name.
//   - A client over its producer_byte_rate quota (KIP-546 client quotas) is
//     answered with throttle_time_ms and its connection muted that long
//     (the node's quota glue, broker/quota.go, through Host.ProduceQuota).
//
// Version notes:
//   - v0-2 carry magic 0/1 message sets, which are refused with
//     UNSUPPORTED_FOR_MESSAGE_FORMAT; v0 is still advertised because
//     librdkafka reads a minimum above 0 as "no compression" (KAFKA-18659).
//   - v3: record batches, transactional id; v5: log start offset;
//     v8: record errors, error message; v9: flexible; v11:
//     TRANSACTION_ABORTABLE (KIP-890); v12: the partition is added to the
//     transaction (KIP-890 part 2); v13: topic ids instead of names
//     (KIP-516)
//
// The handler keeps nothing of the request once it returns (the batches
// are appended, and pwrite copies them, before that), so the front end
// recycles the request's buffer (broker/dispatch.go).
func produceEntry(h Host) api.Entry {
	return api.Entry{
		Key: 0, Client: api.Versions(0, 13), Handle: bindTo(h, handleProduce),
		Rule: api.Needs("WRITE on TOPIC; transactional: WRITE on TRANSACTIONAL_ID", 3, bindCheck(h, checkProduce)),
	}
}

func handleProduce(h Host, cc *api.Conn, kreq kmsg.Request, respond func(kmsg.Response)) {
	req := kreq.(*kmsg.ProduceRequest)
	resp := req.ResponseKind().(*kmsg.ProduceResponse)
	respond = h.ProduceQuota(cc, req, respond)
	replicas, met := h.Replicas(), h.Metrics()
	topics := produceTopics(replicas, req)
	var unverified map[txn.TopicPartition]int16
	if req.TransactionID != nil {
		unverified = h.VerifyTxnProduce(cc.Ctx, *req.TransactionID, req)
	}
	now := time.Now().UnixMilli()
	// Three passes: resolve every partition and lay out the response;
	// append (several partitions at once for a large request); then
	// gather errors, flushes and acks=all waits in request order.
	var jobs []produceJob
	resp.Topics = make([]kmsg.ProduceResponseTopic, len(req.Topics))
	for i, rt := range req.Topics {
		st := &resp.Topics[i]
		*st = kmsg.NewProduceResponseTopic()
		st.Topic, st.TopicID = rt.Topic, rt.TopicID
		st.Partitions = make([]kmsg.ProduceResponseTopicPartition, len(rt.Partitions))
		t := topics[i]
		for j, rp := range rt.Partitions {
			sp := &st.Partitions[j]
			*sp = kmsg.NewProduceResponseTopicPartition()
			sp.Partition = rp.Partition
			sp.BaseOffset, sp.LogAppendTime, sp.LogStartOffset = -1, -1, -1
			jb := produceJob{sp: sp, rec: rp.Records, w: ackWait{topic: i, index: j}}
			code, refused := unverified[txn.TopicPartition{Topic: rt.Topic, Partition: rp.Partition}]
			switch {
			case req.Acks != 0 && req.Acks != 1 && req.Acks != -1:
				sp.ErrorCode = kerr.InvalidRequiredAcks.Code
			case t == nil && req.Version >= 13:
				sp.ErrorCode = kerr.UnknownTopicID.Code
			case refused:
				sp.ErrorCode = code
			default:
				jb.p, jb.lg, jb.v, sp.ErrorCode = t.Serving(rp.Partition, replica.Produce)
			}
			jobs = append(jobs, jb)
		}
	}
	appendJob := func(i int) {
		jb := &jobs[i]
		if jb.p == nil {
			return
		}
		w, err := appendTo(met, jb.p, jb.lg, jb.v, jb.rec, req.Acks, now, jb.sp)
		w.topic, w.index = jb.w.topic, jb.w.index
		jb.w, jb.err = w, err
	}
	var early map[*replica.Partition]*earlyFlush
	switch {
	case parallelAppends(jobs):
		// As many at a time as Go has CPUs: appends are CPU (copying into
		// the page cache), not waits.
		replica.ForEachBounded(len(jobs), min(runtime.GOMAXPROCS(0), 8), appendJob)
	case req.Acks != 0 && len(jobs) > 1 && len(jobs) < replica.GroupFlushMin && distinctPartitions(jobs):
		// A narrow request's batches are appended one after another here;
		// each partition's fsync starts as soon as its batch is in, so it
		// runs while the next ones are appended rather than after the
		// last. (A wide one is flushed as one group, below.)
		early = make(map[*replica.Partition]*earlyFlush, len(jobs))
		for i := range jobs {
			appendJob(i)
			if jb := &jobs[i]; jb.err == nil && jb.sp.ErrorCode == 0 && jb.p != nil && jb.p.SyncOnAck() {
				early[jb.p] = startFlush(h, jb.p)
			}
		}
	default:
		for i := range jobs {
			appendJob(i)
		}
	}
	var toFlush []*replica.Partition
	var flushing map[*replica.Partition]bool // toFlush's members, once it is long
	var waits []ackWait
	var firstErr error
	for i := range jobs {
		jb := &jobs[i]
		sp := jb.sp
		if jb.err != nil {
			sp.ErrorCode = h.Code(jb.err)
			sp.ErrorMessage = errMessage(jb.err)
			loggerOr(jb.p, h).Debug().Err(jb.err).Str("client_id", cc.ClientID).Msg("produce refused")
		}
		if sp.ErrorCode != 0 {
			met.PartitionError(0, sp.ErrorCode)
		}
		if sp.ErrorCode != 0 && firstErr == nil {
			firstErr = fmt.Errorf("produce to %s-%d: error code %d", resp.Topics[jb.w.topic].Topic, sp.Partition, sp.ErrorCode)
		}
		if sp.ErrorCode == 0 && jb.p != nil {
			if jb.p.SyncOnAck() {
				toFlush, flushing = appendUnique(toFlush, flushing, jb.p)
			}
			if req.Acks == -1 {
				waits = append(waits, jb.w)
			}
		}
	}
	if req.Acks == 0 {
		if len(toFlush) > 0 {
			h.Go(func() { flushAll(toFlush, nil, nil) })
		}
		if firstErr != nil {
			cc.Fail(firstErr)
			return
		}
		respond(nil)
		return
	}
	if len(toFlush) == 0 && len(waits) == 0 {
		respond(resp)
		return
	}
	// The fsync and the wait for the replicas happen off the connection's
	// reader, so pipelined requests keep arriving and share them (group
	// commit); nothing is held while waiting.
	h.Go(func() {
		failWith := func(p *replica.Partition, err error) {
			for i := range resp.Topics {
				if resp.Topics[i].Topic != p.Topic {
					continue
				}
				for j := range resp.Topics[i].Partitions {
					sp := &resp.Topics[i].Partitions[j]
					if sp.Partition == p.Index && sp.ErrorCode == 0 {
						sp.ErrorCode = kerr.KafkaStorageError.Code
						sp.ErrorMessage = errMessage(err)
						sp.BaseOffset = -1
					}
				}
			}
		}
		if len(waits) == 0 {
			flushAll(toFlush, early, failWith)
			respond(resp)
			return
		}
		// acks=all: the leader's fsync runs beside the wait for the
		// replicas rather than before it. The high watermark counts the
		// leader's durable end, so a wait that succeeds implies the fsync
		// it needed did; and a wait on a leader whose disk stalls ends
		// when it resigns (fjord.log.flush.stall.max.ms), not when the
		// stuck fsync returns, seconds later, so the client retries at the
		// new leader at once. A failed fsync ends the waits (ctx) and
		// answers its partitions KAFKA_STORAGE_ERROR.
		ctx, cancel := context.WithCancel(cc.Ctx)
		defer cancel()
		flushed := make(chan struct{})
		var failedMu sync.Mutex
		failed := map[*replica.Partition]error{}
		h.Go(func() {
			defer close(flushed)
			flushAll(toFlush, early, func(p *replica.Partition, err error) {
				failedMu.Lock()
				failed[p] = err
				failedMu.Unlock()
				cancel()
			})
		})
		// One deadline for the request, a timer per partition that must
		// wait: a timer's channel fires once, so sharing one would leave
		// every partition after the first that times out waiting forever.
		deadline := time.Now().Add(time.Duration(max(req.TimeoutMillis, 1)) * time.Millisecond)
		for _, w := range waits {
			sp := &resp.Topics[w.topic].Partitions[w.index]
			if sp.ErrorCode != 0 {
				continue
			}
			err := w.p.WaitCommittedUntil(ctx, w.target, w.epoch, deadline)
			if err != nil && ctx.Err() != nil && cc.Ctx.Err() == nil {
				// Some partition's fsync failed: this one's, or another's,
				// whose failure must not cut this wait short.
				<-flushed
				failedMu.Lock()
				ferr := failed[w.p]
				failedMu.Unlock()
				if ferr != nil {
					failWith(w.p, ferr)
					continue
				}
				err = w.p.WaitCommittedUntil(cc.Ctx, w.target, w.epoch, deadline)
			}
			if err != nil {
				sp.ErrorCode, sp.ErrorMessage, sp.BaseOffset = h.Code(err), errMessage(err), -1
				w.p.Logger.Debug().Err(err).Int64("offset", w.target-1).Msg("acks=all not satisfied")
			}
		}
		respond(resp)
	})
}

// produceTopics resolves each topic of req once. From v13 topics are named
// by id (KIP-516): each one that names a topic gets that topic's name
// filled in (Topic is not on the wire at v13, so the response is
// unchanged), and everything after reads names — the transaction
// check, the response's errors, logs, flushes. Nil: no such topic.
func produceTopics(m *replicamgr.Manager, req *kmsg.ProduceRequest) []*replicamgr.Topic {
	byID := req.Version >= 13
	out := make([]*replicamgr.Topic, len(req.Topics))
	for i := range req.Topics {
		rt := &req.Topics[i]
		out[i] = requestTopic(m, byID, rt.Topic, rt.TopicID)
		if byID {
			rt.Topic = ""
			if out[i] != nil {
				rt.Topic = out[i].Name
			}
		}
	}
	return out
}

// parallelAppendMin is the number of partitions from which a request's
// appends run several at once: a request to 1,000 partitions spent 10 ms
// appending one partition after another in the connection's reader, a
// quarter of its time to the response.
const parallelAppendMin = 32

// produceJob is one partition of a produce request: where its response
// goes, the replica that takes it (nil: refused before the append), and
// what the append returned.
type produceJob struct {
	sp  *kmsg.ProduceResponseTopicPartition
	p   *replica.Partition
	lg  *storage.Log
	v   *replica.View
	rec []byte
	w   ackWait // its topic and index are the response's place
	err error
}

// parallelAppends reports whether a request's partitions may be appended
// concurrently: enough of them, and none named twice, whose batches must
// then land in the order the request gives.
func parallelAppends(jobs []produceJob) bool {
	if len(jobs) < parallelAppendMin {
		return false
	}
	seen := make(map[*replica.Partition]bool, len(jobs))
	for _, jb := range jobs {
		if jb.p != nil {
			if seen[jb.p] {
				return false
			}
			seen[jb.p] = true
		}
	}
	return true
}

// ackWait is an acks=all batch waiting for the high watermark.
type ackWait struct {
	p            *replica.Partition
	target       int64 // the high watermark that commits the batch
	epoch        int32 // the leader epoch it was appended at
	topic, index int   // its place in the response
}

// appendUnique appends p to ps unless it is there. A request names each
// partition once, unless the client repeats one; past a few partitions
// the look-up goes through set (made here) rather than a scan, which cost
// a quadratic 500,000 comparisons for a request to 1,000 partitions.
func appendUnique(ps []*replica.Partition, set map[*replica.Partition]bool, p *replica.Partition) ([]*replica.Partition, map[*replica.Partition]bool) {
	const scanMax = 16
	if set == nil && len(ps) < scanMax {
		if slices.Contains(ps, p) {
			return ps, nil
		}
		return append(ps, p), nil
	}
	if set == nil {
		set = make(map[*replica.Partition]bool, 2*len(ps))
		for _, q := range ps {
			set[q] = true
		}
	}
	if set[p] {
		return ps, set
	}
	set[p] = true
	return append(ps, p), set
}

// flushAll makes the partitions durable (replica.FlushAll) and calls onErr
// for each one that failed. A partition whose flush began early (its entry
// in early) waits for that one instead.
func flushAll(ps []*replica.Partition, early map[*replica.Partition]*earlyFlush, onErr func(*replica.Partition, error)) {
	rest := ps
	if len(early) > 0 {
		rest = make([]*replica.Partition, 0, len(ps))
		for _, p := range ps {
			if early[p] == nil {
				rest = append(rest, p)
			}
		}
	}
	for i, err := range replica.FlushAll(rest) {
		if err != nil && onErr != nil {
			onErr(rest[i], err)
		}
	}
	for _, p := range ps {
		if f := early[p]; f != nil {
			<-f.done
			if f.err != nil && onErr != nil {
				onErr(p, f.err)
			}
		}
	}
}

// earlyFlush is one partition's fsync begun as soon as its batch was
// appended (handleProduce). err is set before done closes.
type earlyFlush struct {
	done chan struct{}
	err  error
}

var errFlushNotStarted = errors.New("broker shutting down: flush not started")

// startFlush begins p's flush on one of the node's goroutines.
func startFlush(h Host, p *replica.Partition) *earlyFlush {
	f := &earlyFlush{done: make(chan struct{})}
	if !h.Go(func() {
		defer close(f.done)
		f.err = p.Flush()
	}) {
		f.err = errFlushNotStarted
		close(f.done)
	}
	return f
}

// distinctPartitions reports whether no partition is named twice in jobs:
// a flush begun after a partition's first batch would not cover its
// second.
func distinctPartitions(jobs []produceJob) bool {
	for i := range jobs {
		for j := range i {
			if jobs[i].p != nil && jobs[i].p == jobs[j].p {
				return false
			}
		}
	}
	return true
}

// appendTo validates and appends one partition's batch, filling sp. For
// acks=all it refuses, appending nothing, when the ISR is smaller than
// min.insync.replicas, and returns what to wait for.
func appendTo(met *metrics.Metrics, p *replica.Partition, lg *storage.Log, v *replica.View, records []byte, acks int16, now int64, sp *kmsg.ProduceResponseTopicPartition) (ackWait, error) {
	s := p.Settings()
	if s.AcksAllRequired && acks != -1 {
		return ackWait{}, fmt.Errorf("%w: topic has fjord.produce.acks.all.required=true: produce with acks=all (got acks=%d)", ErrAcksAllRequired, acks)
	}
	if acks == -1 && int32(len(v.ISR)) < s.MinISR {
		return ackWait{}, fmt.Errorf("%w: in-sync replicas %v < min.insync.replicas %d", ErrNotEnoughReplicas, v.ISR, s.MinISR)
	}
	info, err := recordbatch.Validate(records, s.MaxBatchBytes)
	if err != nil {
		return ackWait{}, err
	}
	if info.Control {
		return ackWait{}, fmt.Errorf("%w: control batches are written by transaction coordinators only", storage.ErrInvalidRecord)
	}
	if s.TxnRequired && !info.Transactional {
		return ackWait{}, fmt.Errorf("%w: topic has fjord.transactional.writes.required=true: only transactional producers (a transactional.id) may write to it", storage.ErrInvalidRecord)
	}
	res, v, err := p.AppendAsLeader(records, info, now)
	if err != nil {
		return ackWait{}, err
	}
	if !res.Duplicate {
		met.BytesIn.Add(float64(len(records)))
		met.Produced(p.Topic, len(records), info.Records)
	}
	sp.BaseOffset = res.BaseOffset
	sp.LogAppendTime = res.LogAppendTime
	sp.LogStartOffset = lg.StartOffset()
	return ackWait{p: p, target: res.LastOffset + 1, epoch: v.LeaderEpoch}, nil
}

// loggerOr returns the partition's logger, or the node's for a nil
// partition.
func loggerOr(p *replica.Partition, h Host) *zerolog.Logger {
	if p == nil {
		return h.Log()
	}
	return &p.Logger
}

func checkProduce(h Host, z *api.Authz, kreq kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
	req := kreq.(*kmsg.ProduceRequest)
	code := int16(0)
	if req.TransactionID != nil && !z.Ok(acl.OpWrite, acl.ResourceTransactionalID, *req.TransactionID) {
		code = api.TxnDenied
	}
	var denied []kmsg.ProduceRequestTopic
	if code != 0 {
		denied, req.Topics = req.Topics, []kmsg.ProduceRequestTopic{}
	} else {
		req.Topics, denied = splitTopics(h, z, acl.OpWrite, req.Topics, req.Version >= 13, func(t kmsg.ProduceRequestTopic) (string, [16]byte) { return t.Topic, t.TopicID })
		code = api.TopicDenied
	}
	if len(denied) == 0 {
		return nil, nil
	}
	if req.Acks == 0 {
		// No response to carry the error: close the connection, as Kafka
		// does for an acks=0 produce that fails.
		return &api.Close{Err: fmt.Errorf("broker: acks=0 produce not authorized: %s", kerr.ErrorForCode(code))}, nil
	}
	fill := func(resp *kmsg.ProduceResponse) {
		for _, t := range denied {
			rt := kmsg.NewProduceResponseTopic()
			rt.Topic, rt.TopicID = t.Topic, t.TopicID
			for _, p := range t.Partitions {
				rp := kmsg.NewProduceResponseTopicPartition()
				rp.Partition, rp.ErrorCode = p.Partition, code
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
	}
	if len(req.Topics) == 0 {
		resp := req.ResponseKind().(*kmsg.ProduceResponse)
		fill(resp)
		return resp, nil
	}
	return nil, func(r kmsg.Response) {
		if resp, ok := r.(*kmsg.ProduceResponse); ok {
			fill(resp)
		}
	}
}
