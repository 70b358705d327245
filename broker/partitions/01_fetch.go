package partitions

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordlog/fjord/broker/api"
	"github.com/fjordlog/fjord/broker/metrics"
	"github.com/fjordlog/fjord/broker/replica"
	"github.com/fjordlog/fjord/broker/replicamgr"
	"github.com/fjordlog/fjord/storage"

	"github.com/fjordlog/fjord/broker/acl"
)

// Fetch: v4-18
//
// Behaviour:
//   - Reads whole record batches up to the high watermark, located through
//     the sparse index; a partition returns at most PartitionMaxBytes and the
//     response at most MaxBytes, except that the first non-empty partition
//     always returns at least one whole batch (KIP-74), so a record larger
//     than the limits cannot stall a consumer.
//   - Long poll: with fewer than MinBytes available the request waits up to
//     MaxWaitMillis, woken by high-watermark moves on its partitions (no
//     polling loop). The wait runs off the connection's reader goroutine.
//   - Offsets outside [log start, log end] are OFFSET_OUT_OF_RANGE.
//   - Tiered storage (KIP-405): a consumer's offset below the local log
//     start is read from the partition's copy in the remote store
//     (Host.Remote; whole batches of the COPY_FINISHED segment holding
//     it), and LogStartOffset is the remote log start. read_committed
//     too: only segments below the last stable offset are copied, and
//     AbortedTransactions come from the .txnindex objects of the copied
//     segments from the one read on, then the local log's indexes
//     (remoteAbortedIn), as Kafka's RemoteLogManager collects them. A
//     store failure (of the records or their aborts) is
//     KAFKA_STORAGE_ERROR, never records without their aborts. The read
//     runs on the node's remote reader pool (remote_fetch.go): local
//     partitions of the same fetch are answered without waiting for it,
//     and a fetch with nothing else waits up to remote.fetch.max.wait.ms;
//     a full pool is UNKNOWN_SERVER_ERROR for that partition, as in
//     Kafka. A follower's fetch there is never read from the store: it
//     is OFFSET_MOVED_TO_TIERED_STORAGE, and the follower restarts at the
//     copy's end (KIP-405's follower path, broker/tier/follower.go).
//   - Sessions (KIP-227, broker/partitions/fetchsession): a full fetch with
//     epoch 0 gets a session when the cache has room
//     (max.incremental.fetch.session.cache.slots); an incremental one is
//     expanded to every partition of its session (each at the fetch
//     offset, log start and durable end last sent), served as a full
//     fetch would be, and its response trimmed to the partitions with
//     something new. A session's partitions the request does not name are
//     authorized again each time (fetch_sessions.go). Unknown session:
//     FETCH_SESSION_ID_NOT_FOUND; wrong epoch: INVALID_FETCH_SESSION_EPOCH.
//   - read_uncommitted reads up to the high watermark; read_committed
//     (isolation level 1) up to the last stable offset (min of the HW and
//     the first offset of a transaction not yet decided and replicated),
//     with the aborted transactions among the batches returned
//     (AbortedTransactions: producer id and first offset), which the client
//     drops. A log that never saw a transaction costs nothing more.
//   - PreferredReadReplica is always -1 (librdkafka fails to parse anything
//     else from a leader).
//   - Replica fetches (a follower's, ReplicaID or ReplicaState.ID >= 0)
//     read up to the log end rather than the high watermark (this leader's
//     own fsync need not have ended), record the follower's fetch offset
//     as its log end, its durable end (Fjord's DurableEndTag per
//     partition, else the fetch offset: replica.FollowerDurableEnd), which
//     moves the high watermark, and its LogStartOffset (which moves the low
//     watermark DeleteRecords waits for), and wait for appends rather than
//     for the high watermark; a log start moved during the wait
//     (DeleteRecords) answers at once. The answer carries the tag too
//     (flexible versions), telling a Fjord follower it may fetch before its
//     fsync ends (pipelined replication, broker/replica/pipeline.go).
//   - A topic id that names no topic (v13+) is UNKNOWN_TOPIC_ID, decided
//     before authorization as in Kafka: there is no name to authorize.
//   - The debugging consumer (ReplicaID -2) may fetch from a follower too,
//     up to that replica's high watermark: a way to read one broker's copy.
//   - A consumer with a consumer_byte_rate quota has its MaxBytes capped at
//     ten seconds of it; a fetch that would take it over is answered without
//     records, with throttle_time_ms, and its connection muted (the
//     node's quota glue, broker/quota.go, through Host.FetchQuota).
//
// Version notes:
//   - v4: isolation level, last stable offset; v5: log start offset;
//     v7: sessions; v9: current leader epoch (KIP-320); v11: rack, preferred
//     read replica; v12: flexible, diverging epoch; v13: topic ids;
//     v15: replica state; v16: node endpoints (KIP-951); v17: the
//     follower's ReplicaDirectoryId (KIP-853), v18: the follower's
//     HighWatermark (KIP-1166), both tagged fields of a replica's fetch
//     that consumers never send; the response is v16's. Both are read and
//     ignored: Fjord keeps one log directory per node, and its followers
//     learn the high watermark from every response. KIP-1166's early
//     answer to a replica behind on the high watermark is the KRaft
//     leader's (KAFKA-14145), and the CONTROLLER listener stays at v12.
func fetchEntry(h Host) api.Entry {
	return api.Entry{
		Key: 1, Client: api.Versions(4, 18), Handle: bindTo(h, handleFetch),
		Controller: api.Versions(12, 12),
		Rule:       api.Needs("READ on TOPIC; from a follower: CLUSTER_ACTION on CLUSTER", 1, bindCheck(h, checkFetch)),
		// On the CONTROLLER listener Fetch reads the metadata log (SCRAM
		// credentials, ACLs, configs): brokers and controllers only.
		CtlRule: &api.Rule{Need: "on the CONTROLLER listener (the metadata log): CLUSTER_ACTION on CLUSTER", Blast: 5, Check: api.ClusterTop(acl.OpClusterAction)},
	}
}

func handleFetch(h Host, cc *api.Conn, kreq kmsg.Request, respond func(kmsg.Response)) {
	req := kreq.(*kmsg.FetchRequest)
	sess, code := h.FetchSessions().Begin(req, isFollowerFetch(req), time.Now()) // expands an incremental fetch
	if code != 0 {
		respond(sessionError(req, code))
		return
	}
	respond = countFetched(h.Metrics(), respond, ReplicaOf(req) >= 0)
	respond = h.FetchQuota(cc, req, respond)         // runs before countFetched
	respond = withSession(h, cc, req, sess, respond) // runs first: trims to what changed (fetch_sessions.go)
	replicaID := ReplicaOf(req)
	resp, n, stop := fetchOnce(h, req)
	wait := remoteWait(h, resp, n, req)
	if stop || n >= int(max(req.MinBytes, 1)) || wait <= 0 {
		respond(resp)
		return
	}
	parts := fetchPartitions(h.Replicas(), req)
	var starts []int64
	if replicaID >= 0 {
		starts = logStarts(parts)
	}
	h.Go(func() {
		ch := make(chan struct{}, 1)
		watch, unwatch := (*replica.Partition).Watch, (*replica.Partition).Unwatch
		if replicaID >= 0 {
			watch, unwatch = (*replica.Partition).WatchAppend, (*replica.Partition).UnwatchAppend
		}
		for _, p := range parts {
			watch(p, ch)
		}
		defer func() {
			for _, p := range parts {
				unwatch(p, ch)
			}
		}()
		timer := time.NewTimer(wait)
		defer timer.Stop()
		for {
			// Registered before reading again, so no wake-up is lost.
			resp.Release() // the previous, insufficient read
			resp, n, stop = fetchOnce(h, req)
			// A follower parked here hears at once of a log start moved
			// meanwhile (DeleteRecords), so it follows and reports it
			// without waiting for new records.
			if stop || n >= int(max(req.MinBytes, 1)) || (starts != nil && !slices.Equal(starts, logStarts(parts))) {
				respond(resp)
				return
			}
			stopForwarding := forwardDone(resp.remoteWaits, ch)
			select {
			case <-ch:
				stopForwarding()
				for _, p := range parts {
					watch(p, ch)
				}
			case <-timer.C:
				stopForwarding()
				respond(resp)
				return
			case <-cc.Ctx.Done():
				stopForwarding()
				resp.Release()
				respond(nil)
				return
			}
		}
	})
}

// logStarts are the log start offsets of parts (-1 where no log is open).
func logStarts(parts []*replica.Partition) []int64 {
	out := make([]int64, len(parts))
	for i, p := range parts {
		out[i] = -1
		if lg := p.Log(); lg != nil {
			out[i] = lg.StartOffset()
		}
	}
	return out
}

// fetchPartitions resolves the request's partitions that exist.
func fetchPartitions(m *replicamgr.Manager, req *kmsg.FetchRequest) []*replica.Partition {
	var out []*replica.Partition
	for _, rt := range req.Topics {
		t := fetchTopic(m, req, &rt)
		if t == nil {
			continue
		}
		for _, rp := range rt.Partitions {
			if t != nil && rp.Partition >= 0 && int(rp.Partition) < len(t.Parts) && t.Parts[rp.Partition] != nil {
				out = append(out, t.Parts[rp.Partition])
			}
		}
	}
	return out
}

func fetchTopic(m *replicamgr.Manager, req *kmsg.FetchRequest, rt *kmsg.FetchRequestTopic) *replicamgr.Topic {
	return requestTopic(m, req.Version >= 13, rt.Topic, rt.TopicID)
}

// fetchOnce builds a response from what is readable now. It returns the
// response, the record bytes in it, and whether an error means the client
// should hear back at once rather than wait.
func fetchOnce(h Host, req *kmsg.FetchRequest) (*PooledFetch, int, bool) {
	replicaID := ReplicaOf(req)
	replicas, met := h.Replicas(), h.Metrics()
	var throttle LeaderThrottle // a follower's fetch only
	if replicaID >= 0 {
		throttle = h.LeaderThrottle()
	}
	resp := req.ResponseKind().(*kmsg.FetchResponse)
	if replicaID >= 0 {
		replica.MarkCountsDurableEnds(resp)
	}
	pooled := &PooledFetch{FetchResponse: resp}
	budget := int(req.MaxBytes)
	if req.MaxBytes <= 0 {
		budget = 1 << 30
	}
	total := 0
	stop := false
	// Sized up front: a follower's fetch names every partition it follows
	// here (the 50 of __consumer_offsets among them), and growing the
	// slice one append at a time was half the allocations of a node at
	// replication factor 3.
	resp.Topics = make([]kmsg.FetchResponseTopic, 0, len(req.Topics))
	for _, rt := range req.Topics {
		st := kmsg.NewFetchResponseTopic()
		st.Topic, st.TopicID = rt.Topic, rt.TopicID
		st.Partitions = make([]kmsg.FetchResponseTopicPartition, 0, len(rt.Partitions))
		t := fetchTopic(replicas, req, &rt)
		for _, rp := range rt.Partitions {
			sp := kmsg.NewFetchResponseTopicPartition()
			sp.Partition = rp.Partition
			sp.HighWatermark, sp.LastStableOffset, sp.LogStartOffset = -1, -1, -1
			sp.PreferredReadReplica = -1
			sp.RecordBatches = []byte{} // never null: librdkafka rejects a -1 size
			switch {
			case t == nil && req.Version >= 13:
				sp.ErrorCode = kerr.UnknownTopicID.Code
			default:
				op := replica.ConsumerRead
				switch {
				case replicaID == debugReplicaID:
					op = replica.LocalRead
				case replicaID >= 0:
					op = replica.ReplicaRead
				}
				p, lg, v, code := t.Serving(rp.Partition, op)
				if code == 0 {
					code = v.CheckEpoch(rp.CurrentLeaderEpoch)
				}
				if code == 0 && replicaID >= 0 && !v.HasReplica(replicaID) {
					code = kerr.NotLeaderForPartition.Code
				}
				if code != 0 {
					sp.ErrorCode = code
					break
				}
				limit := p.HW()
				var throttleRate int64 // > 0: a throttled follower's fetch (LeaderThrottle)
				if replicaID >= 0 {
					p.FollowerFetched(replicaID, v.LeaderEpoch, rp.FetchOffset, replica.FollowerDurableEnd(&rp), rp.LogStartOffset)
					limit = lg.EndOffset()
					var withhold bool
					if throttleRate, withhold = throttle.check(t, rp.Partition, replicaID, v, time.Now()); withhold {
						limit = rp.FetchOffset // nothing now: the quota is spent
					}
				}
				hw := p.HW()
				lso := lastStable(lg, hw)
				if replicaID < 0 && req.IsolationLevel == 1 {
					limit = min(limit, lso)
				}
				sp.HighWatermark, sp.LastStableOffset, sp.LogStartOffset = hw, lso, logStart(h, t, rp.Partition, lg)
				// The response budget binds every partition; only the first
				// one with data may exceed it, by one whole batch (KIP-74).
				budgetLimit := min(int(rp.PartitionMaxBytes), budget-total)
				if budgetLimit <= 0 && total > 0 {
					break
				}
				data, err := lg.Read(rp.FetchOffset, max(budgetLimit, 1), limit, getReadBuf())
				var remoteAborted []storage.AbortedTxn // read from the copy: its aborted transactions
				fromRemote := false                    // err, if any, is the store's (logged once per change there)
				if errors.Is(err, storage.ErrOffsetOutOfRange) && replicaID < 0 && rp.FetchOffset < lg.StartOffset() {
					// Below the local log: a tiered partition's copy may
					// hold it. Every copied record is below the last
					// stable offset (only such segments are copied), so
					// read_committed reads it too, with the aborts.
					// The read may run on the remote reader pool
					// (remote_fetch.go): then nothing yet, and the
					// request knows what to wait for.
					rd, ra, ok, wait, rerr := remoteFetch(h, t, rp.Partition, lg, rp.FetchOffset, max(budgetLimit, 1), req.IsolationLevel == 1)
					switch {
					case wait != nil:
						pooled.remoteWaits = append(pooled.remoteWaits, wait)
						data, err = nil, nil
					case ok || rerr != nil:
						data, remoteAborted, err, fromRemote = rd, ra, rerr, true
						if err == nil && req.IsolationLevel == 1 && len(data) > 0 && remoteAborted == nil {
							remoteAborted = []storage.AbortedTxn{}
						}
					}
				}
				if errors.Is(err, storage.ErrOffsetOutOfRange) && replicaID >= 0 && rp.FetchOffset < lg.StartOffset() {
					err = movedToTiered(h, t, rp.Partition, rp.FetchOffset, err) // never read remotely for a follower
				}
				if err != nil {
					sp.ErrorCode = h.Code(err)
					switch {
					case errors.Is(err, storage.ErrCorruptLog):
						h.ReadFailed(p, err)
					case fromRemote:
						p.Logger.Debug().Err(err).Int64("offset", rp.FetchOffset).Msg("remote read failed")
					case !errors.Is(err, storage.ErrOffsetOutOfRange) && sp.ErrorCode != kerr.NotLeaderForPartition.Code:
						p.Logger.Error().Err(err).Int64("offset", rp.FetchOffset).Msg("fetch read failed")
					}
					break
				}
				if total > 0 && len(data) > budgetLimit {
					putReadBuf(data) // an oversized batch waits for its own turn first
					data = nil
				}
				if data != nil {
					sp.RecordBatches = data
					pooled.bufs = append(pooled.bufs, data)
					switch {
					case remoteAborted != nil:
						sp.AbortedTransactions = toAborted(remoteAborted)
					case replicaID < 0 && req.IsolationLevel == 1 && len(data) > 0:
						sp.AbortedTransactions = abortedIn(lg, rp.FetchOffset, data)
					}
				}
				total += len(data)
				if throttleRate > 0 {
					throttle.Quotas.Leader.Record(time.Now(), throttleRate, len(data))
				}
			}
			if sp.ErrorCode != 0 {
				stop = true
				met.PartitionError(1, sp.ErrorCode)
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return pooled, total, stop
}

// lastStable is the partition's last stable offset for high watermark hw.
func lastStable(lg *storage.Log, hw int64) int64 { return lg.LastStableOffset(hw) }

// abortedIn lists the aborted transactions a read_committed client must
// drop from data, the batches read from fetchOffset on.
func abortedIn(lg *storage.Log, fetchOffset int64, data []byte) []kmsg.FetchResponseTopicPartitionAbortedTransaction {
	return toAborted(lg.AbortedIn(fetchOffset, data))
}

func toAborted(as []storage.AbortedTxn) []kmsg.FetchResponseTopicPartitionAbortedTransaction {
	var out []kmsg.FetchResponseTopicPartitionAbortedTransaction
	for _, a := range as {
		at := kmsg.NewFetchResponseTopicPartitionAbortedTransaction()
		at.ProducerID, at.FirstOffset = a.ProducerID, a.FirstOffset
		out = append(out, at)
	}
	return out
}

// debugReplicaID is Kafka's debugging consumer: its fetches are served by
// any replica, leader or follower, up to that replica's own high
// watermark, so a tool (or a test) can read what one broker holds.
const debugReplicaID = -2

// ReplicaOf returns the follower id of a replica fetch, -1 for a
// consumer's, -2 for the debugging consumer's.
func ReplicaOf(req *kmsg.FetchRequest) int32 {
	if req.Version >= 15 {
		return req.ReplicaState.ID
	}
	return req.ReplicaID
}

// PooledFetch is a fetch response whose record bytes live in pooled read
// buffers, returned once the front end has encoded the response
// (protocol's Releaser). Fetch answers with one; the node's wrappers of
// its respond (Host.FetchQuota) see it.
type PooledFetch struct {
	*kmsg.FetchResponse
	bufs [][]byte
	// remoteWaits are the remote reads under way for partitions answered
	// without records (remote_fetch.go).
	remoteWaits []<-chan struct{}
}

// SizeHint is the record bytes plus a generous allowance for the rest.
func (f *PooledFetch) SizeHint() int {
	n := 256
	for _, t := range f.Topics {
		n += 64 + len(t.Topic)
		for _, p := range t.Partitions {
			n += 96 + len(p.RecordBatches)
		}
	}
	return n
}

// Release returns the read buffers to their pool.
func (f *PooledFetch) Release() {
	for _, b := range f.bufs {
		putReadBuf(b)
	}
	f.bufs = nil
}

// readBufs recycles partition read buffers (typically 1 MiB each).
var readBufs sync.Pool

// getReadBuf returns a buffer to read into, or nil.
func getReadBuf() []byte {
	if b, ok := readBufs.Get().(*[]byte); ok {
		return *b
	}
	return nil
}

func putReadBuf(b []byte) {
	if cap(b) < 64<<10 || cap(b) > 16<<20 {
		return
	}
	b = b[:0]
	readBufs.Put(&b)
}

// countFetched wraps respond to count the record bytes actually sent.
// A follower's bytes are not the topic's BytesOutPerSec (as in Kafka).
func countFetched(met *metrics.Metrics, respond func(kmsg.Response), follower bool) func(kmsg.Response) {
	return func(r kmsg.Response) {
		if fr, ok := r.(*PooledFetch); ok {
			n := 0
			for _, t := range fr.Topics {
				tn := 0
				for _, p := range t.Partitions {
					tn += len(p.RecordBatches)
				}
				n += tn
				if !follower && tn > 0 {
					met.Fetched(t.Topic, t.TopicID, tn)
				}
			}
			met.BytesOut.Add(float64(n))
		}
		respond(r)
	}
}

func checkFetch(h Host, z *api.Authz, kreq kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
	req := kreq.(*kmsg.FetchRequest)
	var denied []kmsg.FetchRequestTopic
	if isFollowerFetch(req) {
		if z.Cluster(acl.OpClusterAction) {
			return nil, nil
		}
		denied, req.Topics = req.Topics, []kmsg.FetchRequestTopic{}
	} else {
		req.Topics, denied = splitTopics(h, z, acl.OpRead, req.Topics, req.Version >= 13, func(t kmsg.FetchRequestTopic) (string, [16]byte) { return t.Topic, t.TopicID })
	}
	if len(denied) == 0 {
		return nil, nil
	}
	return nil, func(r kmsg.Response) {
		resp, ok := r.(*kmsg.FetchResponse)
		if pf, pooled := r.(*PooledFetch); pooled {
			resp, ok = pf.FetchResponse, true
		}
		if !ok {
			return
		}
		for _, t := range denied {
			rt := kmsg.NewFetchResponseTopic()
			rt.Topic, rt.TopicID = t.Topic, t.TopicID
			for _, p := range t.Partitions {
				rp := kmsg.NewFetchResponseTopicPartition()
				rp.Partition, rp.ErrorCode = p.Partition, api.TopicDenied
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
	}
}

// isFollowerFetch reports whether a Fetch comes from a replica (a broker),
// not a consumer.
func isFollowerFetch(r *kmsg.FetchRequest) bool {
	return r.ReplicaID >= 0 || (r.Version >= 15 && r.ReplicaState.ID >= 0)
}

// logStart is the partition's log start offset as clients see it: the
// remote log start when a tiered copy reaches below the local log.
func logStart(h Host, t *replicamgr.Topic, partition int32, lg *storage.Log) int64 {
	start := lg.StartOffset()
	if r := h.Remote(); r != nil {
		if rs := r.Start(t.ID, partition); rs >= 0 && rs < start {
			return rs
		}
	}
	return start
}

// remoteRead reads a consumer's fetch below the local log from the
// partition's tiered copy; ok is false when it has none there. ctx bounds
// it (remoteReadTimeout), on the remote reader pool or, without one, the
// request's goroutine (remote_fetch.go).
func remoteRead(ctx context.Context, h Host, t *replicamgr.Topic, partition int32, offset int64, maxBytes int) ([]byte, bool, error) {
	r := h.Remote()
	if r == nil {
		return nil, false, nil
	}
	data, ok, err := r.Read(ctx, t.Name, t.ID, partition, offset, maxBytes)
	if err != nil {
		return nil, ok, fmt.Errorf("%w: %s-%d at %d: %w", ErrRemoteStorage, t.Name, partition, offset, err)
	}
	return data, ok, nil
}

// remoteAbortedIn lists the aborted transactions a read_committed client
// must drop from data, batches read from the tiered copy from fetchOffset
// on: those in the copied segments' .txnindex objects from the one read
// on, and those of the local log, which holds the rest (a transaction
// begun in the copy may end in a segment not copied yet). The local log
// is searched first: a local segment that retention deletes meanwhile was
// copied before, so the remote search, which reads the image after,
// finds it. A transaction in both is listed once. Never nil when err is
// nil (an empty slice: none), so the caller knows it was asked.
func remoteAbortedIn(ctx context.Context, h Host, t *replicamgr.Topic, partition int32, lg *storage.Log, fetchOffset int64, data []byte) ([]storage.AbortedTxn, error) {
	end := storage.ReadEnd(fetchOffset, data)
	local := lg.AbortedTransactions(fetchOffset, end)
	copied, err := h.Remote().Aborted(ctx, t.Name, t.ID, partition, fetchOffset, end)
	if err != nil {
		return nil, fmt.Errorf("%w: aborted transactions of %s-%d from %d: %w", ErrRemoteStorage, t.Name, partition, fetchOffset, err)
	}
	out := make([]storage.AbortedTxn, 0, len(copied)+len(local))
	type txnKey struct{ pid, first int64 }
	seen := make(map[txnKey]bool, len(copied))
	for _, a := range append(copied, local...) {
		if k := (txnKey{a.ProducerID, a.FirstOffset}); !seen[k] {
			seen[k] = true
			out = append(out, a)
		}
	}
	return out, nil
}

// remoteReadTimeout bounds one fetch's read from the remote store,
// waiting for a reader thread included.
const remoteReadTimeout = 10 * time.Second
