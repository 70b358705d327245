package replica

import (
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordlog/fjord/broker/partitions/fetchsession"
)

// followerReq is a fetcher's request naming n partitions of topic t, each
// at offset end with durable end durable[i] (default: end).
func followerReq(n int, end int64, durable map[int]int64) *kmsg.FetchRequest {
	req := kmsg.NewPtrFetchRequest()
	req.Version = 17
	req.ReplicaState.ID = 2
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic, rt.TopicID = "t", [16]byte{1}
	for i := range n {
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition, rp.FetchOffset, rp.LogStartOffset, rp.PartitionMaxBytes = int32(i), end, 0, 1<<20
		d, ok := durable[i]
		if !ok {
			d = end
		}
		PutDurableEnd(&rp, d)
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	return req
}

// leaderAnswer is a leader's response to a fetch of req: every partition
// at high watermark hw, and (count) what the leader counted as each
// one's durable end.
func leaderAnswer(req *kmsg.FetchRequest, hw int64, count bool) (*kmsg.FetchResponse, map[int32]int64) {
	resp := req.ResponseKind().(*kmsg.FetchResponse)
	resp.Version = req.Version
	var counted map[int32]int64
	if count {
		counted = map[int32]int64{}
	}
	for i := range req.Topics {
		rt := &req.Topics[i]
		st := kmsg.NewFetchResponseTopic()
		st.Topic, st.TopicID = rt.Topic, rt.TopicID
		for j := range rt.Partitions {
			rp := &rt.Partitions[j]
			if count {
				counted[rp.Partition] = FollowerDurableEnd(rp)
			}
			sp := kmsg.NewFetchResponseTopicPartition()
			sp.Partition, sp.HighWatermark, sp.LastStableOffset, sp.LogStartOffset = rp.Partition, hw, hw, 0
			sp.RecordBatches = []byte{}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp, counted
}

// roundTrip sends a follower's request through its session and the
// leader's cache, over the wire format, and returns the request's
// partition count, what the leader counted, and the response as read.
func roundTrip(t testing.TB, s *followerSession, c *fetchsession.Cache, req *kmsg.FetchRequest, hw int64) (int, map[int32]int64, *kmsg.FetchResponse) {
	r := s.prepare(req)
	sent := 0
	for _, rt := range req.Topics {
		sent += len(rt.Partitions)
	}
	onWire := kmsg.NewPtrFetchRequest()
	onWire.Version = req.Version
	if err := onWire.ReadFrom(req.AppendTo(nil)); err != nil {
		t.Fatal(err)
	}
	f, code := c.Begin(onWire, true, time.Unix(0, 0))
	if code != 0 {
		s.failed(code)
		return sent, nil, nil
	}
	resp, counted := leaderAnswer(onWire, hw, true)
	if code := f.Trim(resp); code != 0 {
		t.Fatalf("trim: %d", code)
	}
	got := kmsg.NewPtrFetchResponse()
	got.Version = req.Version
	if err := got.ReadFrom(resp.AppendTo(nil)); err != nil {
		t.Fatal(err)
	}
	s.answered(r, got)
	return sent, counted, got
}

func TestFollowerSession(t *testing.T) {
	c := fetchsession.New(fetchsession.DefaultConfig())
	var s followerSession
	n, counted, resp := roundTrip(t, &s, c, followerReq(3, 10, nil), 10)
	if n != 3 || s.id == 0 || s.id != resp.SessionID || len(counted) != 3 {
		t.Fatalf("full fetch: sent %d, session %d", n, s.id)
	}
	// Idle: nothing sent, nothing answered, every durable end counted.
	n, counted, resp = roundTrip(t, &s, c, followerReq(3, 10, nil), 10)
	if n != 0 || len(resp.Topics) != 0 || len(counted) != 3 || counted[1] != 10 {
		t.Fatalf("idle: sent %d, answered %d topics, counted %v", n, len(resp.Topics), counted)
	}
	// Pipelining: appended to 20, partition 1's fsync still running.
	n, counted, _ = roundTrip(t, &s, c, followerReq(3, 20, map[int]int64{1: 12}), 10)
	if n != 3 || counted[1] != 12 || counted[0] != 20 {
		t.Fatalf("appended: sent %d, counted %v", n, counted)
	}
	// The fsync ends: the durable end that moved is sent, alone.
	n, counted, resp = roundTrip(t, &s, c, followerReq(3, 20, nil), 20)
	if n != 1 || counted[1] != 20 {
		t.Fatalf("fsynced: sent %d, counted %v", n, counted)
	}
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 3 {
		t.Fatalf("a moved high watermark is answered for every partition: %+v", resp.Topics)
	}
	// A partition no longer fetched here is forgotten; the session goes on.
	req := followerReq(3, 20, nil)
	req.Topics[0].Partitions = req.Topics[0].Partitions[:2]
	n, counted, _ = roundTrip(t, &s, c, req, 20)
	if n != 0 || len(counted) != 2 || len(s.sent) != 2 {
		t.Fatalf("forgotten: sent %d, counted %v, session holds %d", n, counted, len(s.sent))
	}
	// The leader lost the session (restarted): a full fetch follows.
	c = fetchsession.New(fetchsession.DefaultConfig())
	roundTrip(t, &s, c, followerReq(2, 20, nil), 20)
	if s.id != 0 {
		t.Fatalf("after FETCH_SESSION_ID_NOT_FOUND: session %d", s.id)
	}
	if n, _, _ = roundTrip(t, &s, c, followerReq(2, 20, nil), 20); n != 2 || s.id == 0 {
		t.Fatalf("full fetch again: sent %d, session %d", n, s.id)
	}
	// A request without an answer: the next fetch is full, naming the
	// old session so the leader closes it.
	old := s.id
	s.failed(0)
	req = followerReq(2, 20, nil)
	n, _, _ = roundTrip(t, &s, c, req, 20)
	if req.SessionID != old || req.SessionEpoch != 0 || n != 2 || s.id == old {
		t.Fatalf("after a failure: request session %d epoch %d, sent %d, new session %d", req.SessionID, req.SessionEpoch, n, s.id)
	}
	if st := c.Stats(); st.Sessions != 1 {
		t.Fatalf("the old session was not closed: %+v", st)
	}
	s.failed(kerr.InvalidFetchSessionEpoch.Code)
	if !s.full {
		t.Fatal("INVALID_FETCH_SESSION_EPOCH: no full fetch next")
	}
}

// BenchmarkIdleFollowerFetch is one idle replica fetch round of 1,000
// partitions on the wire, with and without a session: the follower's
// request built and encoded, the leader's decode, session expansion, a
// response naming every partition (the leader's reads of its logs are
// left out: they are the same either way), trimming and encoding, the
// follower's decode. It reports the bytes of each request and response.
func BenchmarkIdleFollowerFetch(b *testing.B) {
	const parts = 1000
	for _, withSession := range []bool{false, true} {
		b.Run(fmt.Sprintf("session=%v", withSession), func(b *testing.B) {
			c := fetchsession.New(fetchsession.DefaultConfig())
			var s followerSession
			if withSession {
				roundTrip(b, &s, c, followerReq(parts, 1000, nil), 1000)
			}
			b.ReportAllocs()
			var reqBytes, respBytes int
			cpu0 := cpuTime()
			for range b.N {
				req := followerReq(parts, 1000, nil)
				var r sessionRound
				if withSession {
					r = s.prepare(req)
				} else {
					req.SessionID, req.SessionEpoch = 0, -1
				}
				wire := req.AppendTo(nil)
				reqBytes = len(wire)
				onWire := kmsg.NewPtrFetchRequest()
				onWire.Version = req.Version
				if err := onWire.ReadFrom(wire); err != nil {
					b.Fatal(err)
				}
				f, code := c.Begin(onWire, true, time.Unix(0, 0))
				if code != 0 {
					b.Fatalf("begin: %d", code)
				}
				resp, _ := leaderAnswer(onWire, 1000, false)
				f.Trim(resp)
				out := resp.AppendTo(nil)
				respBytes = len(out)
				got := kmsg.NewPtrFetchResponse()
				got.Version = req.Version
				if err := got.ReadFrom(out); err != nil {
					b.Fatal(err)
				}
				if withSession {
					s.answered(r, got)
				}
			}
			// CPU time, not wall time: the shared machine's load skews the latter.
			b.ReportMetric(float64(cpuTime()-cpu0)/float64(b.N), "cpu-ns/op")
			b.ReportMetric(float64(reqBytes), "req-bytes")
			b.ReportMetric(float64(respBytes), "resp-bytes")
		})
	}
}

// cpuTime is the process's user and system CPU time so far, in ns.
func cpuTime() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}
