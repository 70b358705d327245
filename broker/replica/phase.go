package replica

import (
	"math"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
)

// Phase is where a replica is in its life (see the package comment).
type Phase uint8

const (
	// Opening: the log is not open yet; an open is running or due.
	Opening Phase = iota
	// Offline: the last open failed; another is due after a backoff, or
	// none once the attempts are spent (until the broker restarts).
	Offline
	// Reconciling: a follower at a new leader epoch finding where its log
	// diverges from the leader's (KIP-101, KIP-279) before fetching.
	Reconciling
	// Following: a follower fetching from its leader.
	Following
	// Damaged: a follower whose log reads damaged while it is still in the
	// ISR. It stops fetching so its leader drops it; then it truncates at
	// the damage and reconciles again.
	Damaged
	// Leading: this broker leads the partition.
	Leading
	// Resigning: a leader that cannot serve (its log is damaged or did not
	// open) asked the controller to move the leadership.
	Resigning
	// Deleting: the replica is no longer placed here; its log is being
	// closed and removed.
	Deleting
	// Deleted: gone. Nothing is served.
	Deleted
)

var phaseNames = [...]string{"opening", "offline", "reconciling", "following", "damaged", "leading", "resigning", "deleting", "deleted"}

func (p Phase) String() string {
	if int(p) < len(phaseNames) {
		return phaseNames[p]
	}
	return "phase?"
}

// logOpen reports whether the phase has an open log.
func (p Phase) logOpen() bool { return p >= Reconciling && p <= Resigning }

// NoDamage is View.DamagedFrom while the log reads clean.
const NoDamage = math.MaxInt64

// View is a replica's state as request handlers see it: published by the
// owner after every Step that changes it, read without locks. A View is
// immutable once published; its slices are shared and read-only.
type View struct {
	Phase          Phase
	Leader         int32 // the leader's broker id; -1 for none
	LeaderEpoch    int32
	PartitionEpoch int32
	Replicas, ISR  []int32
	InISR          bool  // this broker is in ISR
	DamagedFrom    int64 // first offset known damaged; NoDamage when none
	// Failed: the log failed (a disk error) and is not yet repaired.
	Failed bool
	// TopicDeleted: the replica went because its topic did, not because it
	// moved to other brokers.
	TopicDeleted bool
	// Removing are the replicas a partition move takes away
	// (Assignment.Removing).
	Removing []int32
	// EpochStart is, while leading, the log end when this leader epoch
	// began here: until the high watermark reaches it, the high
	// watermark may be older than records the previous leader already
	// acknowledged (its followers learn the last one with the next
	// fetch), so ListOffsets answers OFFSET_NOT_AVAILABLE, as Kafka does.
	EpochStart int64
}

// Op is what a request wants of a replica.
type Op uint8

const (
	// Produce appends as the leader.
	Produce Op = iota
	// ConsumerRead reads up to the high watermark as the leader (Fetch,
	// ListOffsets, OffsetForLeaderEpoch from clients).
	ConsumerRead
	// ReplicaRead is a follower's fetch from the leader.
	ReplicaRead
	// LocalRead reads this broker's copy, leader or follower (Kafka's
	// debugging consumer, ReplicaID -2).
	LocalRead
)

// Check is the one place a replica's phase becomes a Kafka error code for
// a request; 0 means the replica serves op now, and its log is open.
func (v *View) Check(op Op) int16 {
	if v == nil {
		return kerr.NotLeaderForPartition.Code
	}
	switch v.Phase {
	case Deleting, Deleted:
		if v.TopicDeleted {
			return kerr.UnknownTopicOrPartition.Code
		}
		return kerr.NotLeaderForPartition.Code
	case Offline:
		return kerr.KafkaStorageError.Code
	case Opening:
		return kerr.NotLeaderForPartition.Code
	}
	switch op {
	case LocalRead:
		return 0
	case Produce:
		// A resigning leader takes no new records: the client retries at
		// the next leader.
		if v.Phase != Leading {
			return kerr.NotLeaderForPartition.Code
		}
	default:
		if v.Phase != Leading && v.Phase != Resigning {
			return kerr.NotLeaderForPartition.Code
		}
	}
	return 0
}

// CheckEpoch compares a client's current leader epoch (-1: unchecked) with
// this replica's, as Kafka does (KIP-320): older is FENCED_LEADER_EPOCH,
// newer (this broker is behind) UNKNOWN_LEADER_EPOCH.
func (v *View) CheckEpoch(clientEpoch int32) int16 {
	switch {
	case clientEpoch < 0 || v == nil:
		return 0
	case clientEpoch < v.LeaderEpoch:
		return kerr.FencedLeaderEpoch.Code
	case clientEpoch > v.LeaderEpoch:
		return kerr.UnknownLeaderEpoch.Code
	}
	return 0
}

// Leads reports whether the replica leads (including while resigning).
func (v *View) Leads() bool { return v != nil && (v.Phase == Leading || v.Phase == Resigning) }

// HasReplica reports whether id is one of the partition's replicas.
func (v *View) HasReplica(id int32) bool { return v != nil && slices.Contains(v.Replicas, id) }

// Fetches reports whether a follower's fetcher should fetch it from
// leader now (the divergence check included).
func (v *View) Fetches(leader int32) bool {
	return v != nil && leader >= 0 && (v.Phase == Reconciling || v.Phase == Following) && v.Leader == leader && v.DamagedFrom == NoDamage
}
