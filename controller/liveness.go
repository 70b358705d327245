package controller

import (
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Liveness tracks broker heartbeats for the active controller and turns
// silence into fencing and leader elections. It is the controller's private
// soft state, not part of the image: a newly active controller starts an
// empty Liveness and every unfenced broker gets a full session from the
// first Tick, as in Kafka.
//
// That granted session keeps a broker from being fenced before it had a
// chance to reach the new controller; it is not evidence that the broker's
// process is alive. So only what this controller heard itself (heardAt: a
// heartbeat or registration of the current registration) can make a new
// incarnation's registration a DUPLICATE_BROKER_REGISTRATION, as in
// Kafka's BrokerHeartbeatTracker, which knows no contact time for a broker
// it has not heard since it became active. Otherwise, after every node
// restarts at once (a power cut), the restarted controller's grant refused
// each restarted broker for a whole session while its old, dead
// incarnation stayed unfenced in the image with its leaderships.
//
// Time is an input: every method takes now in milliseconds from whatever
// clock the owner reads. Liveness is not safe for concurrent use; the
// controller's goroutine owns it.
//
// Elections never go outside the ISR (unclean leader election is off): a
// partition whose ISR has no live member keeps its last ISR member and gets
// leader -1 until that broker returns.
type Liveness struct {
	// lastSeen is the time of each broker's last accepted heartbeat or
	// registration, or of the session start the first Tick gave it.
	lastSeen map[int32]int64
	// heardAt is the time this controller last heard from each broker's
	// current registration: a heartbeat or registration it received, never
	// a session it granted. heardAt[b] <= lastSeen[b] once both are set.
	heardAt map[int32]int64
	// refused is, by broker, the registration fenced early because its
	// listeners refused connections (Refused), and whether a heartbeat
	// sent after that proved it alive all the same.
	refused map[int32]refusal
}

// refusal is one early fencing of a broker epoch.
type refusal struct {
	epoch     int64
	at        int64 // ms
	disproved bool  // a later heartbeat came: no early fencing for this epoch again
}

// NewLiveness returns a Liveness that has seen no broker yet.
func NewLiveness() *Liveness {
	return &Liveness{lastSeen: map[int32]int64{}, heardAt: map[int32]int64{}, refused: map[int32]refusal{}}
}

// Register decides a BrokerRegistration. A retried registration (same
// incarnation) needs no record: the broker's epoch is in the image. A new
// incarnation of a broker whose previous incarnation is unfenced and was
// heard by this controller within a session is
// DUPLICATE_BROKER_REGISTRATION (two processes claim one id). Otherwise it
// returns a RegisterBroker (the broker starts fenced with the record's
// index as epoch) followed by the leader and ISR changes that take the
// previous incarnation out of its partitions: the image never holds two
// registrations of one id, so the old incarnation, alive or not, is no
// longer unfenced once the record applies (its heartbeats are
// STALE_BROKER_EPOCH, and its own re-registration is refused while the new
// one heartbeats). A previous incarnation unheard since this controller
// became active (a restart of every node) does not hold the id.
func (l *Liveness) Register(img *Image, reg RegisterBroker, now, sessionTimeoutMs int64) ([]Record, int16) {
	if reg.ID < 0 {
		return nil, kerr.InvalidRequest.Code
	}
	old, exists := img.Broker(reg.ID)
	if exists && old.Incarnation == reg.Incarnation {
		l.lastSeen[reg.ID], l.heardAt[reg.ID] = now, now
		return nil, 0
	}
	if exists && !old.Fenced {
		if heard, ok := l.heardAt[reg.ID]; ok && now-heard < sessionTimeoutMs {
			return nil, kerr.DuplicateBrokerRegistration.Code
		}
	}
	reg.Epoch = 0
	reg.Endpoints = slices.Clone(reg.Endpoints)
	out := []Record{NewRecord(reg)}
	if exists && !old.Fenced {
		out = append(out, removeBrokers(img, []int32{reg.ID})...)
	}
	l.lastSeen[reg.ID], l.heardAt[reg.ID] = now, now
	return out, 0
}

// DecideRegistration decides a BrokerRegistration (Register) at now. The
// answer carries the broker epoch the image gave the registration, or
// REQUEST_TIMED_OUT if the image holds another incarnation by then. A
// broker of another cluster than clusterID is INCONSISTENT_CLUSTER_ID, as
// in Kafka: given replicas here, it would serve this cluster's topics
// from another cluster's data (a mistyped voters list or cluster.id, a
// data directory copied from elsewhere).
func DecideRegistration(req *kmsg.BrokerRegistrationRequest, clusterID string, l *Liveness, now, sessionTimeoutMs int64) Decision {
	resp := req.ResponseKind().(*kmsg.BrokerRegistrationResponse)
	return oneRound(func(img *Image) []Record {
		if req.ClusterID != clusterID {
			resp.ErrorCode = kerr.InconsistentClusterID.Code
			return nil
		}
		reg := RegisterBroker{ID: req.BrokerID, Incarnation: req.IncarnationID}
		for _, e := range req.Listeners {
			reg.Endpoints = append(reg.Endpoints, Endpoint{Name: e.Name, Host: e.Host, Port: int32(e.Port)})
		}
		if req.Rack != nil {
			reg.Rack = *req.Rack
		}
		var recs []Record
		recs, resp.ErrorCode = l.Register(img, reg, now, sessionTimeoutMs)
		return recs
	}, func(img *Image, code int16) (kmsg.Response, []Note) {
		if resp.ErrorCode != 0 {
			return resp, nil
		}
		if code != 0 {
			resp.ErrorCode = code
			return resp, nil
		}
		bs, ok := img.Broker(req.BrokerID)
		if !ok || bs.Incarnation != req.IncarnationID {
			resp.ErrorCode = kerr.RequestTimedOut.Code
			return resp, nil
		}
		resp.BrokerEpoch = bs.Epoch
		return resp, []Note{info("broker registered", "broker", req.BrokerID, "epoch", bs.Epoch)}
	})
}

// DecideHeartbeat decides a BrokerHeartbeat that arrived at arrived and is
// decided at now: a controlled shutdown (Shutdown) if the broker asks to
// stop, else HeartbeatSent. The broker has caught up when its metadata
// offset has reached its own registration (its broker epoch). The answer
// reads the broker's fencing from the image after the round; a broker
// asking to stop may once that shows it fenced.
func DecideHeartbeat(req *kmsg.BrokerHeartbeatRequest, l *Liveness, arrived, now int64) Decision {
	resp := req.ResponseKind().(*kmsg.BrokerHeartbeatResponse)
	var (
		recs     []Record
		caughtUp bool
		notes    []Note
	)
	return oneRound(func(img *Image) []Record {
		bs, ok := img.Broker(req.BrokerID)
		caughtUp = ok && req.CurrentMetadataOffset >= bs.Epoch
		if req.WantShutdown {
			recs, resp.ErrorCode = l.Shutdown(img, req.BrokerID, req.BrokerEpoch, now)
			return recs
		}
		early := l.MayFenceEarly(req.BrokerID, req.BrokerEpoch)
		// As it arrived: one sent before its broker was found gone must
		// not unfence it (Liveness.Refused).
		recs, resp.ErrorCode = l.HeartbeatSent(img, req.BrokerID, req.BrokerEpoch, caughtUp, arrived, now)
		if early && !l.MayFenceEarly(req.BrokerID, req.BrokerEpoch) {
			notes = append(notes, warn("broker heartbeats though its listeners refused the controller's connections: not fenced early again until it registers anew",
				"broker", req.BrokerID))
		}
		return recs
	}, func(img *Image, code int16) (kmsg.Response, []Note) {
		if resp.ErrorCode != 0 {
			return resp, notes
		}
		if code != 0 {
			resp.ErrorCode = code
			return resp, notes
		}
		if len(recs) > 0 {
			what := "broker unfenced"
			if req.WantShutdown {
				what = "controlled shutdown: broker fenced, its leaderships moved"
			}
			notes = append(notes, info(what, "broker", req.BrokerID, "records", len(recs)))
		}
		bs, _ := img.Broker(req.BrokerID)
		resp.IsCaughtUp, resp.IsFenced = caughtUp, bs.Fenced
		resp.ShouldShutdown = req.WantShutdown && bs.Fenced
		return resp, notes
	})
}

// Heartbeat records a heartbeat from broker at brokerEpoch. An unregistered
// broker gets BROKER_ID_NOT_REGISTERED and a wrong epoch STALE_BROKER_EPOCH.
// A fenced broker that reports it has caught up with the metadata log is
// unfenced: UnfenceBroker, followed by elections for the leaderless
// partitions whose ISR it holds.
func (l *Liveness) Heartbeat(img *Image, broker int32, brokerEpoch int64, caughtUp bool, now int64) ([]Record, int16) {
	return l.HeartbeatSent(img, broker, brokerEpoch, caughtUp, now, now)
}

// HeartbeatSent is Heartbeat for one that arrived at sent and is decided
// at now: the session runs from now (a broker waiting for its answer
// cannot send another), and one sent before its broker was found gone
// (Refused) changes nothing.
func (l *Liveness) HeartbeatSent(img *Image, broker int32, brokerEpoch int64, caughtUp bool, sent, now int64) ([]Record, int16) {
	b, ok := img.Broker(broker)
	if !ok {
		return nil, kerr.BrokerIDNotRegistered.Code
	}
	if b.Epoch != brokerEpoch {
		return nil, kerr.StaleBrokerEpoch.Code
	}
	if r, ok := l.refused[broker]; ok && r.epoch == brokerEpoch && !r.disproved {
		if sent <= r.at {
			// Sent before the process was found gone (a heartbeat queued
			// behind others): it proves nothing and must not unfence.
			return nil, 0
		}
		r.disproved = true
		l.refused[broker] = r
	}
	l.lastSeen[broker], l.heardAt[broker] = now, now
	if !b.Fenced || !caughtUp {
		return nil, 0
	}
	out := []Record{NewRecord(UnfenceBroker{ID: broker, Epoch: b.Epoch})}
	live := func(id int32) bool { return id == broker || img.live(id) }
	forEachPartition(img, func(t *Topic, p int32, pt Partition) {
		if pt.Leader == -1 && slices.Contains(pt.ISR, broker) {
			if l := electFromISR(pt, live); l != -1 {
				out = append(out, NewRecord(ChangePartition{TopicID: t.ID, Partition: p, Leader: &l}))
			}
		}
	})
	return out, 0
}

// Heard records that broker's heartbeat for brokerEpoch arrived at at,
// before the decision loop got to it. A broker is alive when its heartbeat
// reaches the controller, not when a loop stuck behind a slow proposal
// answers it: the broker gives up on an unanswered heartbeat and sends
// another (HeartbeatTimeout), and counting only the answered ones fenced
// every broker after each stall longer than a session. A heartbeat of
// another registration (a stale epoch) proves nothing.
func (l *Liveness) Heard(img *Image, broker int32, brokerEpoch int64, at int64) {
	if b, ok := img.Broker(broker); !ok || b.Epoch != brokerEpoch {
		return
	}
	if seen, ok := l.lastSeen[broker]; !ok || at > seen {
		l.lastSeen[broker] = at
	}
	if heard, ok := l.heardAt[broker]; !ok || at > heard {
		l.heardAt[broker] = at
	}
}

// HeartbeatTimeout is how long a broker waits for the answer to one
// heartbeat before it sends another: a third of the session, and at least
// the heartbeat interval. So a controller busy for longer than a session
// still hears (Heard) from a live broker two or three times per session.
func HeartbeatTimeout(session, interval time.Duration) time.Duration {
	return min(session, max(interval, session/3))
}

// Refused decides what to do about a broker whose every listener refused
// connections (TCP RST: the host is up, no process listens) at brokerEpoch,
// as the active controller's watch found: a killed broker is fenced at
// once, as a session expiry would do seconds later, with its ISR and
// leadership changes. A frozen or unreachable broker refuses nothing and
// is left to its session. The registration must be the current one and
// unfenced; and once a heartbeat sent after such a fencing disproves it (a
// broker alive behind listeners that refuse the controller, say a
// firewall's REJECT), that registration is never fenced early again, so a
// wrong signal costs one fencing, not a flapping broker. Heartbeats sent
// before the fencing (as they arrived: Heartbeat's now) do not unfence it.
func (l *Liveness) Refused(img *Image, broker int32, brokerEpoch, now int64) []Record {
	b, ok := img.Broker(broker)
	if !ok || b.Fenced || b.Epoch != brokerEpoch || !l.MayFenceEarly(broker, brokerEpoch) {
		return nil
	}
	l.refused[broker] = refusal{epoch: brokerEpoch, at: now}
	l.lastSeen[broker] = now
	return append([]Record{NewRecord(FenceBroker{ID: broker, Epoch: b.Epoch})}, removeBrokers(img, []int32{broker})...)
}

// MayFenceEarly reports whether Refused may fence broker's registration at
// brokerEpoch: no heartbeat has disproved an earlier refusal of it.
func (l *Liveness) MayFenceEarly(broker int32, brokerEpoch int64) bool {
	r, ok := l.refused[broker]
	return !ok || r.epoch != brokerEpoch || !r.disproved
}

// Shutdown decides a heartbeat from a broker asking to shut down
// (Kafka's controlled shutdown): the broker is fenced at once and, in the
// same batch, taken out of every ISR and every leadership, as a session
// expiry would do seconds later; a broker already fenced needs nothing and
// is never unfenced here. Once the image shows it fenced the broker may
// stop (ShouldShutDown): it leads nothing any more but partitions whose ISR
// it alone holds, which wait, leaderless, for it to return. Its next
// registration is accepted at once (no DUPLICATE_BROKER_REGISTRATION).
func (l *Liveness) Shutdown(img *Image, broker int32, brokerEpoch int64, now int64) ([]Record, int16) {
	b, ok := img.Broker(broker)
	if !ok {
		return nil, kerr.BrokerIDNotRegistered.Code
	}
	if b.Epoch != brokerEpoch {
		return nil, kerr.StaleBrokerEpoch.Code
	}
	l.lastSeen[broker], l.heardAt[broker] = now, now
	if b.Fenced {
		return nil, 0
	}
	return append([]Record{NewRecord(FenceBroker{ID: broker, Epoch: b.Epoch})}, removeBrokers(img, []int32{broker})...), 0
}

// Tick fences every unfenced broker not heard from for sessionTimeoutMs and,
// in the same batch, removes the fenced brokers from every ISR and moves the
// leadership of the partitions they led to a live ISR member (leader epoch
// bumped on apply), or to -1 if there is none. Records come in a
// deterministic order: FenceBroker by broker id, then partition changes by
// topic name and partition.
func (l *Liveness) Tick(img *Image, now, sessionTimeoutMs int64) []Record {
	var expired []int32
	for _, b := range img.LiveBrokers() {
		seen, ok := l.lastSeen[b.ID]
		if !ok {
			l.lastSeen[b.ID] = now // first sight: a full session from now
			continue
		}
		if now-seen >= sessionTimeoutMs {
			expired = append(expired, b.ID)
		}
	}
	if len(expired) == 0 {
		return nil
	}
	var out []Record
	for _, id := range expired {
		b, _ := img.Broker(id)
		out = append(out, NewRecord(FenceBroker{ID: id, Epoch: b.Epoch}))
		// If the fence is lost (the proposal dropped), retry after another
		// session rather than every tick.
		l.lastSeen[id] = now
	}
	return append(out, removeBrokers(img, expired)...)
}

// removeBrokers returns the partition changes that take the brokers gone
// (being fenced or replaced) out of every ISR and every leadership. A
// partition whose ISR would become empty keeps one member (its leader if in
// the ISR, else its first member) and gets leader -1: never an unclean
// election.
func removeBrokers(img *Image, gone []int32) []Record {
	live := func(id int32) bool { return img.live(id) && !slices.Contains(gone, id) }
	var out []Record
	forEachPartition(img, func(t *Topic, p int32, pt Partition) {
		if !slices.ContainsFunc(pt.ISR, func(id int32) bool { return slices.Contains(gone, id) }) &&
			!slices.Contains(gone, pt.Leader) {
			return
		}
		c := ChangePartition{TopicID: t.ID, Partition: p}
		isr := slices.DeleteFunc(slices.Clone(pt.ISR), func(id int32) bool { return slices.Contains(gone, id) })
		if len(isr) == 0 {
			keep := pt.ISR[0]
			if slices.Contains(pt.ISR, pt.Leader) {
				keep = pt.Leader
			}
			isr = []int32{keep}
		}
		if !slices.Equal(isr, pt.ISR) {
			c.ISR = &isr
		}
		if pt.Leader == -1 || !live(pt.Leader) {
			next := pt
			next.ISR = isr
			if l := electFromISR(next, live); l != pt.Leader {
				c.Leader = &l
			}
		}
		if c.ISR != nil || c.Leader != nil {
			out = append(out, NewRecord(c))
		}
	})
	return out
}

// ElectPreferred moves leadership back to each partition's preferred leader
// (its first replica) where that broker is live and in the ISR and does not
// lead already (Kafka's auto.leader.rebalance.enable, without the imbalance
// threshold). Order: by topic name, then partition.
func ElectPreferred(img *Image) []Record {
	var out []Record
	forEachPartition(img, func(t *Topic, p int32, pt Partition) {
		pref := pt.Replicas[0]
		if pt.Leader != pref && img.live(pref) && slices.Contains(pt.ISR, pref) {
			out = append(out, NewRecord(ChangePartition{TopicID: t.ID, Partition: p, Leader: &pref}))
		}
	})
	return out
}

// electFromISR picks the first replica, in replica order, that is in the
// ISR and live; -1 if none. Replica order makes the preferred leader win
// whenever it is eligible.
func electFromISR(p Partition, live func(int32) bool) int32 {
	for _, r := range p.Replicas {
		if slices.Contains(p.ISR, r) && live(r) {
			return r
		}
	}
	return -1
}

// forEachPartition calls fn for every partition, by topic name then index.
func forEachPartition(img *Image, fn func(t *Topic, p int32, pt Partition)) {
	for _, t := range img.Topics() {
		for p, pt := range t.Partitions {
			fn(t, int32(p), pt)
		}
	}
}

// ElectPreferredFor decides an operator's preferred-leader election
// (Kafka's ElectLeaders with election type PREFERRED) for the named
// partitions: one record per partition that moves, and a Kafka error code
// per partition that does not — UNKNOWN_TOPIC_OR_PARTITION,
// ELECTION_NOT_NEEDED when the preferred replica already leads, and
// PREFERRED_LEADER_NOT_AVAILABLE when it is fenced or out of the ISR (it is
// never made leader without every committed record).
func ElectPreferredFor(img *Image, topic string, partitions []int32) ([]Record, map[int32]int16) {
	codes := map[int32]int16{}
	t := img.Topic(topic)
	var out []Record
	for _, p := range partitions {
		if t == nil || p < 0 || int(p) >= len(t.Partitions) {
			codes[p] = kerr.UnknownTopicOrPartition.Code
			continue
		}
		pt := t.Partitions[p]
		pref := pt.Replicas[0]
		switch {
		case pt.Leader == pref:
			codes[p] = kerr.ElectionNotNeeded.Code
		case !img.live(pref) || !slices.Contains(pt.ISR, pref):
			codes[p] = kerr.PreferredLeaderNotAvailable.Code
		default:
			out = append(out, NewRecord(ChangePartition{TopicID: t.ID, Partition: p, Leader: &pref}))
			codes[p] = 0
		}
	}
	return out, codes
}

// DecideElectLeaders decides an operator's ElectLeaders: preferred
// elections (ElectPreferredFor) for the named partitions, or for every
// partition when the request names none, all in one round. Unclean
// elections (election type 1) are refused: ELECTION_NOT_NEEDED for a
// partition with a leader, else ELIGIBLE_LEADERS_NOT_AVAILABLE, since only
// an in-sync replica may lead.
func DecideElectLeaders(req *kmsg.ElectLeadersRequest) Decision {
	resp := req.ResponseKind().(*kmsg.ElectLeadersResponse)
	var (
		topics []kmsg.ElectLeadersRequestTopic
		recs   []Record
		codes  = map[string]map[int32]int16{}
	)
	return oneRound(func(img *Image) []Record {
		topics = req.Topics
		if topics == nil {
			for _, t := range img.Topics() {
				rt := kmsg.NewElectLeadersRequestTopic()
				rt.Topic = t.Name
				for p := range t.Partitions {
					rt.Partitions = append(rt.Partitions, int32(p))
				}
				topics = append(topics, rt)
			}
		}
		for _, rt := range topics {
			if req.ElectionType == 1 {
				codes[rt.Topic] = uncleanRefused(img, rt.Topic, rt.Partitions)
				continue
			}
			r, cs := ElectPreferredFor(img, rt.Topic, rt.Partitions)
			recs = append(recs, r...)
			codes[rt.Topic] = cs
		}
		return recs
	}, func(_ *Image, code int16) (kmsg.Response, []Note) {
		for _, rt := range topics {
			st := kmsg.NewElectLeadersResponseTopic()
			st.Topic = rt.Topic
			for _, p := range rt.Partitions {
				sp := kmsg.NewElectLeadersResponseTopicPartition()
				sp.Partition, sp.ErrorCode = p, codeOr(codes[rt.Topic][p], code)
				if req.ElectionType == 1 && sp.ErrorCode == kerr.EligibleLeadersNotAvailable.Code {
					sp.ErrorMessage = kmsg.StringPtr("unclean leader election is disabled: only an in-sync replica may lead")
				}
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
		if len(recs) == 0 || code != 0 {
			return resp, nil
		}
		return resp, []Note{info("preferred leaders elected on request", "partitions", len(recs))}
	})
}

// uncleanRefused is the answer to an unclean election of topic's
// partitions, which Fjord never holds.
func uncleanRefused(img *Image, topic string, partitions []int32) map[int32]int16 {
	codes := map[int32]int16{}
	t := img.Topic(topic)
	for _, p := range partitions {
		switch {
		case t == nil || p < 0 || int(p) >= len(t.Partitions):
			codes[p] = kerr.UnknownTopicOrPartition.Code
		case t.Partitions[p].Leader >= 0:
			codes[p] = kerr.ElectionNotNeeded.Code
		default:
			codes[p] = kerr.EligibleLeadersNotAvailable.Code
		}
	}
	return codes
}
