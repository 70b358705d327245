package partitions

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordlog/fjord/broker/acl"
	"github.com/fjordlog/fjord/broker/api"
	"github.com/fjordlog/fjord/broker/replica"
	"github.com/fjordlog/fjord/broker/replicamgr"
	"github.com/fjordlog/fjord/storage"
)

// ListOffsets: v0-11
//
// Behaviour:
//   - Timestamp -1: the high watermark (latest); -2 and -4: the log start
//     offset (earliest, earliest local; for a tiered topic -2 is the remote
//     log start when its copy reaches below the local log); -3: the batch with the largest
//     timestamp (KIP-734). Any other timestamp: the first record at or after
//     it, found through the time index; none gives offset -1. For a
//     tiered topic whose copy reaches below the local log, the copied
//     segments are searched first (their MaxTimestamp, then the
//     .timeindex, .index and .log objects), as Kafka's
//     RemoteLogManager.findOffsetByTimestamp; a store failure is
//     KAFKA_STORAGE_ERROR. That search runs on the remote reader pool,
//     off the connection's reader, and the request is answered when it
//     ends; a full pool is UNKNOWN_SERVER_ERROR for the partition, as a
//     consumer's remote read refused there (remote_list_offsets.go).
//   - -5 (LATEST_TIERED, KIP-1005) and -6 (EARLIEST_PENDING_UPLOAD,
//     KIP-1023) ask about tiered storage: for a tiered topic on a node
//     with a remote store, the highest offset copied (-1 when none) and
//     the offset after it (the local log start when none is copied), with
//     their leader epochs; otherwise offset -1, timestamp -1 and leader
//     epoch -1 with no error, what Kafka answers for a topic without
//     remote storage (UnifiedLog.fetchOffsetByTimestamp).
//   - A negative timestamp is accepted only from the version that
//     introduced it (-3 v7, -4 v8, -5 v9, -6 v11; -1 and -2 always),
//     and no other negative one at all: UNSUPPORTED_VERSION for the
//     partition, before anything else is checked, as Kafka's
//     ReplicaManager.isListOffsetsTimestampUnsupported. (Kafka 4 serves
//     v1 up; its table starts -1 and -2 at v1, Fjord's v0 keeps them.)
//   - Only offsets below the high watermark are reported; with isolation
//     level 1 (read_committed, v2+) below the last stable offset, and -1
//     is the last stable offset.
//   - CurrentLeaderEpoch (v4+) above ours is UNKNOWN_LEADER_EPOCH.
//   - A consumer's request (ReplicaID -1) to a leader whose high watermark
//     has not yet reached the log end its epoch began at is
//     OFFSET_NOT_AVAILABLE (retriable), as Kafka's
//     Partition.fetchOffsetForTimestamp: the previous leader may have
//     acknowledged records this one's high watermark does not cover yet
//     (its followers learn the last high watermark with the next fetch),
//     so latest would name an end before them.
//
// Version notes:
//   - v0: MaxNumOffsets and a list of old-style offsets (kafka-python 2.0
//     still sends it; Kafka 4 dropped it); v1: single offset and timestamp;
//     v2: isolation level; v4: leader epochs; v6: flexible; v7: max
//     timestamp; v8: earliest local (KIP-405); v9: latest tiered
//     (KIP-1005); v10: TimeoutMillis (KIP-1075), the bound on a remote
//     storage lookup: the pool's own 10 s bound applies, so it is ignored;
//     v11: earliest pending upload (KIP-1023)
func listOffsetsEntry(h Host) api.Entry {
	return api.Entry{
		Key: 2, Client: api.Versions(0, 11), Handle: bindTo(h, handleListOffsets),
		Rule: api.Needs("DESCRIBE on TOPIC", 0, checkListOffsets),
	}
}

func handleListOffsets(h Host, cc *api.Conn, kreq kmsg.Request, respond func(kmsg.Response)) {
	req := kreq.(*kmsg.ListOffsetsRequest)
	resp := req.ResponseKind().(*kmsg.ListOffsetsResponse)
	replicas := h.Replicas()
	var lookups remoteLookups
	for _, rt := range req.Topics {
		st := kmsg.NewListOffsetsResponseTopic()
		st.Topic = rt.Topic
		t := replicas.Topic(rt.Topic)
		for _, rp := range rt.Partitions {
			sp := kmsg.NewListOffsetsResponseTopicPartition()
			sp.Partition = rp.Partition
			sp.Offset, sp.Timestamp, sp.LeaderEpoch = -1, -1, 0
			switch {
			case !timestampSupported(rp.Timestamp, req.Version):
				sp.ErrorCode = kerr.UnsupportedVersion.Code
			default:
				p, lg, v, code := t.Serving(rp.Partition, replica.ConsumerRead)
				if code == 0 {
					code = v.CheckEpoch(rp.CurrentLeaderEpoch)
				}
				if code != 0 {
					sp.ErrorCode = code
					break
				}
				sp.LeaderEpoch = v.LeaderEpoch
				limit := p.HW()
				if req.ReplicaID == -1 && v.Phase == replica.Leading && limit < v.EpochStart {
					// A new leader's high watermark may lag what the
					// previous one acknowledged: latest would name an
					// end before records acknowledged already. Kafka's
					// rule: retriable, until it catches up.
					sp.ErrorCode = kerr.OffsetNotAvailable.Code
					break
				}
				if req.Version >= 2 && req.IsolationLevel == 1 {
					limit = lastStable(lg, limit)
				}
				if rp.Timestamp == latestTiered || rp.Timestamp == earliestPendingUpload {
					sp.Offset, sp.LeaderEpoch = tieredOffset(h, t, rp.Partition, p.Settings().Storage.Tier.Enabled, lg, rp.Timestamp)
					break
				}
				off, ts, err := listOffset(lg, limit, rp.Timestamp)
				if p.Settings().Storage.Tier.Enabled && needsRemote(h, t, rp.Partition, lg, rp.Timestamp) {
					// Below the local log: the copy is searched first, off
					// this goroutine (remote_list_offsets.go); the local
					// answer stands when it holds no such record.
					lookups.list = append(lookups.list, &remoteLookup{topic: len(resp.Topics), part: len(st.Partitions),
						t: t, p: p, partition: rp.Partition, ts: rp.Timestamp, maxNumOffsets: rp.MaxNumOffsets, off: off, rts: ts, err: err})
					break
				}
				if err == nil && rp.Timestamp == -2 { // -4 is the local log start (KIP-405)
					off = logStart(h, t, rp.Partition, lg) // a tiered copy's start, when below
				}
				answerOffset(h, p, &sp, req.Version, rp.MaxNumOffsets, rp.Timestamp, off, ts, err)
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	lookups.run(h, func() {
		for _, l := range lookups.list {
			sp := &resp.Topics[l.topic].Partitions[l.part]
			answerOffset(h, l.p, sp, req.Version, l.maxNumOffsets, l.ts, l.off, l.rts, l.err)
		}
		respond(resp)
	})
}

// The negative timestamps of ListOffsets that name an offset rather than
// a time.
const (
	latestTiered          = -5 // KIP-1005
	earliestPendingUpload = -6 // KIP-1023
)

// timestampSupported reports whether a ListOffsets of version v may carry
// timestamp ts: any time at or after the epoch, and each special negative
// one from the version that introduced it.
func timestampSupported(ts int64, v int16) bool {
	if ts >= 0 {
		return true
	}
	var since int16
	switch ts {
	case -1, -2:
		since = 0
	case -3:
		since = 7
	case -4:
		since = 8
	case latestTiered:
		since = 9
	case earliestPendingUpload:
		since = 11
	default:
		return false
	}
	return v >= since
}

func listOffset(lg *storage.Log, hw, ts int64) (offset, timestamp int64, err error) {
	switch ts {
	case -1:
		return hw, -1, nil
	case -2, -4:
		return lg.StartOffset(), -1, nil
	case -3:
		off, mts, ok, err := lg.MaxTimestamp()
		if err != nil || !ok || off >= hw {
			return -1, -1, err
		}
		return off, mts, nil
	}
	off, rts, ok, err := lg.OffsetForTimestamp(ts, hw)
	if err != nil || !ok {
		return -1, -1, err
	}
	return off, rts, nil
}

func checkListOffsets(z *api.Authz, kreq kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
	req := kreq.(*kmsg.ListOffsetsRequest)
	var denied []kmsg.ListOffsetsRequestTopic
	req.Topics, denied = api.Split(z, acl.OpDescribe, req.Topics, func(t kmsg.ListOffsetsRequestTopic) string { return t.Topic })
	if len(denied) == 0 {
		return nil, nil
	}
	return nil, func(r kmsg.Response) {
		resp := r.(*kmsg.ListOffsetsResponse)
		for _, t := range denied {
			rt := kmsg.NewListOffsetsResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewListOffsetsResponseTopicPartition()
				rp.Partition, rp.ErrorCode = p.Partition, api.TopicDenied
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
	}
}

// tieredOffset answers ListOffsets -5 and -6 (see the file's header).
func tieredOffset(h Host, t *replicamgr.Topic, partition int32, tiered bool, lg *storage.Log, ts int64) (offset int64, epoch int32) {
	r := h.Remote()
	if !tiered || r == nil {
		return -1, -1 // no remote storage: nothing tiered, nothing to upload
	}
	copied, copiedEpoch := r.CopiedEnd(t.ID, partition)
	if ts == latestTiered {
		return copied, copiedEpoch
	}
	next := copied + 1
	if copied < 0 {
		next = lg.StartOffset()
	}
	epoch = -1
	if es := lg.EpochsIn(next, next); len(es) > 0 {
		epoch = es[0].Epoch
	}
	return next, epoch
}
