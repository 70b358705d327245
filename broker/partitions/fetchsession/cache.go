// Package fetchsession is the broker side of KIP-227 incremental fetch
// sessions: a cache of what each session's client last asked and was last
// told, per partition, so that a client may send only the partitions whose
// fetch parameters changed and hear back only about the partitions that
// have something new.
//
// A fetch goes through it in three steps, "expand -> fetch -> trim":
//
//  1. Begin checks the request's session id and epoch against the cache
//     and, for an incremental fetch, applies its changes (the partitions it
//     names are added or replaced, ForgottenTopics removed) and rewrites the
//     request to name every partition of the session, each with the fetch
//     parameters last sent for it. The fetch path then runs unchanged: a
//     follower's fetch still reports, for every partition, its fetch offset
//     and durable end (the cached DurableEndTag) to the leader's replica
//     state.
//  2. The caller fetches (long poll included) from the expanded request.
//  3. Fetch.Trim drops from the response the partitions with nothing new
//     for the client since the last response of the session (no records,
//     and the same high watermark, last stable offset, log start, no
//     error, no diverging epoch), recording what it sent. A full fetch
//     with epoch 0 creates the session here, once the response is known.
//
// The rules are Kafka's (FetchSession.scala, FetchManager.newContext): a
// full fetch (epoch 0 or -1) closes the session it names; epoch 0 asks for
// a new one (a random non-zero id, epoch 1 next) when the cache has room
// or can evict; -1 (FINAL) asks for none. An incremental fetch must name a
// session in the cache (else FETCH_SESSION_ID_NOT_FOUND) at the epoch it
// expects (else INVALID_FETCH_SESSION_EPOCH), and use topic ids if and
// only if the session does (else FETCH_SESSION_TOPIC_ID_ERROR). A session
// that its changes leave empty is closed and the fetch is sessionless.
// Sessions are keyed by id, not by connection, as in Kafka: a client that
// reconnects keeps its session, and a dead client's session ages out.
//
// Budgets: at most Config.Slots sessions (max.incremental.fetch.session.cache.slots),
// at most Config.MaxSessionPartitions partitions in one session and
// Config.MaxPartitions in all of them (a cached partition is a few hundred
// bytes). A request that would go over a partition budget gets no session
// (a full fetch is served sessionless, an incremental one closes its
// session with FETCH_SESSION_ID_NOT_FOUND, so the client falls back to
// full fetches): the budget costs the client bytes, never correctness.
package fetchsession

import (
	"container/list"
	"math"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Config is the cache's budget.
type Config struct {
	// Slots is the most sessions held at once; 0 turns sessions off
	// (every full fetch is sessionless).
	Slots int
	// MaxSessionPartitions bounds one session's partitions (> 0).
	MaxSessionPartitions int
	// MaxPartitions bounds the partitions of all sessions together (> 0).
	MaxPartitions int
	// EvictAfter is how long a session must be unused to be evicted by
	// anyone, and how old one must be to be evicted by a more valuable
	// newcomer (Kafka's fetch session eviction time, 2 minutes).
	EvictAfter time.Duration
}

// DefaultConfig is Kafka's defaults plus Fjord's partition budgets.
func DefaultConfig() Config {
	return Config{Slots: 1000, MaxSessionPartitions: 50_000, MaxPartitions: 1_000_000, EvictAfter: 2 * time.Minute}
}

// Stats is a snapshot of the cache for the node's metrics.
type Stats struct {
	Sessions   int    // sessions cached
	Partitions int    // partitions cached over all sessions
	Evictions  uint64 // sessions evicted to make room, since start
}

// Cache holds the node's fetch sessions. Safe for concurrent use: every
// method takes mu, held only for map and list work (never I/O).
type Cache struct {
	cfg Config
	mu  struct {
		sync.Mutex
		sessions map[int32]*session
		// partitions is the sum of len(s.parts) over sessions.
		// Invariant: partitions <= cfg.MaxPartitions.
		partitions int
		evictions  uint64
	}
	// newID draws a candidate session id in [1, MaxInt32]; tests replace it.
	newID func() int32
}

// New returns an empty cache with budget cfg.
func New(cfg Config) *Cache {
	if cfg.MaxSessionPartitions <= 0 {
		cfg.MaxSessionPartitions = DefaultConfig().MaxSessionPartitions
	}
	if cfg.MaxPartitions <= 0 {
		cfg.MaxPartitions = DefaultConfig().MaxPartitions
	}
	c := &Cache{cfg: cfg, newID: func() int32 { return rand.Int32N(math.MaxInt32) + 1 }}
	c.mu.sessions = map[int32]*session{}
	return c
}

// Stats reads the cache's counts.
func (c *Cache) Stats() Stats {
	c.mu.Lock()
	defer c.mu.Unlock()
	return Stats{Sessions: len(c.mu.sessions), Partitions: c.mu.partitions, Evictions: c.mu.evictions}
}

// key names a partition of a session: by topic id in a session that uses
// ids (Fetch v13+), else by name (id zero).
type key struct {
	topic     string
	id        [16]byte
	partition int32
}

// entry is one partition of a session.
type entry struct {
	k key
	// req is the partition as the client last sent it (fetch offset, log
	// start, max bytes, leader epochs, tagged fields such as Fjord's
	// DurableEndTag); the expanded request carries it verbatim.
	req kmsg.FetchRequestTopicPartition
	// hw, lso and logStart are what the session last told the client; hw
	// is -1 after an error, so the partition is sent once the error ends.
	hw, lso, logStart int64
}

// session is one client's fetch session.
//
// Invariants: parts and order hold the same entries (order's values are
// *entry); epoch is the epoch the next incremental fetch must carry, in
// [1, MaxInt32]; usesIDs never changes.
type session struct {
	id       int32
	epoch    int32
	follower bool // privileged in eviction: a replica's session
	usesIDs  bool
	created  time.Time
	lastUsed time.Time
	parts    map[key]*list.Element
	// order is the partitions in the order the expanded request names
	// them: a partition that returned records moves to the back, so the
	// response budget reaches the others first next time (as Kafka).
	order *list.List
}

func (s *session) size() int { return len(s.parts) }

// nextEpoch is the epoch after e (Kafka's FetchMetadata.nextEpoch).
func nextEpoch(e int32) int32 {
	if e == math.MaxInt32 {
		return 1
	}
	return e + 1
}

// Fetch is one request's use of the cache, from Begin to Trim; nil for
// a sessionless fetch (Trim then does nothing).
type Fetch struct {
	c    *Cache
	full bool // a full fetch asking for a new session
	// for a full fetch: the request's properties the new session takes
	follower bool
	usesIDs  bool
	parts    []kmsg.FetchRequestTopic // the full request's topics, as sent
	now      time.Time
	// for an incremental fetch: its session, at the epoch Begin set
	s     *session
	epoch int32
}

// Incremental reports whether f is an incremental fetch: its request
// names partitions the client did not send this time.
func (f *Fetch) Incremental() bool { return f != nil && f.s != nil }

// Begin applies req's session fields to the cache. It returns the fetch's
// session handle (nil: sessionless) or a top-level error code for the
// response (then the request must not be served). An incremental fetch
// has req.Topics replaced by the session's partitions (ForgottenTopics
// applied); the slices are new, the caller may keep or drop them.
// follower says whether req is a replica's (privileged in eviction).
func (c *Cache) Begin(req *kmsg.FetchRequest, follower bool, now time.Time) (*Fetch, int16) {
	if req.Version < 7 {
		return nil, 0 // no sessions before v7
	}
	usesIDs := req.Version >= 13
	if req.SessionEpoch == 0 || req.SessionEpoch == -1 {
		c.mu.Lock()
		if req.SessionID != 0 {
			if s := c.mu.sessions[req.SessionID]; s != nil {
				c.removeLocked(s)
			}
		}
		c.mu.Unlock()
		if req.SessionEpoch == -1 || c.cfg.Slots <= 0 {
			return nil, 0
		}
		return &Fetch{c: c, full: true, follower: follower, usesIDs: usesIDs, parts: req.Topics, now: now}, 0
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.mu.sessions[req.SessionID]
	switch {
	case s == nil:
		return nil, kerr.FetchSessionIDNotFound.Code
	case s.epoch != req.SessionEpoch:
		return nil, kerr.InvalidFetchSessionEpoch.Code
	case s.usesIDs != usesIDs:
		return nil, kerr.FetchSessionTopicIDError.Code
	}
	before := s.size()
	for _, rt := range req.Topics {
		for _, rp := range rt.Partitions {
			k := topicKey(usesIDs, rt.Topic, rt.TopicID, rp.Partition)
			if el := s.parts[k]; el != nil {
				el.Value.(*entry).req = rp
				continue
			}
			if s.size() >= c.cfg.MaxSessionPartitions || c.mu.partitions-before+s.size() >= c.cfg.MaxPartitions {
				// Over budget: the client falls back to full fetches,
				// which get no session while they would not fit.
				c.mu.partitions += s.size() - before
				c.removeLocked(s)
				return nil, kerr.FetchSessionIDNotFound.Code
			}
			e := &entry{k: k, req: rp, hw: -1, lso: -1, logStart: -1}
			s.parts[k] = s.order.PushBack(e)
		}
	}
	// Forgotten after the adds, as Kafka's FetchSession.update does.
	for _, ft := range req.ForgottenTopics {
		for _, p := range ft.Partitions {
			k := topicKey(usesIDs, ft.Topic, ft.TopicID, p)
			if el := s.parts[k]; el != nil {
				s.order.Remove(el)
				delete(s.parts, k)
			}
		}
	}
	c.mu.partitions += s.size() - before
	if s.size() == 0 {
		c.removeLocked(s) // served sessionless, as Kafka: what it names
		return nil, 0
	}
	s.lastUsed = now
	s.epoch = nextEpoch(s.epoch)
	req.Topics = s.expand()
	return &Fetch{c: c, s: s, epoch: s.epoch}, 0
}

// expand lists the session's partitions as request topics in order,
// consecutive partitions of a topic in one topic entry (as Kafka builds
// its responses): a topic may appear twice, so a partition moved to the
// back really is read last.
//
// REQUIRES: c.mu held.
func (s *session) expand() []kmsg.FetchRequestTopic {
	var out []kmsg.FetchRequestTopic
	for el := s.order.Front(); el != nil; el = el.Next() {
		e := el.Value.(*entry)
		if n := len(out); n == 0 || out[n-1].Topic != e.k.topic || out[n-1].TopicID != e.k.id {
			rt := kmsg.NewFetchRequestTopic()
			rt.Topic, rt.TopicID = e.k.topic, e.k.id
			out = append(out, rt)
		}
		last := &out[len(out)-1]
		last.Partitions = append(last.Partitions, e.req)
	}
	return out
}

func topicKey(usesIDs bool, topic string, id [16]byte, partition int32) key {
	if usesIDs {
		return key{id: id, partition: partition}
	}
	return key{topic: topic, partition: partition}
}

// Trim finishes the fetch with its response: for a full fetch it creates
// the session (resp.SessionID, 0 when there is no room), for an
// incremental one it drops the partitions with nothing new and records
// what is sent. It returns a non-zero error code when the session was
// used meanwhile by another request or evicted (the response must then be
// replaced by that error: its partitions' state is unknown to the cache).
// Partitions of resp that are not in the session (authorization failures
// added by the caller) are left as they are. f may be nil (sessionless).
func (f *Fetch) Trim(resp *kmsg.FetchResponse) int16 {
	if f == nil {
		return 0
	}
	if f.full {
		resp.SessionID = f.c.create(f, resp)
		return 0
	}
	c, s := f.c, f.s
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.mu.sessions[s.id] != s || s.epoch != f.epoch {
		return kerr.InvalidFetchSessionEpoch.Code
	}
	resp.SessionID = s.id
	topics := resp.Topics[:0]
	// The response names the expanded request's partitions in order, so
	// the session's list is walked beside it; the map serves the rest.
	// Partitions moved to the back meanwhile are in moved, not yet moved
	// in order, so the walk does not meet them again.
	next := s.order.Front()
	var moved []*list.Element
	for _, rt := range resp.Topics {
		parts := rt.Partitions[:0]
		for _, sp := range rt.Partitions {
			k := topicKey(s.usesIDs, rt.Topic, rt.TopicID, sp.Partition)
			el := next
			if el != nil && el.Value.(*entry).k == k {
				next = el.Next()
			} else if el = s.parts[k]; el == nil {
				parts = append(parts, sp)
				continue
			}
			e := el.Value.(*entry)
			if !e.update(&sp) {
				continue
			}
			if len(sp.RecordBatches) > 0 {
				moved = append(moved, el)
			}
			parts = append(parts, sp)
		}
		if len(parts) > 0 {
			rt.Partitions = parts
			topics = append(topics, rt)
		}
	}
	clear(resp.Topics[len(topics):])
	resp.Topics = topics
	for _, el := range moved {
		s.order.MoveToBack(el)
	}
	return 0
}

// update records what sp tells the client and reports whether sp must be
// sent: Kafka's CachedPartition.maybeUpdateResponseData, with Fjord's
// fields. Records, an error, a diverging epoch, a new leader or snapshot
// id, or a moved high watermark, last stable offset or log start.
func (e *entry) update(sp *kmsg.FetchResponseTopicPartition) bool {
	must := len(sp.RecordBatches) > 0 || sp.PreferredReadReplica >= 0 ||
		sp.DivergingEpoch.Epoch >= 0 || sp.CurrentLeader.LeaderID >= 0 || sp.SnapshotID.Epoch >= 0 ||
		sp.UnknownTags.Len() > 0
	if sp.HighWatermark != e.hw || sp.LastStableOffset != e.lso || sp.LogStartOffset != e.logStart {
		must = true
	}
	e.hw, e.lso, e.logStart = sp.HighWatermark, sp.LastStableOffset, sp.LogStartOffset
	if sp.ErrorCode != 0 {
		e.hw = -1 // sent again once the error is gone
		must = true
	}
	return must
}

// create makes the session of a full fetch with epoch 0 once its response
// is known, and returns its id; 0 when there is no room (or nothing in it).
func (c *Cache) create(f *Fetch, resp *kmsg.FetchResponse) int32 {
	n := 0
	for _, rt := range f.parts {
		n += len(rt.Partitions)
	}
	if n == 0 || n > c.cfg.MaxSessionPartitions {
		return 0
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for len(c.mu.sessions) >= c.cfg.Slots || c.mu.partitions+n > c.cfg.MaxPartitions {
		if !c.evictLocked(f.follower, n, f.now) {
			return 0
		}
	}
	s := &session{follower: f.follower, usesIDs: f.usesIDs, created: f.now, lastUsed: f.now, epoch: 1,
		parts: make(map[key]*list.Element, n), order: list.New()}
	for _, rt := range f.parts {
		for _, rp := range rt.Partitions {
			k := topicKey(s.usesIDs, rt.Topic, rt.TopicID, rp.Partition)
			if el := s.parts[k]; el != nil {
				el.Value.(*entry).req = rp // named twice: the last counts
				continue
			}
			s.parts[k] = s.order.PushBack(&entry{k: k, req: rp, hw: -1, lso: -1, logStart: -1})
		}
	}
	for _, rt := range resp.Topics {
		for i := range rt.Partitions {
			sp := &rt.Partitions[i]
			if el := s.parts[topicKey(s.usesIDs, rt.Topic, rt.TopicID, sp.Partition)]; el != nil {
				el.Value.(*entry).update(sp)
			}
		}
	}
	for {
		s.id = c.newID()
		if s.id > 0 && c.mu.sessions[s.id] == nil {
			break
		}
	}
	c.mu.sessions[s.id] = s
	c.mu.partitions += s.size()
	return s.id
}

// evictLocked makes room for a newcomer of size partitions (follower:
// privileged), as Kafka's FetchSessionCache.tryEvict: the session unused
// the longest goes if it was unused for more than EvictAfter; otherwise
// the least valuable evictable session goes if the newcomer is worth at
// least as much. Value orders by (follower, partitions, id); a consumer
// session is evictable by a follower's at any age, any session by anyone
// once older than EvictAfter (Kafka decides ages when a session is
// touched; here when evicting, which can only evict sooner). It reports
// whether a session went.
//
// REQUIRES: c.mu held.
func (c *Cache) evictLocked(follower bool, size int, now time.Time) bool {
	var stalest, cheapest *session
	for _, s := range c.mu.sessions {
		if stalest == nil || s.lastUsed.Before(stalest.lastUsed) || (s.lastUsed.Equal(stalest.lastUsed) && s.id < stalest.id) {
			stalest = s
		}
		old := now.Sub(s.created) > c.cfg.EvictAfter
		if !(old || (follower && !s.follower)) {
			continue
		}
		if cheapest == nil || less(s, cheapest) {
			cheapest = s
		}
	}
	victim := (*session)(nil)
	switch {
	case stalest == nil:
		return false
	case now.Sub(stalest.lastUsed) > c.cfg.EvictAfter:
		victim = stalest
	case cheapest == nil:
		return false
	case follower != cheapest.follower:
		if !follower {
			return false // a consumer never displaces a follower session
		}
		victim = cheapest
	case size <= cheapest.size():
		return false // the newcomer (id 0) orders below an equal session
	default:
		victim = cheapest
	}
	c.removeLocked(victim)
	c.mu.evictions++
	return true
}

// less orders sessions by value: Kafka's EvictableKey (privileged, size, id).
func less(a, b *session) bool {
	if a.follower != b.follower {
		return !a.follower
	}
	if a.size() != b.size() {
		return a.size() < b.size()
	}
	return a.id < b.id
}

// removeLocked drops s from the cache.
//
// REQUIRES: c.mu held.
func (c *Cache) removeLocked(s *session) {
	if c.mu.sessions[s.id] != s {
		return
	}
	delete(c.mu.sessions, s.id)
	c.mu.partitions -= s.size()
}
