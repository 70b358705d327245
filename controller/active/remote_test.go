package active

import (
	"testing"
	"testing/synctest"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/fjordlog/fjord/controller"
	"github.com/fjordlog/fjord/protocol/fjordmsg"
)

// A leader's RemoteLogSegment proposals are decided and committed; a
// follower's is refused with NOT_LEADER_OR_FOLLOWER and commits nothing;
// bytes that are not a remote segment record are INVALID_REQUEST.
func TestRemoteLogSegment(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newFakeMember()
		cfg := testConfig()
		cfg.DefaultReplication = 2
		c := start(t, cfg, m)
		epochs := map[int32]int64{1: join(t, c, 1), 2: join(t, c, 2)}
		if tp := createTopic(t, c, "t"); tp.ErrorCode != 0 {
			t.Fatalf("create: %+v", tp)
		}
		tp := m.Image().Topic("t")
		pt := tp.Partitions[0]
		follower := pt.Replicas[0]
		if follower == pt.Leader {
			follower = pt.Replicas[1]
		}
		seg := controller.RemoteSegment{TopicID: tp.ID, SegmentID: [16]byte{7}, BaseOffset: 0, EndOffset: 9, MaxTimestamp: -1,
			LeaderEpochs: []controller.EpochStart{{Epoch: pt.LeaderEpoch, StartOffset: 0}}, LeaderEpoch: pt.LeaderEpoch}
		send := func(broker int32, rec []byte) int16 {
			t.Helper()
			req := &fjordmsg.RemoteLogSegmentRequest{BrokerID: broker, BrokerEpoch: epochs[broker], Record: rec}
			return ask(c, t.Context(), req).(*fjordmsg.RemoteLogSegmentResponse).ErrorCode
		}
		seg.Broker = follower
		if code := send(follower, controller.Encode(controller.NewRecord(seg))); code != kerr.NotLeaderForPartition.Code {
			t.Fatalf("follower's proposal: code %d", code)
		}
		seg.Broker = pt.Leader
		if code := send(follower, controller.Encode(controller.NewRecord(seg))); code != kerr.InvalidRequest.Code {
			t.Fatalf("a record naming another broker: code %d", code)
		}
		if code := send(pt.Leader, []byte{1, 2, 3}); code != kerr.InvalidRequest.Code {
			t.Fatalf("garbage: code %d", code)
		}
		if n := len(m.Image().RemoteSegments(controller.TopicPartition{TopicID: tp.ID})); n != 0 {
			t.Fatalf("%d segments after refusals", n)
		}
		if code := send(pt.Leader, controller.Encode(controller.NewRecord(seg))); code != 0 {
			t.Fatalf("leader's COPY_STARTED: code %d", code)
		}
		fin := controller.RemoteSegmentStateChange{TopicID: tp.ID, SegmentID: seg.SegmentID, State: controller.RemoteCopyFinished,
			Broker: pt.Leader, LeaderEpoch: pt.LeaderEpoch}
		if code := send(pt.Leader, controller.Encode(controller.NewRecord(fin))); code != 0 {
			t.Fatalf("leader's COPY_FINISHED: code %d", code)
		}
		if end := m.Image().RemoteCopiedEnd(controller.TopicPartition{TopicID: tp.ID}); end != 9 {
			t.Fatalf("copied end %d, want 9", end)
		}
	})
}
