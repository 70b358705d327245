package replicamgr

import (
	"fmt"
	"syscall"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordlog/fjord/controller"
	"github.com/fjordlog/fjord/storage"
)

// The descriptor budget. Log files go through one storage.FileCache per
// node, whose capacity is fjord.log.open.files.max (by default the
// process's RLIMIT_NOFILE less fdReserve, which is kept for connections,
// the metadata quorum and everything that is not a log). Each local
// replica holds one descriptor for as long as it is open: its active
// segment's .log, which its writer keeps pinned; sealed segments and
// index files hold none while idle. So a node can host at most
// partitionLimit replicas: the capacity less a share kept for reading
// sealed segments (and the transient files a log writes: snapshots,
// checkpoints). CreateTopics and CreatePartitions (auto-creation too)
// refuse, with POLICY_VIOLATION, what would take this node past it
// (RefuseCreateTopics, RefuseCreatePartitions); a replica the check did
// not see coming (placed on another node, whose limit is lower) still
// cannot open past the budget (openLog) and stays offline with
// KAFKA_STORAGE_ERROR, retrying. See docs/architecture.md.

// fdReserve is the part of the descriptor limit kept for connections,
// the metadata quorum and everything else that is not a log.
const fdReserve = 1024

// fdBudget is a node's division of its descriptors.
type fdBudget struct {
	limit     int // RLIMIT_NOFILE
	capacity  int // the file cache's (fjord.log.open.files.max)
	sealed    int // kept from the capacity for sealed segments and transient files
	partLimit int // local replicas this node hosts at most
}

// newFDBudget divides limit descriptors as configured: filesMax > 0 is
// the cache's capacity (never more than the limit less the reserve), 0
// derives it.
func newFDBudget(limit int, filesMax int64) fdBudget {
	capacity := max(limit-fdReserve, 0)
	if filesMax > 0 {
		capacity = min(int(filesMax), capacity)
	}
	// Sealed segments need a few descriptors at once (a fetch reads one
	// segment at a time), but many readers may read at once.
	sealed := min(max(capacity/16, 16), capacity)
	return fdBudget{limit: limit, capacity: capacity, sealed: sealed, partLimit: capacity - sealed}
}

// String names the limit and where it comes from, for refusals and logs.
func (f fdBudget) String() string {
	return fmt.Sprintf("%d partition replicas per broker: one descriptor each for its active segment, of fjord.log.open.files.max=%d (RLIMIT_NOFILE %d less %d kept for connections), %d kept for reading sealed segments",
		f.partLimit, f.capacity, f.limit, fdReserve, f.sealed)
}

// rlimitNoFile is the process's descriptor limit (Go raises the soft
// limit to the hard one at start-up).
func rlimitNoFile() int {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil || rl.Cur > 1<<30 {
		return 1 << 30
	}
	return int(rl.Cur)
}

// newFileCache makes the node's file cache and its budget.
func newFileCache(filesMax int64) (*storage.FileCache, fdBudget) {
	f := newFDBudget(rlimitNoFile(), filesMax)
	return storage.NewFileCache(f.capacity), f
}

// replicaCounts counts the partition replicas img places on each broker.
func replicaCounts(img *controller.Image) map[int32]int {
	n := map[int32]int{}
	for _, t := range img.Topics() {
		for _, p := range t.Partitions {
			for _, id := range p.Replicas {
				n[id]++
			}
		}
	}
	return n
}

// budgetCheck projects the replicas a request adds to this node onto its
// current count. Without a manual assignment the controller spreads new
// replicas over the live brokers, so this node is expected to take its
// share, rounded up; with one, exactly those assigned to it.
type budgetCheck struct {
	log   zerolog.Logger
	me    int32
	have  int // replicas here now, and those the request's earlier topics add
	live  int
	limit fdBudget
}

func (m *Manager) newBudgetCheck() *budgetCheck {
	img := m.cfg.Metadata.Image()
	c := &budgetCheck{log: m.log, me: m.cfg.NodeID, limit: m.budget, live: 1}
	if img != nil {
		c.have = replicaCounts(img)[c.me]
		c.live = max(len(img.LiveBrokers()), 1)
	}
	return c
}

// add takes in a topic's new replicas: parts partitions at rf, spread by
// the controller, or as assigned (each new partition's replicas) when
// assigned is not empty. It returns a refusal message, logged, when they
// would take this node past its limit, and then does not count them.
func (c *budgetCheck) add(api, topic string, parts, rf int, assigned [][]int32) string {
	n := 0
	for _, rs := range assigned {
		for _, id := range rs {
			if id == c.me {
				n++
			}
		}
	}
	if len(assigned) == 0 {
		rf = min(max(rf, 1), c.live)
		n = (parts*rf + c.live - 1) / c.live
	}
	if c.have+n > c.limit.partLimit {
		msg := fmt.Sprintf("topic %s: %d more partition replicas on broker %d, which has %d, is past its limit of %s",
			topic, n, c.me, c.have, c.limit)
		c.log.Warn().Str("topic", topic).Msg(api + " refused: " + msg)
		return msg
	}
	c.have += n
	return ""
}

// RefuseCreateTopics answers, and takes out of req, the topics that would
// take this node past its descriptor budget. numPartitions and
// defaultReplication (num.partitions, default.replication.factor) stand
// for a topic's -1.
func (m *Manager) RefuseCreateTopics(req *kmsg.CreateTopicsRequest, numPartitions int32, defaultReplication int16) []kmsg.CreateTopicsResponseTopic {
	c := m.newBudgetCheck()
	var refused []kmsg.CreateTopicsResponseTopic
	kept := req.Topics[:0:0]
	for _, rt := range req.Topics {
		parts, rf := int(rt.NumPartitions), int(rt.ReplicationFactor)
		if parts < 0 {
			parts = int(numPartitions)
		}
		if rf < 0 {
			rf = int(defaultReplication)
		}
		var assigned [][]int32
		for _, a := range rt.ReplicaAssignment {
			assigned = append(assigned, a.Replicas)
		}
		if msg := c.add("CreateTopics", rt.Topic, parts, rf, assigned); msg != "" {
			st := kmsg.NewCreateTopicsResponseTopic()
			st.Topic, st.ErrorCode, st.ErrorMessage = rt.Topic, kerr.PolicyViolation.Code, &msg
			st.NumPartitions, st.ReplicationFactor = -1, -1
			refused = append(refused, st)
			continue
		}
		kept = append(kept, rt)
	}
	req.Topics = kept
	return refused
}

// RefuseCreatePartitions is RefuseCreateTopics for CreatePartitions.
func (m *Manager) RefuseCreatePartitions(req *kmsg.CreatePartitionsRequest) []kmsg.CreatePartitionsResponseTopic {
	c := m.newBudgetCheck()
	img := m.cfg.Metadata.Image()
	var refused []kmsg.CreatePartitionsResponseTopic
	kept := req.Topics[:0:0]
	for _, rt := range req.Topics {
		var t *controller.Topic
		if img != nil {
			t = img.Topic(rt.Topic)
		}
		if t == nil || int(rt.Count) <= len(t.Partitions) || len(t.Partitions) == 0 {
			kept = append(kept, rt) // the controller's errors to give
			continue
		}
		var assigned [][]int32
		for _, a := range rt.Assignment {
			assigned = append(assigned, a.Replicas)
		}
		rf := len(t.Partitions[0].Replicas)
		if msg := c.add("CreatePartitions", rt.Topic, int(rt.Count)-len(t.Partitions), rf, assigned); msg != "" {
			st := kmsg.NewCreatePartitionsResponseTopic()
			st.Topic, st.ErrorCode, st.ErrorMessage = rt.Topic, kerr.PolicyViolation.Code, &msg
			refused = append(refused, st)
			continue
		}
		kept = append(kept, rt)
	}
	req.Topics = kept
	return refused
}
