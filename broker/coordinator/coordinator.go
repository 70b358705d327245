package coordinator

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"time"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordlog/fjord/broker/replica"
	"github.com/fjordlog/fjord/group"
	"github.com/fjordlog/fjord/group/consumer"
	"github.com/fjordlog/fjord/group/share"
)

// OffsetsTopic is Kafka's internal topic of committed offsets and stored
// groups (see the package documentation for its records).
const OffsetsTopic = "__consumer_offsets"

// Errors for a group this node cannot serve now. The broker maps them to
// Kafka error codes.
var (
	// ErrLoading: this node leads the group's offsets partition but has not
	// read its log back yet (COORDINATOR_LOAD_IN_PROGRESS).
	ErrLoading = errors.New("coordinator: offsets partition is loading")
	// ErrNotCoordinator: this node does not lead the group's offsets
	// partition, or the offsets topic does not exist yet (NOT_COORDINATOR).
	ErrNotCoordinator = errors.New("coordinator: not the coordinator of this group")
)

// Host is what the coordinator needs of the broker.
type Host interface {
	// Go runs fn on a goroutine the broker tracks, so the broker's Close
	// waits for it. Once Close has begun it runs nothing and reports
	// false.
	Go(fn func()) bool
	// ReadFailed reports that reading offsets partition p's log failed
	// with err; a damaged log is handed to a sound replica
	// (replica.Partition.ReadFailed).
	ReadFailed(p *replica.Partition, err error)
	// ConsumerImage is the topics of the node's metadata image as KIP-848
	// groups see them; the same pointer until the image changes.
	ConsumerImage() *consumer.Image
	// GroupTimeouts is group id's session timeout and heartbeat interval
	// under the protocol kind (ConsumerGroupType or ShareGroupType):
	// its group config's consumer.* or share.* overrides, else the
	// broker's defaults.
	GroupTimeouts(kind, id string) (sessionMs, heartbeatMs int32)
}

// Config is the coordinator's configuration. The broker fills it from its
// own (Kafka's property names are given).
type Config struct {
	// Group shapes membership (group.min.session.timeout.ms and the like).
	// An empty MemberIDNonce is set by New to a value unique to this
	// process, so member ids never repeat across restarts.
	Group group.Config
	// Consumer shapes KIP-848 consumer groups (group.consumer.*).
	Consumer consumer.Config
	// Share shapes KIP-932 share groups' membership (group.share.*).
	Share share.Config
	// RetentionMs (offsets.retention.minutes, in ms): the committed offsets
	// of a group without members expire this long after their commit.
	// Range: >= 1.
	RetentionMs int64
	// RetentionCheckMs (offsets.retention.check.interval.ms): how often
	// expiry looks. Range: >= 1.
	RetentionCheckMs int64
	Logger           zerolog.Logger
}

// Validate reports every setting that cannot work.
func (c Config) Validate() error {
	var errs []error
	if err := c.Group.Validate(); err != nil {
		errs = append(errs, err)
	}
	if err := c.Consumer.Validate(); err != nil {
		errs = append(errs, err)
	}
	if err := c.Share.Validate(); err != nil {
		errs = append(errs, err)
	}
	if c.RetentionMs < 1 || c.RetentionCheckMs < 1 {
		errs = append(errs, fmt.Errorf("coordinator: offsets retention %d ms, checked every %d ms: both must be >= 1",
			c.RetentionMs, c.RetentionCheckMs))
	}
	return errors.Join(errs...)
}

// Coordinator runs the consumer groups this node coordinates and keeps
// their committed offsets. It owns the two parts (see the package
// documentation): groups, the membership glue with its timer loop, and
// offsets, the committed-offset store. Calls are safe from any goroutine.
//
// Groups are kept for the offsets partitions this node leads: a load
// restores a partition's stored groups before the partition serves, and
// Follow unloads them when the leadership goes; their members then find
// the new coordinator.
type Coordinator struct {
	ctx     context.Context // ends the loops Start began
	cfg     Config
	host    Host
	log     zerolog.Logger
	groups  *groupTable
	offsets *offsetStore
}

// New returns a coordinator that coordinates nothing until Follow reports
// local offsets partitions. Its loops run from Start until ctx ends.
func New(ctx context.Context, cfg Config, host Host) (*Coordinator, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Group.MemberIDNonce == "" {
		// Member ids must not repeat across restarts, or a client from
		// before the restart could pass for a new member.
		cfg.Group.MemberIDNonce = strconv.FormatInt(time.Now().UnixNano(), 36)
	}
	if cfg.Consumer.MemberIDNonce == "" {
		cfg.Consumer.MemberIDNonce = cfg.Group.MemberIDNonce
	}
	o := newOffsetStore(host, cfg.Logger)
	c := &Coordinator{ctx: ctx, cfg: cfg, host: host, log: cfg.Logger,
		offsets: o, groups: newGroupTable(cfg.Group, cfg.Consumer, cfg.Share, host.ConsumerImage, o, cfg.Logger)}
	c.groups.timeouts = host.GroupTimeouts
	return c, nil
}

// Start begins the groups' timer loop and offset expiry on the host's
// goroutines; both end when the context given to New does.
func (c *Coordinator) Start() {
	c.host.Go(func() { c.groups.run(c.ctx.Done()) })
	c.host.Go(c.expiryLoop)
}

// Follow matches the coordinator to the offsets topic's local replicas:
// parts[i] is this node's replica of offsets partition i, nil where it
// holds none (a nil parts changes nothing). It loads the partitions this
// node has begun to lead, in the background, and forgets those it no
// longer leads with their groups. The broker calls it after every
// metadata image and whenever a local offsets replica's role changes;
// parts is not kept.
func (c *Coordinator) Follow(parts []*replica.Partition) {
	lost, gained := c.offsets.follow(parts)
	for _, pi := range lost {
		c.groups.unload(func(id string) bool { return c.offsets.partitionFor(id) == pi })
		c.log.Info().Int32("partition", pi).Msg("no longer coordinator for this offsets partition")
	}
	for _, pi := range gained {
		p := parts[pi]
		c.host.Go(func() { c.load(pi, p) })
	}
}

// load reads offsets partition pi's log, which this node has begun to
// lead, restores the groups stored there, and then serves the partition;
// until then its groups answer ErrLoading.
func (c *Coordinator) load(pi int32, p *replica.Partition) {
	start := time.Now()
	// Only a committed log is loaded (replica.Partition.WaitHW says why):
	// offsets served from a tail a failover cuts would send a consumer back
	// over records it had already processed.
	lg, v, code := p.Serve(replica.ConsumerRead)
	if code != 0 {
		return // no longer led here: Follow forgets it
	}
	if err := p.WaitHW(c.ctx, lg.EndOffset(), v.LeaderEpoch); err != nil {
		return
	}
	n, ok := c.offsets.replay(pi, p)
	if !ok {
		return
	}
	// Groups come back before the partition is served, so no new member
	// can race a restored generation.
	for id, data := range c.offsets.takeStoredGroups(pi) {
		var v kmsg.GroupMetadataValue
		if err := v.ReadFrom(data); err != nil {
			c.log.Warn().Err(err).Str("group", id).Msg("unreadable stored group; members will rejoin")
			continue
		}
		c.groups.restore(id, &v)
	}
	for k, recs := range c.offsets.takeNextGenRecords(pi) {
		c.groups.restoreNextGen(k, recs)
	}
	c.offsets.markLoaded(pi, p)
	if n > 0 || time.Since(start) > 100*time.Millisecond {
		c.log.Info().Int32("partition", pi).Int("records", n).Dur("took", time.Since(start)).Msg("loaded committed offsets")
	}
}

// Status is nil when this node coordinates group and has loaded its
// offsets partition, else ErrNotCoordinator or ErrLoading.
func (c *Coordinator) Status(group string) error { return c.offsets.status(group) }

// PartitionFor is group's offsets partition (0 until Follow has seen the
// offsets topic).
func (c *Coordinator) PartitionFor(group string) int32 { return c.offsets.partitionFor(group) }

// TopicPartition names a partition a group commits an offset for.
type TopicPartition struct {
	Topic     string
	Partition int32
}

// Committed is a group's committed offset for one partition.
type Committed struct {
	Offset       int64
	LeaderEpoch  int32 // -1: unknown
	Metadata     string
	CommitTimeMs int64 // unix ms; expiry counts from it
}

// Commit appends offs for group (a nil value deletes the partition's
// offset) and calls done once they are committed (durable on every
// in-sync replica of the offsets partition, and visible to Offset), or
// with the error that stopped them: ErrNotCoordinator, ErrLoading, or the
// replica's (replica.ErrNotLeader, replica.ErrTimedOut …). done runs on
// another goroutine once something was appended, else before Commit
// returns (nothing to write, or the error). offs is not kept.
func (c *Coordinator) Commit(group string, offs map[TopicPartition]*Committed, done func(error)) {
	c.offsets.commitIf(group, offs, nil, func(_ int, err error) { done(err) })
}

// Offset returns group's committed offset for tp.
func (c *Coordinator) Offset(group string, tp TopicPartition) (Committed, bool) {
	return c.offsets.fetch(group, tp)
}

// Offsets returns a copy of all of group's committed offsets; the caller
// owns it.
func (c *Coordinator) Offsets(group string) map[TopicPartition]Committed {
	return c.offsets.groupOffsets(group)
}

// GroupSummary is what ListGroups reports of a group.
type GroupSummary struct {
	ID, State, ProtocolType string
	Type                    string // KIP-848's group type: "classic", "consumer" or "share"
}

// ListGroups returns every group known here, by id: those with members,
// and those with committed offsets only (Empty).
func (c *Coordinator) ListGroups() []GroupSummary {
	seen := map[string]GroupSummary{}
	for _, id := range c.offsets.groupsWithOffsets() {
		seen[id] = GroupSummary{id, "Empty", "", ClassicGroupType}
	}
	c.groups.each(func(id string, g *group.Group) {
		seen[id] = GroupSummary{id, g.State(), g.ProtocolType(), ClassicGroupType}
	})
	c.groups.eachNextGen(func(id string, g nextGen) {
		seen[id] = GroupSummary{id, g.State(), g.kind(), g.kind()}
	})
	out := make([]GroupSummary, 0, len(seen))
	for _, s := range seen {
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}
