package broker

import (
	"context"
	"slices"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordlog/fjord/broker/acl"
	"github.com/fjordlog/fjord/broker/admin"
	"github.com/fjordlog/fjord/broker/api"
	"github.com/fjordlog/fjord/broker/config"
	"github.com/fjordlog/fjord/broker/coordinator"
	"github.com/fjordlog/fjord/broker/replica"
	"github.com/fjordlog/fjord/broker/sharecoord"
	"github.com/fjordlog/fjord/controller"
	"github.com/fjordlog/fjord/group"
	"github.com/fjordlog/fjord/group/assign"
	"github.com/fjordlog/fjord/group/consumer"
	"github.com/fjordlog/fjord/group/share"
	"github.com/fjordlog/fjord/group/sharepart"
)

// The broker's side of the group coordinator (package broker/coordinator,
// also the room of the group APIs): its configuration, the hosts it and
// its APIs run on, and the offsets topic it is backed by.

// offsetsTopic is the coordinator's topic of committed offsets.
const offsetsTopic = coordinator.OffsetsTopic

// newCoordinator builds the coordinator from the broker's config; its
// loops start with Start and end with b.ctx.
func (b *Broker) newCoordinator() (*coordinator.Coordinator, error) {
	return coordinator.New(b.ctx, coordinator.Config{
		Group: group.Config{
			MinSessionTimeoutMs:     b.cfg.GroupMinSessionMs,
			MaxSessionTimeoutMs:     b.cfg.GroupMaxSessionMs,
			InitialRebalanceDelayMs: int32(b.cfg.GroupInitialRebalanceMs),
			MaxRebalanceAttempts:    10,
		},
		Consumer: consumer.Config{
			SessionTimeoutMs:    b.cfg.ConsumerSessionMs,
			HeartbeatIntervalMs: b.cfg.ConsumerHeartbeatMs,
			MaxSize:             b.cfg.ConsumerMaxSize,
			Assignors:           consumerAssignors(b.cfg.ConsumerAssignors),
			MigrationPolicy:     consumer.MigrationPolicy(b.cfg.ConsumerMigrationPolicy),

			ClassicMinSessionTimeoutMs: b.cfg.GroupMinSessionMs,
			ClassicMaxSessionTimeoutMs: b.cfg.GroupMaxSessionMs,
		},
		Share:            shareGroupConfig(&b.cfg),
		RetentionMs:      b.cfg.OffsetsRetentionMinutes * 60 * 1000,
		RetentionCheckMs: b.cfg.OffsetsRetentionCheckMs,
		Logger:           b.log,
	}, coordHost{b})
}

// consumerAssignors are group.consumer.assignors' assignors, in order
// (the config checked the names).
func consumerAssignors(names []string) []assign.Assignor {
	var out []assign.Assignor
	for _, n := range names {
		if a, ok := assign.ByName(n); ok {
			out = append(out, a)
		}
	}
	return out
}

// coordHost gives the coordinator what it needs of the broker.
type coordHost struct{ b *Broker }

func (h coordHost) ConsumerImage() *consumer.Image { return h.b.consumerTopics.get(h.b.image()) }
func (h coordHost) GroupTimeouts(kind, id string) (int32, int32) {
	s := config.GroupSettingsOf(h.b.live(), h.b.image(), id)
	if kind == coordinator.ShareGroupType {
		return s.ShareSessionTimeoutMs, s.ShareHeartbeatIntervalMs
	}
	return s.ConsumerSessionTimeoutMs, s.ConsumerHeartbeatIntervalMs
}

// consumerTopics caches the topics of the metadata image as KIP-848
// groups see them. The pointer changes only when a topic's name, id or
// partition count does, not with every image (leaders and ISRs move
// far more often), since every group compares itself with a new one.
type consumerTopics struct {
	mu   sync.Mutex
	from *controller.Image // the image cur was last checked against
	cur  *consumer.Image
	sig  []consumer.Topic // what cur was built from, sorted by name
}

func (c *consumerTopics) get(img *controller.Image) *consumer.Image {
	c.mu.Lock()
	defer c.mu.Unlock()
	if img == c.from && c.cur != nil {
		return c.cur
	}
	c.from = img
	var ts []consumer.Topic
	if img != nil {
		for _, t := range img.Topics() {
			ts = append(ts, consumer.Topic{Name: t.Name, ID: t.ID, Partitions: int32(len(t.Partitions))})
		}
	}
	sort.Slice(ts, func(i, j int) bool { return ts[i].Name < ts[j].Name })
	if c.cur == nil || !slices.Equal(ts, c.sig) {
		c.cur, c.sig = consumer.NewImage(ts), ts
	}
	return c.cur
}

func (h coordHost) Go(fn func()) bool                          { return h.b.goLoop(fn) }
func (h coordHost) ReadFailed(p *replica.Partition, err error) { h.b.readFailed(p, err) }

// groupsHost is what the group APIs (their room: broker/coordinator)
// need of the broker.
type groupsHost struct{ b *Broker }

func (h groupsHost) Coordinator() *coordinator.Coordinator { return h.b.coord }
func (h groupsHost) HasPartition(topic string, p int32) bool {
	return h.b.replicas.Topic(topic).Has(p)
}
func (h groupsHost) TopicName(id [16]byte) string { return h.b.topicName("", id) }
func (h groupsHost) TopicID(name string) [16]byte {
	if t := h.b.replicas.Topic(name); t != nil {
		return t.ID
	}
	return [16]byte{}
}
func (h groupsHost) Code(err error) int16 { return errorCode(err) }
func (h groupsHost) AuthorizedOps(cc *api.Conn, rt acl.ResourceType, name string) int32 {
	return h.b.authorizedOps(cc, rt, name)
}
func (h groupsHost) MayDescribeTopics(cc *api.Conn) consumer.Visibility {
	az := h.b.authorizer()
	if az == nil {
		return consumer.AllTopics
	}
	return func(topic string) bool {
		return az.Authorize(cc.Principal, cc.ClientHost, acl.OpDescribe, acl.ResourceTopic, topic)
	}
}
func (h groupsHost) Go(fn func()) bool    { return h.b.goLoop(fn) }
func (h groupsHost) Log() *zerolog.Logger { return &h.b.log }
func (h groupsHost) ShareStates() coordinator.ShareStates {
	return shareStates{h.b.shares.Persister()}
}
func (h groupsHost) UnloadShareGroup(group string) { h.b.shareFetch.UnloadGroup(group) }

// LatestOffsets asks each partition's leader: this node's replica, or the
// leader's ListOffsets over the inter-broker listener, one request per
// leader.
func (h groupsHost) LatestOffsets(ctx context.Context, topic string, parts []int32) []coordinator.PartitionEnd {
	out := make([]coordinator.PartitionEnd, len(parts))
	t := h.b.image().Topic(topic)
	byLeader := map[int32][]int{}
	for i, p := range parts {
		switch {
		case t == nil || p < 0 || int(p) >= len(t.Partitions):
			out[i].Code = kerr.UnknownTopicOrPartition.Code
		case t.Partitions[p].Leader < 0:
			out[i].Code = kerr.LeaderNotAvailable.Code
		case t.Partitions[p].Leader == h.b.cfg.NodeID:
			rp, _, _, code := h.b.replicas.Topic(topic).Serving(p, replica.ConsumerRead)
			if out[i].Code = code; code == 0 {
				out[i].Offset = rp.HW()
			}
		default:
			byLeader[t.Partitions[p].Leader] = append(byLeader[t.Partitions[p].Leader], i)
		}
	}
	for node, at := range byLeader {
		req := kmsg.NewPtrListOffsetsRequest()
		req.ReplicaID = -1
		rt := kmsg.NewListOffsetsRequestTopic()
		rt.Topic = topic
		for _, i := range at {
			rp := kmsg.NewListOffsetsRequestTopicPartition()
			rp.Partition, rp.Timestamp, rp.CurrentLeaderEpoch = parts[i], -1, -1
			rt.Partitions = append(rt.Partitions, rp)
		}
		req.Topics = append(req.Topics, rt)
		ends := map[int32]coordinator.PartitionEnd{}
		kresp, err := h.b.peers.ask(ctx, h.b, node, req, 10*time.Second)
		if resp, ok := kresp.(*kmsg.ListOffsetsResponse); err == nil && ok {
			for _, st := range resp.Topics {
				for _, sp := range st.Partitions {
					if st.Topic == topic {
						ends[sp.Partition] = coordinator.PartitionEnd{Offset: sp.Offset, Code: sp.ErrorCode}
					}
				}
			}
		}
		for _, i := range at {
			e, ok := ends[parts[i]]
			if !ok {
				// Kafka: a leader that did not answer is NETWORK_EXCEPTION,
				// one that left the partition out UNKNOWN_TOPIC_OR_PARTITION.
				e.Code = kerr.UnknownTopicOrPartition.Code
				if err != nil {
					e.Code = kerr.NetworkException.Code
				}
			}
			out[i] = e
		}
	}
	return out
}

// shareStates is the share coordinator's Persister as the group APIs use
// it.
type shareStates struct{ p *sharecoord.Persister }

func (s shareStates) Summary(ctx context.Context, k sharepart.Key) (coordinator.ShareSummary, error) {
	st, _, err := s.p.Summary(ctx, k)
	return coordinator.ShareSummary{StartOffset: st.StartOffset, LeaderEpoch: st.LeaderEpoch,
		DeliveryCompleteCount: st.DeliveryCompleteCount}, err
}
func (s shareStates) Initialize(ctx context.Context, k sharepart.Key, stateEpoch int32, start int64) error {
	return s.p.Initialize(ctx, k, stateEpoch, start)
}
func (s shareStates) Delete(ctx context.Context, k sharepart.Key) error { return s.p.Delete(ctx, k) }

// ensureOffsetsTopic asks the controller for the offsets topic if the image
// lacks it. Failure (e.g. fewer live brokers than
// offsets.topic.replication.factor) is retried by the next FindCoordinator.
//
// It is created on first need (FindCoordinator for a group, AddOffsetsToTxn,
// a Metadata request naming it), as Kafka creates it, not as the broker
// starts: its 50 partitions cost about 400 fsyncs, which a fresh broker's
// first CreateTopics and produce queued behind (exec to first ack 160-240
// ms with it, 65 ms without, on the bench's disk), and a broker whose
// clients use no groups keeps no descriptors for it.
func (b *Broker) ensureOffsetsTopic() {
	// Committed offsets must never age out by time; compaction keeps the
	// topic small.
	b.ensureInternalTopic(offsetsTopic, b.cfg.OffsetsTopicPartitions, b.cfg.OffsetsTopicReplication,
		map[string]string{"cleanup.policy": "compact", "retention.ms": "-1", "segment.bytes": "104857600"})
}

// ensureInternalTopic creates an internal topic if the image lacks it,
// with Kafka's default of rf replicas capped at the number of voters, so
// that a single node (a quorum of one) works unconfigured; a
// min.insync.replicas among configs is capped at that replication factor.
func (b *Broker) ensureInternalTopic(name string, partitions int32, rf int16, configs map[string]string) {
	if b.image().Topic(name) != nil {
		return
	}
	req := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	if vs, _ := config.ParseVoters(b.cfg.ControllerQuorumVoters); int(rf) > max(len(vs), 1) {
		rf = int16(max(len(vs), 1))
	}
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = name, partitions, rf
	for k, v := range configs {
		if k == "min.insync.replicas" {
			if n, err := strconv.Atoi(v); err == nil && n > int(rf) {
				v = strconv.Itoa(int(rf))
			}
		}
		c := kmsg.NewCreateTopicsRequestTopicConfig()
		c.Name, c.Value = k, &v
		rt.Configs = append(rt.Configs, c)
	}
	req.Topics = append(req.Topics, rt)
	ctx, cancel := api.AdminCtx(b.ctx, 10000)
	defer cancel()
	resp := admin.CreateTopics(ctx, adminHost{forwarder{b}}, req)
	if code := resp.Topics[0].ErrorCode; code != 0 && code != kerr.TopicAlreadyExists.Code {
		b.log.Warn().Str("topic", name).Int16("code", code).Msg("cannot create an internal topic yet; FindCoordinator will retry")
	}
}

// shareGroupConfig shapes share groups' membership from the broker's
// group.share.* keys.
func shareGroupConfig(cfg *config.Config) share.Config {
	c := share.DefaultConfig()
	c.SessionTimeoutMs, c.HeartbeatIntervalMs = cfg.ShareGroups.SessionMs, cfg.ShareGroups.HeartbeatMs
	return c
}
