package fetchsession

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

var t0 = time.Unix(1_000_000, 0)

// part is a request partition: topic/partition@fetchOffset.
type part struct {
	topic string
	p     int32
	off   int64
}

func fetchReq(version int16, id, epoch int32, parts []part, forget ...part) *kmsg.FetchRequest {
	req := kmsg.NewPtrFetchRequest()
	req.Version, req.SessionID, req.SessionEpoch = version, id, epoch
	for _, p := range parts {
		i := slices.IndexFunc(req.Topics, func(t kmsg.FetchRequestTopic) bool { return t.Topic == p.topic })
		if i < 0 {
			rt := kmsg.NewFetchRequestTopic()
			rt.Topic, rt.TopicID = p.topic, topicID(p.topic)
			req.Topics = append(req.Topics, rt)
			i = len(req.Topics) - 1
		}
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition, rp.FetchOffset = p.p, p.off
		req.Topics[i].Partitions = append(req.Topics[i].Partitions, rp)
	}
	for _, p := range forget {
		ft := kmsg.NewFetchRequestForgottenTopic()
		ft.Topic, ft.TopicID, ft.Partitions = p.topic, topicID(p.topic), []int32{p.p}
		req.ForgottenTopics = append(req.ForgottenTopics, ft)
	}
	return req
}

func topicID(name string) [16]byte {
	var id [16]byte
	copy(id[:], name)
	id[15] = 1
	return id
}

// answer builds the response a fetch of req gets: hw per partition
// (default 10), records for those listed in data.
func answer(req *kmsg.FetchRequest, hw map[string]int64, data map[string]bool) *kmsg.FetchResponse {
	resp := req.ResponseKind().(*kmsg.FetchResponse)
	for _, rt := range req.Topics {
		st := kmsg.NewFetchResponseTopic()
		st.Topic, st.TopicID = rt.Topic, rt.TopicID
		for _, rp := range rt.Partitions {
			sp := kmsg.NewFetchResponseTopicPartition()
			sp.Partition = rp.Partition
			name := fmt.Sprintf("%s-%d", nameOf(rt), rp.Partition)
			sp.HighWatermark, sp.LastStableOffset, sp.LogStartOffset = 10, 10, 0
			if h, ok := hw[name]; ok {
				sp.HighWatermark, sp.LastStableOffset = h, h
			}
			if data[name] {
				sp.RecordBatches = []byte{1}
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp
}

func nameOf(rt kmsg.FetchRequestTopic) string {
	if rt.Topic != "" {
		return rt.Topic
	}
	return strings.TrimRight(string(rt.TopicID[:15]), "\x00")
}

// names lists "topic-partition@offset" of a request's topics.
func names(req *kmsg.FetchRequest) string {
	var out []string
	for _, rt := range req.Topics {
		for _, rp := range rt.Partitions {
			out = append(out, fmt.Sprintf("%s-%d@%d", nameOf(rt), rp.Partition, rp.FetchOffset))
		}
	}
	return strings.Join(out, " ")
}

func respNames(resp *kmsg.FetchResponse) string {
	var out []string
	for _, rt := range resp.Topics {
		for _, sp := range rt.Partitions {
			out = append(out, fmt.Sprintf("%s-%d", strings.TrimRight(string(rt.TopicID[:15]), "\x00")+rt.Topic, sp.Partition))
		}
	}
	return strings.Join(out, " ")
}

// open creates a session of parts and returns its id.
func open(t *testing.T, c *Cache, version int16, follower bool, now time.Time, parts ...part) int32 {
	t.Helper()
	req := fetchReq(version, 0, 0, parts)
	f, code := c.Begin(req, follower, now)
	if code != 0 || f == nil {
		t.Fatalf("full fetch: code %d, fetch %v", code, f)
	}
	resp := answer(req, nil, nil)
	if code := f.Trim(resp); code != 0 {
		t.Fatalf("trim: %d", code)
	}
	return resp.SessionID
}

func TestSessionLifecycle(t *testing.T) {
	for _, version := range []int16{12, 13} {
		t.Run(fmt.Sprint("v", version), func(t *testing.T) {
			c := New(DefaultConfig())
			id := open(t, c, version, false, t0, part{"a", 0, 5}, part{"a", 1, 7}, part{"b", 0, 0})
			if id == 0 {
				t.Fatal("no session created")
			}
			// Incremental, naming nothing: expanded to the three at
			// their cached offsets; nothing changed, so nothing is sent.
			req := fetchReq(version, id, 1, nil)
			f, code := c.Begin(req, false, t0)
			if code != 0 {
				t.Fatalf("incremental: %d", code)
			}
			if got, want := names(req), "a-0@5 a-1@7 b-0@0"; got != want {
				t.Fatalf("expanded %q, want %q", got, want)
			}
			resp := answer(req, nil, nil)
			if f.Trim(resp); resp.SessionID != id || respNames(resp) != "" {
				t.Fatalf("idle: session %d, sent %q", resp.SessionID, respNames(resp))
			}
			// a-1 moves on, b-0 is forgotten, c-0 joins; a-0's HW moves,
			// a-1 returns records.
			req = fetchReq(version, id, 2, []part{{"a", 1, 9}, {"c", 0, 3}}, part{"b", 0, 0})
			if f, code = c.Begin(req, false, t0); code != 0 {
				t.Fatalf("incremental 2: %d", code)
			}
			if got, want := names(req), "a-0@5 a-1@9 c-0@3"; got != want {
				t.Fatalf("expanded %q, want %q", got, want)
			}
			resp = answer(req, map[string]int64{"a-0": 11}, map[string]bool{"a-1": true})
			f.Trim(resp)
			if got, want := respNames(resp), "a-0 a-1 c-0"; got != want { // c-0 is new: its HW was never sent
				t.Fatalf("sent %q, want %q", got, want)
			}
			// a-1 returned records: it moves to the back of the order.
			req = fetchReq(version, id, 3, nil)
			if f, code = c.Begin(req, false, t0); code != 0 {
				t.Fatalf("incremental 3: %d", code)
			}
			if got, want := names(req), "a-0@5 c-0@3 a-1@9"; got != want {
				t.Fatalf("expanded %q, want %q", got, want)
			}
			resp = answer(req, map[string]int64{"a-0": 11}, nil)
			resp.Topics[0].Partitions[0].ErrorCode = kerr.NotLeaderForPartition.Code
			f.Trim(resp)
			if got := respNames(resp); got != "a-0" {
				t.Fatalf("sent %q, want the errored a-0 only", got)
			}
			// The error ends with the same HW: still sent (Kafka resets the
			// cached HW on an error).
			req = fetchReq(version, id, 4, nil)
			f, _ = c.Begin(req, false, t0)
			resp = answer(req, map[string]int64{"a-0": 11}, nil)
			if f.Trim(resp); respNames(resp) != "a-0" {
				t.Fatalf("after the error: sent %q, want a-0", respNames(resp))
			}
			// Epochs: a replayed epoch, a skipped one, an unknown id.
			for _, tc := range []struct {
				id, epoch int32
				want      int16
			}{
				{id, 4, kerr.InvalidFetchSessionEpoch.Code},
				{id, 6, kerr.InvalidFetchSessionEpoch.Code},
				{id, -2, kerr.InvalidFetchSessionEpoch.Code},
				{id + 1, 5, kerr.FetchSessionIDNotFound.Code},
				{0, 5, kerr.FetchSessionIDNotFound.Code},
			} {
				if _, code := c.Begin(fetchReq(version, tc.id, tc.epoch, nil), false, t0); code != tc.want {
					t.Errorf("session %d epoch %d: code %d, want %d", tc.id, tc.epoch, code, tc.want)
				}
			}
			// The wrong topic-id usage.
			other := int16(12)
			if version == 12 {
				other = 13
			}
			if _, code := c.Begin(fetchReq(other, id, 5, nil), false, t0); code != kerr.FetchSessionTopicIDError.Code {
				t.Errorf("other topic-id usage: code %d", code)
			}
			// FINAL closes it and creates none.
			req = fetchReq(version, id, -1, []part{{"a", 0, 5}})
			if f, code = c.Begin(req, false, t0); f != nil || code != 0 {
				t.Fatalf("final: %v %d", f, code)
			}
			if st := c.Stats(); st.Sessions != 0 || st.Partitions != 0 {
				t.Fatalf("after FINAL: %+v", st)
			}
			if _, code := c.Begin(fetchReq(version, id, 5, nil), false, t0); code != kerr.FetchSessionIDNotFound.Code {
				t.Errorf("closed session: code %d", code)
			}
		})
	}
}

func TestForgettingEverythingEndsTheSession(t *testing.T) {
	c := New(DefaultConfig())
	id := open(t, c, 13, false, t0, part{"a", 0, 0})
	req := fetchReq(13, id, 1, nil, part{"a", 0, 0})
	f, code := c.Begin(req, false, t0)
	if f != nil || code != 0 || len(req.Topics) != 0 {
		t.Fatalf("got %v %d %q", f, code, names(req))
	}
	if c.Stats().Sessions != 0 {
		t.Fatal("session kept")
	}
}

func TestFullFetchReplacesSession(t *testing.T) {
	c := New(DefaultConfig())
	id := open(t, c, 13, true, t0, part{"a", 0, 0}, part{"a", 1, 0})
	req := fetchReq(13, id, 0, []part{{"a", 0, 4}})
	f, _ := c.Begin(req, true, t0)
	resp := answer(req, nil, nil)
	f.Trim(resp)
	if resp.SessionID == 0 || resp.SessionID == id {
		t.Fatalf("new session id %d (old %d)", resp.SessionID, id)
	}
	if st := c.Stats(); st.Sessions != 1 || st.Partitions != 1 {
		t.Fatalf("stats %+v", st)
	}
}

// A second fetch on the session while the first is served makes the
// first's trim fail (Kafka: INVALID_FETCH_SESSION_EPOCH).
func TestConcurrentUseRefused(t *testing.T) {
	c := New(DefaultConfig())
	id := open(t, c, 13, false, t0, part{"a", 0, 0})
	r1 := fetchReq(13, id, 1, nil)
	f1, _ := c.Begin(r1, false, t0)
	r2 := fetchReq(13, id, 2, nil)
	f2, code := c.Begin(r2, false, t0)
	if code != 0 {
		t.Fatalf("second: %d", code)
	}
	if code := f1.Trim(answer(r1, nil, nil)); code != kerr.InvalidFetchSessionEpoch.Code {
		t.Fatalf("stale trim: %d", code)
	}
	if code := f2.Trim(answer(r2, nil, nil)); code != 0 {
		t.Fatalf("current trim: %d", code)
	}
}

// The durable end tag travels with the cached partition: a follower that
// resends a partition without it has it dropped.
func TestCachedPartitionKeepsTags(t *testing.T) {
	c := New(DefaultConfig())
	req := fetchReq(13, 0, 0, []part{{"a", 0, 10}})
	req.Topics[0].Partitions[0].UnknownTags.Set(0x464a, []byte{8})
	f, _ := c.Begin(req, true, t0)
	resp := answer(req, nil, nil)
	f.Trim(resp)
	id := resp.SessionID
	req = fetchReq(13, id, 1, nil)
	c.Begin(req, true, t0)
	if n := req.Topics[0].Partitions[0].UnknownTags.Len(); n != 1 {
		t.Fatalf("expanded partition has %d tags, want the durable end", n)
	}
	req = fetchReq(13, id, 2, []part{{"a", 0, 10}}) // durable again: no tag
	c.Begin(req, true, t0)
	req = fetchReq(13, id, 3, nil)
	c.Begin(req, true, t0)
	if n := req.Topics[0].Partitions[0].UnknownTags.Len(); n != 0 {
		t.Fatalf("expanded partition still has %d tags", n)
	}
}

func TestEviction(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Slots = 2
	ps := func(n int) []part {
		var out []part
		for i := range n {
			out = append(out, part{"t", int32(i), 0})
		}
		return out
	}
	tryOpen := func(c *Cache, follower bool, now time.Time, n int) int32 {
		req := fetchReq(13, 0, 0, ps(n))
		f, _ := c.Begin(req, follower, now)
		resp := answer(req, nil, nil)
		f.Trim(resp)
		return resp.SessionID
	}
	young := t0.Add(time.Second)
	old := t0.Add(cfg.EvictAfter + time.Second)
	for _, tc := range []struct {
		name     string
		existing []bool // follower? of the two sessions in the cache, each of 3 partitions
		follower bool   // the newcomer's
		size     int
		now      time.Time
		touch    bool // the existing sessions were used at now
		want     bool
	}{
		{"young consumers keep their slots against a bigger consumer", []bool{false, false}, false, 5, young, true, false},
		{"a follower displaces a young consumer", []bool{false, true}, true, 1, young, true, true},
		{"a consumer never displaces a young follower", []bool{true, true}, false, 9, young, true, false},
		{"an old session goes for a bigger newcomer", []bool{false, false}, false, 5, old, true, true},
		{"an old session stays for a smaller or equal one", []bool{false, false}, false, 3, old, true, false},
		{"an old follower session goes for a bigger follower", []bool{true, true}, true, 4, old, true, true},
		{"an old follower session stays for a consumer", []bool{true, true}, false, 9, old, true, false},
		{"a stale session goes for anyone", []bool{true, true}, false, 1, old, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := New(cfg)
			for _, f := range tc.existing {
				if tryOpen(c, f, t0, 3) == 0 {
					t.Fatal("setup: no session")
				}
			}
			if tc.touch {
				c.mu.Lock()
				for _, s := range c.mu.sessions {
					s.lastUsed = tc.now
				}
				c.mu.Unlock()
			}
			got := tryOpen(c, tc.follower, tc.now, tc.size) != 0
			st := c.Stats()
			if got != tc.want || st.Sessions != 2 && got || (st.Evictions == 1) != got {
				t.Fatalf("created %v (want %v), stats %+v", got, tc.want, st)
			}
		})
	}
}

func TestBudgets(t *testing.T) {
	cfg := DefaultConfig()
	cfg.MaxSessionPartitions, cfg.MaxPartitions = 3, 5
	c := New(cfg)
	if id := open(t, c, 13, false, t0, part{"a", 0, 0}, part{"a", 1, 0}, part{"a", 2, 0}, part{"a", 3, 0}); id != 0 {
		t.Fatal("a session over MaxSessionPartitions")
	}
	id := open(t, c, 13, false, t0, part{"a", 0, 0}, part{"a", 1, 0})
	id2 := open(t, c, 13, false, t0, part{"b", 0, 0}, part{"b", 1, 0}, part{"b", 2, 0})
	if id == 0 || id2 == 0 {
		t.Fatal("sessions within budget refused")
	}
	// Growing a over the total budget closes it: the client goes back
	// to full fetches.
	if _, code := c.Begin(fetchReq(13, id, 1, []part{{"a", 2, 0}}), false, t0); code != kerr.FetchSessionIDNotFound.Code {
		t.Fatalf("over the total budget: code %d", code)
	}
	if st := c.Stats(); st.Sessions != 1 || st.Partitions != 3 {
		t.Fatalf("stats %+v", st)
	}
	// A huge forgotten list of partitions not in the session is harmless.
	req := fetchReq(13, id2, 1, nil)
	ft := kmsg.NewFetchRequestForgottenTopic()
	ft.TopicID = topicID("zz")
	for i := range 100_000 {
		ft.Partitions = append(ft.Partitions, int32(i))
	}
	req.ForgottenTopics = append(req.ForgottenTopics, ft)
	if _, code := c.Begin(req, false, t0); code != 0 || names(req) != "b-0@0 b-1@0 b-2@0" {
		t.Fatalf("forgotten unknowns: code %d, %q", code, names(req))
	}
}

func TestSessionsOff(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Slots = 0
	c := New(cfg)
	if id := open2(c, part{"a", 0, 0}); id != 0 {
		t.Fatalf("session %d with no slots", id)
	}
	if _, code := c.Begin(fetchReq(13, 7, 1, nil), false, t0); code != kerr.FetchSessionIDNotFound.Code {
		t.Fatalf("incremental with no slots: %d", code)
	}
	// Below v7 there are no sessions whatever the fields say.
	if f, code := c.Begin(fetchReq(6, 7, 1, nil), false, t0); f != nil || code != 0 {
		t.Fatal("v6 used sessions")
	}
}

func open2(c *Cache, parts ...part) int32 {
	req := fetchReq(13, 0, 0, parts)
	f, _ := c.Begin(req, false, t0)
	resp := answer(req, nil, nil)
	f.Trim(resp)
	return resp.SessionID
}

// A partition both named and forgotten is forgotten: Kafka applies the
// forgotten list after the named partitions.
func TestForgottenAfterNamed(t *testing.T) {
	c := New(DefaultConfig())
	id := open(t, c, 13, false, t0, part{"a", 0, 0}, part{"a", 1, 0})
	req := fetchReq(13, id, 1, []part{{"a", 1, 4}, {"b", 0, 0}}, part{"a", 1, 0}, part{"b", 0, 0})
	if _, code := c.Begin(req, false, t0); code != 0 {
		t.Fatalf("code %d", code)
	}
	if got := names(req); got != "a-0@0" {
		t.Fatalf("expanded %q, want a-0 alone", got)
	}
	if st := c.Stats(); st.Partitions != 1 {
		t.Fatalf("stats %+v", st)
	}
}

// TestRandomRequests throws random session fields, partitions, forgotten
// lists and responses at a small cache: nothing panics, the partition
// count stays the sum over sessions, and the budgets hold.
func TestRandomRequests(t *testing.T) {
	cfg := Config{Slots: 4, MaxSessionPartitions: 6, MaxPartitions: 15, EvictAfter: time.Second}
	c := New(cfg)
	rng := rand.New(rand.NewPCG(1, 2))
	var ids []int32
	now := t0
	for range 20_000 {
		now = now.Add(time.Duration(rng.IntN(300)) * time.Millisecond)
		var parts, forget []part
		for range rng.IntN(5) {
			parts = append(parts, part{string(rune('a' + rng.IntN(3))), int32(rng.IntN(4) - 1), rng.Int64N(100)})
		}
		for range rng.IntN(3) {
			forget = append(forget, part{string(rune('a' + rng.IntN(3))), int32(rng.IntN(4) - 1), 0})
		}
		id := int32(rng.IntN(3))
		if len(ids) > 0 && rng.IntN(2) == 0 {
			id = ids[rng.IntN(len(ids))]
		}
		version := int16(7 + rng.IntN(10))
		req := fetchReq(version, id, int32(rng.IntN(5)-1), parts, forget...)
		f, code := c.Begin(req, rng.IntN(2) == 0, now)
		if code != 0 {
			continue
		}
		resp := answer(req, map[string]int64{"a-0": rng.Int64N(3)}, map[string]bool{"b-1": rng.IntN(2) == 0})
		if rng.IntN(10) == 0 && len(resp.Topics) > 0 && len(resp.Topics[0].Partitions) > 0 {
			resp.Topics[0].Partitions[0].ErrorCode = kerr.UnknownTopicOrPartition.Code
		}
		f.Trim(resp)
		if resp.SessionID != 0 && !slices.Contains(ids, resp.SessionID) {
			ids = append(ids, resp.SessionID)
		}
		c.mu.Lock()
		sum := 0
		for _, s := range c.mu.sessions {
			if s.size() != s.order.Len() || s.size() == 0 || s.size() > cfg.MaxSessionPartitions {
				t.Fatalf("session %d: %d parts, %d in order", s.id, s.size(), s.order.Len())
			}
			sum += s.size()
		}
		if sum != c.mu.partitions || sum > cfg.MaxPartitions || len(c.mu.sessions) > cfg.Slots {
			t.Fatalf("partitions %d counted, %d held, %d sessions", c.mu.partitions, sum, len(c.mu.sessions))
		}
		c.mu.Unlock()
	}
	t.Logf("%+v", c.Stats())
}
