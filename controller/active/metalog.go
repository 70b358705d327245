package active

import (
	"context"
	"encoding/binary"
	"time"

	"github.com/fjordlog/fjord/controller"
	"github.com/fjordlog/fjord/controller/quorum"
	"github.com/fjordlog/fjord/storage/recordbatch"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// A broker-only node follows the metadata log without being a raft member
// (Kafka's brokers do the same with KIP-595's Fetch; the follower is
// broker/ctllink's Follower): it fetches committed entries from any voter, on
// the voter's CONTROLLER listener, served here, as the
// partition __cluster_metadata-0 whose offsets are log indexes, and a
// snapshot of the image (FetchSnapshot) when it starts or has fallen behind
// what the voter keeps. Any voter may answer: it ships only what it has
// applied, and applied entries are committed.
//
// Each record of a shipped batch is one log index: its value is the
// entry's metadata record bytes, or null for an entry without a record.

// MetadataTopic names the metadata log in these requests, as in Kafka: the
// follower fetches its partition 0.
const MetadataTopic = "__cluster_metadata"

// maxShipped bounds the entries in one Fetch response.
const maxShipped = 4096

// serveMetadataFetch answers a follower's Fetch of the metadata log from
// this voter's applied entries, waiting up to MaxWaitMillis for new ones.
func (c *Controller) serveMetadataFetch(ctx context.Context, req *kmsg.FetchRequest) *kmsg.FetchResponse {
	resp := req.ResponseKind().(*kmsg.FetchResponse)
	st := kmsg.NewFetchResponseTopic()
	st.Topic = MetadataTopic
	sp := kmsg.NewFetchResponseTopicPartition()
	sp.HighWatermark, sp.LastStableOffset, sp.LogStartOffset = -1, -1, -1
	sp.RecordBatches = []byte{}
	if len(req.Topics) != 1 || req.Topics[0].Topic != MetadataTopic || len(req.Topics[0].Partitions) != 1 ||
		req.Topics[0].Partitions[0].Partition != 0 {
		sp.ErrorCode = kerr.UnknownTopicOrPartition.Code
	} else {
		from := uint64(max(req.Topics[0].Partitions[0].FetchOffset, 1))
		wait := time.Duration(min(max(req.MaxWaitMillis, 0), 10000)) * time.Millisecond
		wctx, cancel := context.WithTimeout(ctx, wait)
		stop := context.AfterFunc(c.ctx, cancel) // Close ends the wait
		c.node.WaitFor(wctx, func(img *controller.Image) bool { return img.Version() >= from })
		stop()
		cancel()
		entries, ok := c.node.Since(from, maxShipped)
		sp.HighWatermark = int64(c.node.Image().Version()) + 1
		if !ok {
			sp.ErrorCode = kerr.OffsetOutOfRange.Code
		} else if len(entries) > 0 {
			kvs := make([]recordbatch.KV, len(entries))
			for i, e := range entries {
				kvs[i].Value = e
			}
			batch := recordbatch.Build(kvs, time.Now().UnixMilli())
			binary.BigEndian.PutUint64(batch[0:8], from) // base offset: outside the CRC
			sp.RecordBatches = batch
		}
	}
	sp.CurrentLeader.LeaderID = c.Leader()
	st.Partitions = append(st.Partitions, sp)
	resp.Topics = append(resp.Topics, st)
	return resp
}

// serveMetadataSnapshot answers FetchSnapshot with this voter's whole
// current image, in one piece.
func (c *Controller) serveMetadataSnapshot(req *kmsg.FetchSnapshotRequest) *kmsg.FetchSnapshotResponse {
	resp := req.ResponseKind().(*kmsg.FetchSnapshotResponse)
	st := kmsg.NewFetchSnapshotResponseTopic()
	st.Topic = MetadataTopic
	sp := kmsg.NewFetchSnapshotResponseTopicPartition()
	sp.CurrentLeader.LeaderID = c.Leader()
	img := c.node.Image()
	data, err := quorum.EncodeImage(img)
	if err != nil {
		c.log.Error().Err(err).Msg("encoding the metadata image for a follower")
		sp.ErrorCode = kerr.UnknownServerError.Code
	} else {
		sp.SnapshotID.EndOffset = int64(img.Version())
		sp.Size, sp.Bytes = int64(len(data)), data
	}
	st.Partitions = append(st.Partitions, sp)
	resp.Topics = append(resp.Topics, st)
	return resp
}
