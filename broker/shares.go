package broker

import (
	"context"
	"time"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordlog/fjord/broker/acl"
	"github.com/fjordlog/fjord/broker/api"
	"github.com/fjordlog/fjord/broker/config"
	"github.com/fjordlog/fjord/broker/replica"
	"github.com/fjordlog/fjord/broker/sharecoord"
	"github.com/fjordlog/fjord/broker/sharefetch"
	"github.com/fjordlog/fjord/broker/sharestate"
	"github.com/fjordlog/fjord/group/sharepart"
)

// The broker's side of KIP-932 share groups: the share coordinator
// (broker/sharecoord, the durable state of every share-partition in
// __share_group_state, on the node leading the state partition a key
// hashes to) and the share-partition leaders (broker/sharefetch,
// ShareFetch and ShareAcknowledge on the node leading the data
// partition), joined by sharestate.Persister. Share group membership is
// the group coordinator's (broker/coordinator).

// newShareCoordinator builds the share coordinator from the broker's
// config; its loops start with Start and end with b.ctx.
func (b *Broker) newShareCoordinator() (*sharecoord.Coordinator, error) {
	return sharecoord.New(b.ctx, shareCoordConfig(&b.cfg, b.log), shareCoordHost{b})
}

// shareCoordConfig is the share coordinator's config from the broker's
// share.coordinator.* keys.
func shareCoordConfig(c *config.Config, log zerolog.Logger) sharecoord.Config {
	cfg := sharecoord.DefaultConfig()
	cfg.StatePartitions = c.ShareStatePartitions
	cfg.StateReplication = c.ShareStateReplication
	cfg.StateMinISR = c.ShareStateMinISR
	cfg.Logger = log.With().Str("component", "sharecoord").Logger()
	return cfg
}

// shareCoordHost gives the share coordinator what it needs of the broker.
type shareCoordHost struct{ b *Broker }

func (h shareCoordHost) Go(fn func()) bool                          { return h.b.goLoop(fn) }
func (h shareCoordHost) ReadFailed(p *replica.Partition, err error) { h.b.readFailed(p, err) }
func (h shareCoordHost) NodeID() int32                              { return h.b.cfg.NodeID }
func (h shareCoordHost) TopicPartitions(id [16]byte) int32 {
	if t := h.b.image().TopicByID(id); t != nil {
		return int32(len(t.Partitions))
	}
	return 0
}
func (h shareCoordHost) StateLeaders() []int32 {
	t := h.b.image().Topic(sharecoord.Topic)
	if t == nil {
		return nil
	}
	out := make([]int32, len(t.Partitions))
	for i, p := range t.Partitions {
		out[i] = p.Leader
	}
	return out
}
func (h shareCoordHost) EnsureStateTopic() { h.b.ensureShareStateTopic() }
func (h shareCoordHost) Ask(ctx context.Context, node int32, req kmsg.Request) (kmsg.Response, error) {
	timeout := 10 * time.Second
	if d, ok := ctx.Deadline(); ok {
		timeout = time.Until(d)
	}
	return h.b.peers.ask(ctx, h.b, node, req, timeout)
}

// ensureShareStateTopic asks the controller for __share_group_state if
// the image lacks it; FindCoordinator and the persister retry a failure.
func (b *Broker) ensureShareStateTopic() {
	cfg := shareCoordConfig(&b.cfg, b.log)
	b.ensureInternalTopic(sharecoord.Topic, cfg.StatePartitions, cfg.StateReplication, sharecoord.TopicConfigs(cfg))
}

// shareCoordAPIHost is what the share coordinator's RPCs need.
type shareCoordAPIHost struct{ b *Broker }

func (h shareCoordAPIHost) Shares() *sharecoord.Coordinator { return h.b.shares }
func (h shareCoordAPIHost) Code(err error) int16            { return errorCode(err) }
func (h shareCoordAPIHost) Go(fn func()) bool               { return h.b.goLoop(fn) }

// shareFetchHost gives the share-partition leaders what they need.
type shareFetchHost struct{ b *Broker }

func (h shareFetchHost) Partition(id [16]byte, p int32) (sharefetch.Replica, int16) {
	t := h.b.replicas.TopicByID(id)
	rp, _, _, code := t.Serving(p, replica.ConsumerRead)
	if code != 0 {
		return nil, code
	}
	return shareReplica{rp}, 0
}
func (h shareFetchHost) TopicName(id [16]byte) string    { return h.b.topicName("", id) }
func (h shareFetchHost) Persister() sharestate.Persister { return h.b.shares.Persister() }
func (h shareFetchHost) Code(err error) int16            { return errorCode(err) }
func (h shareFetchHost) Go(fn func()) bool               { return h.b.goLoop(fn) }
func (h shareFetchHost) Log() *zerolog.Logger            { return &h.b.log }
func (h shareFetchHost) GroupConfig(group string) sharefetch.GroupConfig {
	s := config.GroupSettingsOf(h.b.live(), h.b.image(), group)
	pc := sharepart.DefaultConfig()
	pc.RecordLockDurationMs = s.ShareRecordLockDurationMs
	pc.DeliveryCountLimit = int16(s.ShareDeliveryCountLimit)
	pc.PartitionMaxRecordLocks = s.SharePartitionMaxRecordLocks
	v, _ := config.GroupValue(h.b.live(), h.b.image(), group, "share.auto.offset.reset")
	reset, err := sharepart.ParseAutoOffsetReset(v)
	if err != nil {
		// The config was checked when set; an unreadable one is the
		// default's, latest.
		reset, _ = sharepart.ParseAutoOffsetReset("latest")
	}
	return sharefetch.GroupConfig{Partition: pc, AutoOffsetReset: reset, Isolation: sharefetch.Isolation(s.ShareIsolationLevel)}
}

// shareReplica is a data partition as a share-partition leader reads it.
type shareReplica struct{ p *replica.Partition }

func (r shareReplica) LeaderEpoch() (int32, bool) { return r.p.View().LeaderEpoch, r.p.Leads() }
func (r shareReplica) Offsets() (int64, int64) {
	lg := r.p.Log()
	if lg == nil {
		return 0, r.p.HW()
	}
	return lg.StartOffset(), r.p.HW()
}
func (r shareReplica) LastStable() int64 {
	hw := r.p.HW()
	if lg := r.p.Log(); lg != nil {
		return lg.LastStableOffset(hw)
	}
	return hw
}

// Read reads as a consumer's Fetch does (broker/partitions), at the
// share group's isolation level: read_committed up to the last stable
// offset, with the aborted transactions the batches read may hold.
func (r shareReplica) Read(off int64, maxBytes int, iso sharefetch.Isolation) ([]byte, []sharefetch.AbortedTxn, error) {
	lg := r.p.Log()
	if lg == nil {
		return nil, nil, replica.ErrNotLeader
	}
	limit := r.p.HW()
	if iso == sharefetch.ReadCommitted {
		limit = lg.LastStableOffset(limit)
	}
	data, err := lg.Read(off, maxBytes, limit, nil)
	if err != nil || iso != sharefetch.ReadCommitted {
		return data, nil, err
	}
	var aborted []sharefetch.AbortedTxn
	for _, a := range lg.AbortedIn(off, data) {
		aborted = append(aborted, sharefetch.AbortedTxn{ProducerID: a.ProducerID, FirstOffset: a.FirstOffset, LastOffset: a.LastOffset})
	}
	return data, aborted, nil
}
func (r shareReplica) ListOffset(ts int64) (int64, bool, error) {
	start, hw := r.Offsets()
	switch ts {
	case -1:
		return hw, true, nil
	case -2:
		return start, true, nil
	}
	lg := r.p.Log()
	if lg == nil {
		return 0, false, replica.ErrNotLeader
	}
	off, _, ok, err := lg.OffsetForTimestamp(ts, hw)
	return off, ok, err
}
func (r shareReplica) Watch(ch chan struct{})   { r.p.Watch(ch) }
func (r shareReplica) Unwatch(ch chan struct{}) { r.p.Unwatch(ch) }

// shareFetchAPIHost is what ShareFetch and ShareAcknowledge need.
type shareFetchAPIHost struct{ b *Broker }

func (h shareFetchAPIHost) Manager() *sharefetch.Manager { return h.b.shareFetch }
func (h shareFetchAPIHost) Go(fn func()) bool            { return h.b.goLoop(fn) }
func (h shareFetchAPIHost) TopicReadable(cc *api.Conn, topic string) bool {
	az := h.b.authorizer()
	if az == nil {
		return true
	}
	z := &api.Authz{Conn: cc, Az: az, Key: 78, Denied: h.b.audit.Denied}
	return z.Ok(acl.OpRead, acl.ResourceTopic, topic)
}
func (h shareFetchAPIHost) CurrentLeader(cc *api.Conn, id [16]byte, p int32) (sharefetch.Leader, bool) {
	img := h.b.image()
	t := img.TopicByID(id)
	if t == nil || p < 0 || int(p) >= len(t.Partitions) {
		return sharefetch.Leader{}, false
	}
	pt := t.Partitions[p]
	if pt.Leader < 0 || cc.Listener < 0 {
		return sharefetch.Leader{}, false
	}
	e, ok := img.Endpoint(pt.Leader, h.b.advertised[cc.Listener].Name)
	if !ok {
		return sharefetch.Leader{}, false
	}
	return sharefetch.Leader{ID: pt.Leader, Epoch: pt.LeaderEpoch, Host: e.Host, Port: e.Port}, true
}
