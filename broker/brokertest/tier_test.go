package brokertest

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordlog/fjord/broker"
	"github.com/fjordlog/fjord/broker/config"
	"github.com/fjordlog/fjord/broker/tier"
	"github.com/fjordlog/fjord/controller"
	"github.com/fjordlog/fjord/storage/recordbatch"
	"github.com/fjordlog/fjord/storage/remote"
)

// Tiered storage on three nodes (RF 3) with a MemStore as the bucket:
// segments of 1 KiB roll as a franz-go producer writes; the leader copies
// the sealed ones, every broker's image shows them COPY_FINISHED, and
// every replica deletes local segments down to local.retention.bytes but
// never one the store does not hold. Then the store fails mid-upload and
// the leader is stopped: the next leader cleans up the attempt it left
// and copies on. No acknowledged record is lost: those below each local
// log start are decoded from the store's objects.
func TestTieredStorage(t *testing.T) {
	store := remote.NewMemStore()
	c, err := Start(Options{Nodes: 3, Dir: t.TempDir(), RemoteStore: store, RemoteTaskInterval: 100 * time.Millisecond,
		Configure: func(_ int32, cfg *config.Config) {
			cfg.RetentionCheckInterval = 100
			cfg.MinInsyncReplicas = 2
			cfg.ReplicaLagTimeMaxMs = 2000
		}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	const topic = "tiered"
	adm := kadm.NewClient(producer(t, c, topic))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	res, err := adm.CreateTopic(ctx, 1, 3, map[string]*string{
		"segment.bytes": kadm.StringPtr("1024"), "remote.storage.enable": kadm.StringPtr("true"),
		"local.retention.bytes": kadm.StringPtr("2048"), "retention.ms": kadm.StringPtr("-1"),
	}, topic)
	if err != nil || res.Err != nil {
		t.Fatalf("create: %v %v", err, res.Err)
	}
	waitTopic(t, c, topic, 1)
	cl := producer(t, c, topic)
	var acked []string
	send := func(n int) {
		t.Helper()
		for i := 0; i < n; i++ {
			var recs []*kgo.Record
			for j := 0; j < 4; j++ {
				recs = append(recs, &kgo.Record{Value: []byte(fmt.Sprintf("v-%06d-%s", len(acked)+len(recs), strings.Repeat("x", 60)))})
			}
			if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
				t.Fatalf("produce: %v", err)
			}
			for _, r := range recs {
				acked = append(acked, string(r.Value))
			}
		}
	}
	live := []int32{1, 2, 3}
	// check reads every live replica; on each, the local log start is
	// never above what that broker's image says the store holds.
	check := func() map[int32]broker.ReplicaState {
		t.Helper()
		out := map[int32]broker.ReplicaState{}
		for _, id := range live {
			rs, err := c.Broker(id).Replica(topic, 0)
			if err != nil {
				t.Fatal(err)
			}
			if copied := tier.CopiedEnd(rs.Remote); rs.LogStart > copied+1 {
				t.Fatalf("broker %d deleted local offsets [%d, %d) but the store holds up to %d", id, copied+1, rs.LogStart, copied)
			}
			out[id] = rs
		}
		return out
	}
	send(50) // 200 records in 4-record batches (compressed: about 32 records a segment)
	start := time.Now()
	eventually(t, 60*time.Second, "segments copied and local logs trimmed on every broker", func() bool {
		for _, rs := range check() {
			if tier.CopiedEnd(rs.Remote) < int64(len(acked))-40 || rs.LogStart == 0 || rs.LocalBytes > 2048+2*1024 {
				return false
			}
		}
		return true
	})
	states := check()
	t.Logf("copied and trimmed in %v: %d objects; local bytes %v", time.Since(start).Round(time.Millisecond), store.Len(),
		slices.Collect(maps.Values(localBytes(states))))
	checkNoLoss(t, store, topic, states, acked, 0)
	// A franz-go consumer from the start reads the copy in the store
	// below the local log start (ListOffsets earliest is the remote log
	// start), then the local log.
	if got := consumeValues(t, c, topic, len(acked)); !slices.Equal(got, acked) {
		t.Fatalf("consumed %d records, want the %d acknowledged (first %q)", len(got), len(acked), got[:min(1, len(got))])
	}

	// ListOffsets LATEST_TIERED (-5) and EARLIEST_PENDING_UPLOAD (-6) on the
	// leader: the copied end and the offset after it (read around the
	// request: a last segment may still be copied meanwhile), and earliest
	// (-2): the remote log start.
	leaderID := tieredLeaderOf(states)
	lcl, err := kgo.NewClient(kgo.SeedBrokers(c.Addr(leaderID)))
	if err != nil {
		t.Fatal(err)
	}
	defer lcl.Close()
	for _, ts := range []int64{-5, -6, -2} {
		before := tier.CopiedEnd(check()[leaderID].Remote)
		req := kmsg.NewPtrListOffsetsRequest()
		rt := kmsg.NewListOffsetsRequestTopic()
		rt.Topic = topic
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Timestamp = ts
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		kresp, err := lcl.SeedBrokers()[0].Request(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		after := tier.CopiedEnd(check()[leaderID].Remote)
		got := kresp.(*kmsg.ListOffsetsResponse).Topics[0].Partitions[0]
		lo, hi := before, after
		switch ts {
		case -6:
			lo, hi = before+1, after+1
		case -2:
			lo, hi = 0, 0
		}
		if got.ErrorCode != 0 || got.Offset < lo || got.Offset > hi || (ts != -2 && got.LeaderEpoch < 0) {
			t.Fatalf("ListOffsets %d on the leader: offset %d epoch %d code %d; want [%d, %d]", ts, got.Offset, got.LeaderEpoch, got.ErrorCode, lo, hi)
		}
	}

	// The store fails: the leader's next attempt stops after COPY_STARTED
	// (or its clean-up after DELETE_STARTED). The leader is stopped; the
	// store comes back; the next leader finishes what is left.
	leader := tieredLeaderOf(states)
	store.SetFault(fmt.Errorf("%w: injected", remote.ErrUnavailable))
	send(10)
	var stuck controller.RemoteSegmentMeta
	eventually(t, 30*time.Second, "an attempt stuck by the failing store", func() bool {
		for _, s := range check()[leader].Remote {
			if s.State == controller.RemoteCopyStarted || s.State == controller.RemoteDeleteStarted {
				stuck = s
				return true
			}
		}
		return false
	})
	if err := c.Stop(leader); err != nil {
		t.Fatal(err)
	}
	live = slices.DeleteFunc(live, func(id int32) bool { return id == leader })
	store.SetFault(nil)
	send(10)
	defer func() {
		if t.Failed() {
			for id, rs := range check() {
				t.Logf("broker %d: leader %t start %d end %d hw %d", id, rs.Leader, rs.LogStart, rs.LogEnd, rs.HighWater)
				for _, s := range rs.Remote {
					t.Logf("  %x [%d, %d] %s by %d@%d", s.SegmentID[:4], s.BaseOffset, s.EndOffset, s.State, s.Broker, s.LeaderEpoch)
				}
			}
			t.Logf("stuck: %x [%d, %d] %s", stuck.SegmentID[:4], stuck.BaseOffset, stuck.EndOffset, stuck.State)
		}
	}()
	eventually(t, 60*time.Second, "the next leader cleaned up the stuck attempt and copied on", func() bool {
		for _, rs := range check() {
			if slices.ContainsFunc(rs.Remote, func(s controller.RemoteSegmentMeta) bool { return s.SegmentID == stuck.SegmentID }) {
				return false
			}
			if tier.CopiedEnd(rs.Remote) < max(stuck.EndOffset, int64(len(acked))-40) {
				return false
			}
		}
		return true
	})
	states = check()
	for _, key := range storeKeys(t, store) {
		if strings.Contains(key, tier.ObjectKey("", topic, stuck.TopicID, 0, stuck.BaseOffset, stuck.SegmentID, "")) {
			t.Fatalf("object %s of the stuck attempt left", key)
		}
	}
	checkNoLoss(t, store, topic, states, acked, 0)

	// retention.bytes bounds the whole log: remote segments go oldest
	// first (DELETE_STARTED, objects, DELETE_FINISHED) until the rest is
	// under it, the newest copy always kept.
	before := states[live[0]].Remote
	if rs, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Name: "retention.bytes", Value: kadm.StringPtr("3000")}}, topic); err != nil || rs[0].Err != nil {
		t.Fatalf("alter: %v %+v", err, rs)
	}
	eventually(t, 30*time.Second, "remote segments past retention.bytes deleted", func() bool {
		for _, rs := range check() {
			var remoteBytes int64
			for _, s := range rs.Remote {
				if s.State != controller.RemoteCopyFinished {
					return false
				}
				remoteBytes += s.SizeBytes
			}
			if len(rs.Remote) == 0 || rs.Remote[0].BaseOffset == 0 || (len(rs.Remote) > 1 && remoteBytes-rs.Remote[0].SizeBytes >= 3000) {
				return false
			}
		}
		return true
	})
	states = check()
	keys := strings.Join(storeKeys(t, store), "\n")
	for _, s := range before {
		if !slices.ContainsFunc(states[live[0]].Remote, func(r controller.RemoteSegmentMeta) bool { return r.SegmentID == s.SegmentID }) &&
			strings.Contains(keys, "-"+base64.RawURLEncoding.EncodeToString(s.SegmentID[:])+".") {
			t.Fatalf("objects of expired segment %d left", s.BaseOffset)
		}
	}
	// The first segment still copied: one being deleted (DELETE_STARTED)
	// may have lost its objects already.
	remoteStart := int64(-1)
	for _, s := range states[live[0]].Remote {
		if s.State == controller.RemoteCopyFinished {
			remoteStart = s.BaseOffset
			break
		}
	}
	if remoteStart < 0 {
		t.Fatalf("no copied segment left: %+v", states[live[0]].Remote)
	}
	t.Logf("retention.bytes=3000: remote log starts at %d; %d remote segments", remoteStart, len(states[live[0]].Remote))
	checkNoLoss(t, store, topic, states, acked, remoteStart)

	// Deleting the topic deletes its objects.
	topicID := stuck.TopicID
	if dr, err := adm.DeleteTopic(ctx, topic); err != nil || dr.Err != nil {
		t.Fatalf("delete: %v %v", err, dr.Err)
	}
	eventually(t, 30*time.Second, "the deleted topic's objects deleted", func() bool {
		for _, key := range storeKeys(t, store) {
			if strings.HasPrefix(key, tier.TopicDir(topic, topicID)+"/") {
				return false
			}
		}
		return true
	})
}

func localBytes(states map[int32]broker.ReplicaState) map[int32]int64 {
	out := map[int32]int64{}
	for id, rs := range states {
		out[id] = rs.LocalBytes
	}
	return out
}

func tieredLeaderOf(states map[int32]broker.ReplicaState) int32 {
	for id, rs := range states {
		if rs.Leader {
			return id
		}
	}
	return -1
}

func storeKeys(t *testing.T, store remote.Store) []string {
	t.Helper()
	objs, err := store.List(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, o := range objs {
		keys = append(keys, o.Key)
	}
	return keys
}

// checkNoLoss: on every replica, the records from offset from on (those
// below its local log start decoded from the store's COPY_FINISHED .log
// objects its image lists, the rest read from the local log) are exactly
// the acknowledged ones, in order.
func checkNoLoss(t *testing.T, store remote.Store, topic string, states map[int32]broker.ReplicaState, acked []string, from int64) {
	t.Helper()
	for id, rs := range states {
		byOffset := map[int64]string{}
		from := from
		// Remote retention may delete the oldest copied segments after
		// states was read: a missing object is retention's only while
		// every segment below it is missing too, and its records are then
		// no longer the store's to keep.
		prefix := true
	segments:
		for _, s := range rs.Remote {
			if s.State != controller.RemoteCopyFinished {
				continue
			}
			for _, suffix := range []string{"log", "index", "timeindex", "snapshot", "leader-epoch-checkpoint"} {
				r, err := store.Get(context.Background(), tier.ObjectKey("", topic, s.TopicID, 0, s.BaseOffset, s.SegmentID, suffix), 0, -1)
				if errors.Is(err, remote.ErrNotFound) && prefix {
					t.Logf("broker %d: segment [%d, %d] deleted by retention since it was read", id, s.BaseOffset, s.EndOffset)
					from = max(from, s.EndOffset+1)
					continue segments
				}
				if err != nil {
					t.Fatalf("broker %d: segment %d: its %s: %v", id, s.BaseOffset, suffix, err)
				}
				r.Close()
			}
			prefix = false
			r, err := store.Get(context.Background(), tier.ObjectKey("", topic, s.TopicID, 0, s.BaseOffset, s.SegmentID, "log"), 0, -1)
			if err != nil {
				t.Fatalf("broker %d: segment %d: %v", id, s.BaseOffset, err)
			}
			b, err := io.ReadAll(r)
			r.Close()
			if err != nil {
				t.Fatal(err)
			}
			for len(b) > 0 {
				info, err := recordbatch.ParseHeader(b)
				if err != nil || info.Bytes > len(b) {
					t.Fatalf("broker %d: segment %d: %v", id, s.BaseOffset, errors.Join(err, errors.New("bad batch")))
				}
				base := recordbatch.BaseOffset(b)
				recordbatch.EachRecord(b[:info.Bytes], info, func(r recordbatch.Record) bool {
					byOffset[base+int64(r.OffsetDelta)] = string(r.Value)
					return true
				})
				b = b[info.Bytes:]
			}
		}
		for i, v := range rs.Values {
			byOffset[rs.LogStart+int64(i)] = string(v)
		}
		for i, want := range acked[from:] {
			if got, ok := byOffset[from+int64(i)]; !ok || got != want {
				t.Fatalf("broker %d: offset %d: %q (found %t), want %q (local log from %d)", id, from+int64(i), got, ok, want, rs.LogStart)
			}
		}
	}
}

// A backlog of sealed segments is copied in one go, not one segment per
// remote.log.manager.task.interval.ms: 30 segments written at once to a
// node whose manager runs every 3 s are all copied within a few intervals
// (one per interval would take 90 s; the bound is 12 s for a loaded
// test machine), so a partition's upload rate keeps
// up with its producers and local disk stays near local.retention.bytes.
func TestTierCopiesBacklogInOneGo(t *testing.T) {
	c, err := Start(Options{Nodes: 1, Dir: t.TempDir(), RemoteStore: remote.NewMemStore(), RemoteTaskInterval: 3 * time.Second,
		Configure: func(_ int32, cfg *config.Config) { cfg.RetentionCheckInterval = 100 }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	const topic = "tier-backlog"
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cl := producer(t, c, topic, kgo.ProducerBatchCompression(kgo.NoCompression()))
	res, err := kadm.NewClient(cl).CreateTopic(ctx, 1, 1, map[string]*string{
		"segment.bytes": kadm.StringPtr("1024"), "remote.storage.enable": kadm.StringPtr("true"),
		"local.retention.bytes": kadm.StringPtr("2048"), "retention.ms": kadm.StringPtr("-1"),
	}, topic)
	if err != nil || res.Err != nil {
		t.Fatalf("create: %v %v", err, res.Err)
	}
	waitTopic(t, c, topic, 1)
	for i := range 30 * 4 { // about 4 records of 200 bytes a segment
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte(fmt.Sprintf("v-%04d-%s", i, strings.Repeat("x", 200)))}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	written := time.Now()
	var rs replicaView
	eventually(t, 12*time.Second, "every sealed segment copied and trimmed locally", func() bool {
		rs = viewOf(c, 1, topic)
		return rs.ok && rs.LogStart > 0 && tier.CopiedEnd(rs.Remote) >= rs.LogStart-1 && rs.LocalBytes <= 2048+2*1024
	})
	t.Logf("%d segments copied, local log [%d, %d) of %d bytes, %v after the last write",
		len(rs.Remote), rs.LogStart, rs.LogEnd, rs.LocalBytes, time.Since(written).Round(time.Millisecond))
	if len(rs.Remote) < 20 {
		t.Fatalf("only %d segments copied", len(rs.Remote))
	}
}
