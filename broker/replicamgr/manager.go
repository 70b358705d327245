package replicamgr

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordlog/fjord/broker/replica"
	"github.com/fjordlog/fjord/controller"
	"github.com/fjordlog/fjord/storage"
)

// Config is what the manager needs of its broker. A test may leave out
// what it has no use for: a nil hook (Reconfigure, Fetchers, Coordinate,
// BrokerEpoch, a metric) does nothing, and a nil Go starts nothing and
// reports false. Metadata and Settings are required once Apply sees a
// replica placed here, AlterPartitions once a replica proposes, AskPeer
// by AwaitPeersApplied.
type Config struct {
	NodeID int32
	// LogDir is the directory holding the partition directories
	// (<topic>-<partition>); MetadataDir names the metadata log's
	// directory in it, which is never a stray.
	LogDir      string
	MetadataDir string
	// FS holds LogDir's partition directories: the logs, their
	// partition.metadata, and the removals of strays. nil is the
	// operating system's (storage.OSFS).
	FS     storage.FS
	Logger zerolog.Logger

	// ReplicaLagTimeMaxMs (replica.lag.time.max.ms) and
	// PartitionOpenTimeoutMs (fjord.partition.open.timeout.ms) go to the
	// replicas' cores; the open timeout also bounds how long applying an
	// image waits for its new replicas' opens.
	ReplicaLagTimeMaxMs    int64
	PartitionOpenTimeoutMs int64
	// LogFlushStallMaxMs (fjord.log.flush.stall.max.ms): a leader whose
	// own fsync has run this long resigns the partition; 0 never.
	LogFlushStallMaxMs int64
	// LogOpenFilesMax is fjord.log.open.files.max: the file cache's
	// capacity, 0 to derive it from RLIMIT_NOFILE (fdbudget.go).
	LogOpenFilesMax int64
	// LogIndexCacheBytes is fjord.log.index.cache.bytes: the budget of the
	// node's cache of sealed segments' indexes.
	LogIndexCacheBytes int64
	// Tiering: the node has a remote store (broker/tier copies tiered
	// topics' segments), so a tiered log keeps each local segment until
	// the image says the store holds it. Without one, a topic with
	// remote.storage.enable keeps local retention as an untiered topic's:
	// nothing would ever be copied, and waiting for it would fill the disk.
	Tiering bool

	// Metadata is the node's metadata log. It is called only after New
	// returns, so it may read a log that starts later.
	Metadata Metadata
	// Go runs fn on a goroutine the broker tracks (its Close waits for
	// it); false once the broker stops, and fn then does not run.
	Go func(fn func()) bool
	// BrokerEpoch is this broker's registration, 0 before the first.
	BrokerEpoch func() int64
	// AlterPartitions sends props, proposals of one broker epoch, to the
	// active controller as one AlterPartition and returns each
	// partition's error code in order (isr.go).
	AlterPartitions func(ctx context.Context, brokerEpoch int64, props []ISRProposal) ([]int16, error)
	// AskPeer sends req to broker peer's inter-broker listener, giving up
	// after timeout, and returns nil on any failure; a failed ask while
	// ctx is live drops that peer's connection, so the next ask dials
	// afresh (peerbarrier.go).
	AskPeer func(ctx context.Context, peer int32, req *kmsg.MetadataRequest, timeout time.Duration) *kmsg.MetadataResponse
	// Settings is a topic's effective configuration for its replicas:
	// its overrides over the running broker configuration.
	Settings func(overrides map[string]string) replica.Settings
	// Reconfigure is called before the replicas follow an image whose
	// dynamic broker configs differ from the last applied image's (and for
	// the first image), so Settings already reads the new ones.
	Reconfigure func(img *controller.Image)
	// TopicsGone, if set, learns the topics an applied image dropped:
	// deleted, or deleted and created again under the same name (by id).
	// Called from the publish loop after their replicas are unassigned; it
	// must not block.
	TopicsGone func(gone []*Topic)
	// Fetchers are the follower fetchers; each applied image hands them
	// the local followers by leader.
	Fetchers Fetchers
	// CoordinatorTopics name the internal topics a coordinator serves
	// from (the offsets and transaction state topics). Coordinate tells it
	// the topic's local replicas: after every image that has the topic,
	// and whenever one of its local replicas' view changes (a slow open
	// finishing changes a leadership after the image).
	CoordinatorTopics []string
	Coordinate        func(t *Topic)
	Metrics           Metrics
}

// Metrics are where the manager and its replicas count; nil ones count
// nowhere.
type Metrics struct {
	FlushTime  prometheus.Observer // fsync durations of the local logs, seconds
	ISRShrinks prometheus.Counter  // ISR shrinks proposed as a leader
	ISRExpands prometheus.Counter  // ISR expansions proposed as a leader
}

// Metadata is the node's metadata log as the manager reads it: the latest
// image (ahead of, or equal to, the one the replicas match).
type Metadata interface {
	Image() *controller.Image
	// WaitFor blocks until pred holds for the latest image or ctx ends.
	WaitFor(ctx context.Context, pred func(*controller.Image) bool) error
}

// Fetchers are the follower fetchers (*replica.Fetchers).
type Fetchers interface {
	// Update makes the fetchers follow exactly these replicas, by leader.
	Update(byLeader map[int32][]*replica.Partition)
}

// Manager is a node's set of local replicas; see the package comment.
//
// Invariants: mu's fields are replaced whole, never modified in place,
// and only by Apply (the publish loop); a map read from them stays valid
// and unchanging. Every driver not yet Ended is in replicas.live, and
// replicas.dirs[d] is the newest live claim of directory d.
type Manager struct {
	cfg Config
	ctx context.Context
	log zerolog.Logger

	// files is the node's cache of open log files, budget its division
	// of the descriptors (fdbudget.go). Set in New.
	files   *storage.FileCache
	indexes *storage.IndexCache // sealed segments' indexes, shared by every log
	budget  fdBudget
	// openSem bounds concurrent log opens (openSlots).
	openSem chan struct{}
	// deleteSem bounds concurrent replica deletions (DeleteSlots).
	deleteSem chan struct{}
	// openHook, if set (tests only), runs at the start of every replica
	// open: it simulates a slow or hung log recovery.
	openHook atomic.Pointer[func(topic string, partition int32)]
	// deleteHook, if set (tests only), runs in every replica deletion's
	// slot, before its files are removed.
	deleteHook atomic.Pointer[func(topic string, partition int32)]
	// replicas tracks every replica driver until its log is deleted
	// (host.go).
	replicas replicaRegistry
	// alters queues AlterPartition proposals for the controller (isr.go).
	alters alterBatcher
	// epochSaves writes new leaders' epoch checkpoints (epochsave.go).
	epochSaves epochSaver

	// appliedVersion is the version of the image the replicas match;
	// underReplicated counts the partitions led here with an ISR short
	// of the replication factor, as of TickLoop's last pass.
	appliedVersion  atomic.Uint64
	underReplicated atomic.Int64

	mu struct {
		sync.RWMutex
		image   *controller.Image   // the image the replicas match
		changed chan struct{}       // closed when image changes
		topics  map[string]*Topic   // topics by name
		byID    map[[16]byte]*Topic // and by id
	}
}

// New makes a node's replica manager, with no replicas yet: the first
// Apply creates them. ctx ends every background task it starts.
func New(ctx context.Context, cfg Config) *Manager {
	m := &Manager{cfg: cfg, ctx: ctx, log: cfg.Logger, openSem: make(chan struct{}, openSlots), deleteSem: make(chan struct{}, DeleteSlots)}
	if m.cfg.Go == nil {
		m.cfg.Go = func(func()) bool { return false }
	}
	m.files, m.budget = newFileCache(cfg.LogOpenFilesMax)
	m.indexes = storage.NewIndexCache(cfg.LogIndexCacheBytes)
	m.log.Info().Int("rlimit_nofile", m.budget.limit).Int("log_open_files_max", m.budget.capacity).
		Int("partition_limit", m.budget.partLimit).Msg("file descriptor budget")
	syncAtStart(cfg.FS, cfg.LogDir, m.log)
	m.epochSaves.m = m
	m.replicas.live = map[*replica.Partition]*dirClaim{}
	m.replicas.dirs = map[string]*dirClaim{}
	m.mu.topics = map[string]*Topic{}
	m.mu.byID = map[[16]byte]*Topic{}
	m.mu.changed = make(chan struct{})
	return m
}

// syncAtStart makes durable whatever an earlier process left in the
// page cache under dir, its partition directories' names included, with
// one syncfs, before any log opens (storage.SyncAtStart). Without one (no
// trustworthy syncfs, or it failed), a directory created just before a
// kill may still not be durable in its parent.
func syncAtStart(fs storage.FS, dir string, log zerolog.Logger) {
	if dir == "" {
		return
	}
	start := time.Now()
	switch synced, err := storage.SyncAtStart(fs, dir); {
	case errors.Is(err, storage.ErrNoSyncFS):
		log.Info().Str("dir", dir).Msg("no start-up sync of the data directory: syncfs is not available here (Linux 5.8 or later reports its errors)")
	case err != nil:
		log.Warn().Err(err).Str("dir", dir).Msg("start-up sync of the data directory failed: the node goes on; a partition directory created just before a crash may not be durable in its parent")
	case synced:
		log.Info().Str("dir", dir).Dur("took", time.Since(start)).Msg("synced the data directory's file system before opening its logs")
	}
}

// Topic is a topic of the applied image with this node's replicas of it.
// Published topics are read-only.
type Topic struct {
	Name    string
	ID      [16]byte
	Configs map[string]string    // the topic's config overrides; read-only
	Parts   []*replica.Partition // by partition index; nil where this node holds no replica
}

// Local returns the partitions this node holds a replica of.
func (t *Topic) Local() []*replica.Partition {
	out := make([]*replica.Partition, 0, len(t.Parts))
	for _, p := range t.Parts {
		if p != nil {
			out = append(out, p)
		}
	}
	return out
}

// Has reports whether the image has partition idx of t, wherever its
// replicas are. A nil t is a topic the image does not have.
func (t *Topic) Has(idx int32) bool {
	return t != nil && idx >= 0 && int(idx) < len(t.Parts)
}

// Serving finds this broker's replica of partition idx of t if it serves
// op now, with its log and view; else the Kafka error code for the
// client: UNKNOWN_TOPIC_OR_PARTITION when the image has no such partition
// (a nil t has none), NOT_LEADER_OR_FOLLOWER when another broker holds
// it, and whatever the replica's phase says (replica.View.Check)
// otherwise.
func (t *Topic) Serving(idx int32, op replica.Op) (*replica.Partition, *storage.Log, *replica.View, int16) {
	if !t.Has(idx) {
		return nil, nil, nil, kerr.UnknownTopicOrPartition.Code
	}
	p := t.Parts[idx]
	if p == nil {
		return nil, nil, nil, kerr.NotLeaderForPartition.Code
	}
	lg, v, code := p.Serve(op)
	if code != 0 {
		return nil, nil, v, code
	}
	return p, lg, v, 0
}

// Topic returns the applied image's topic name, nil if it has none.
func (m *Manager) Topic(name string) *Topic {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.mu.topics[name]
}

// TopicByID returns the applied image's topic id, nil if it has none.
func (m *Manager) TopicByID(id [16]byte) *Topic {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.mu.byID[id]
}

// Topics returns the applied image's topics by name; the map is never
// modified.
func (m *Manager) Topics() map[string]*Topic {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.mu.topics
}

// Image returns the metadata image the local replicas were last matched
// to (nil before the first).
func (m *Manager) Image() *controller.Image {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.mu.image
}

// WaitImage waits until the local replicas reflect an image satisfying
// pred (true), or ctx ends (false).
func (m *Manager) WaitImage(ctx context.Context, pred func(*controller.Image) bool) bool {
	for {
		m.mu.RLock()
		img, changed := m.mu.image, m.mu.changed
		m.mu.RUnlock()
		if img != nil && pred(img) {
			return true
		}
		select {
		case <-ctx.Done():
			return false
		case <-changed:
		}
	}
}

// AppliedVersion is the version of the image the replicas match.
func (m *Manager) AppliedVersion() uint64 { return m.appliedVersion.Load() }

// UnderReplicated counts the partitions led here whose ISR is short of
// their replication factor, as of the last tick.
func (m *Manager) UnderReplicated() int64 { return m.underReplicated.Load() }

// Files is the node's cache of open log files.
func (m *Manager) Files() *storage.FileCache { return m.files }

// Indexes is the node's cache of sealed segments' indexes.
func (m *Manager) Indexes() *storage.IndexCache { return m.indexes }

// SetOpenHook makes fn run at the start of every replica open (tests
// only: a slow or hung log recovery).
func (m *Manager) SetOpenHook(fn func(topic string, partition int32)) { m.openHook.Store(&fn) }

// SetDeleteHook makes fn run in every replica deletion's slot, before the
// files go (tests only: a slow disk's removals).
func (m *Manager) SetDeleteHook(fn func(topic string, partition int32)) { m.deleteHook.Store(&fn) }

// CloseLogs closes every open log, those of replicas being deleted
// included. REQUIRES: every goroutine the manager started has ended (no
// open still running).
//
// openSlots logs close at once: each close is a few fsyncs (indexes,
// producer snapshot, clean-shutdown marker), which one at a time made a
// node of 10,000 partitions take 49 s to stop.
func (m *Manager) CloseLogs() error {
	var (
		mu   sync.Mutex
		errs []error
		wg   sync.WaitGroup
	)
	type job struct {
		p  *replica.Partition
		lg *storage.Log
	}
	work := make(chan job)
	for range openSlots {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range work {
				if err := j.lg.Close(); err != nil {
					mu.Lock()
					errs = append(errs, fmt.Errorf("%s-%d: %w", j.p.Topic, j.p.Index, err))
					mu.Unlock()
				}
			}
		}()
	}
	for _, p := range m.liveReplicas() {
		if lg := p.Log(); lg != nil {
			work <- job{p, lg}
		}
	}
	close(work)
	wg.Wait()
	if len(errs) == 0 {
		m.log.Info().Msg("all logs flushed and closed")
	}
	return errors.Join(errs...)
}
