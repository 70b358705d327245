package replica

import (
	"fmt"

	"github.com/fjordlog/fjord/protocol/lifecycle"
)

// The core's inputs (configuration, assignments, events) and its output
// (Ready).

// Config is a replica's fixed settings. Times are milliseconds, except
// the backoffs' (durations, counted in whole milliseconds).
type Config struct {
	// ID is this broker's id.
	ID int32
	// SyncOnAck: records count toward the high watermark once fsynced
	// (flush.messages=1), else once appended.
	SyncOnAck bool
	// LagMs is replica.lag.time.max.ms: a follower not caught up for this
	// long leaves the ISR.
	LagMs int64
	// FlushStallMs (fjord.log.flush.stall.max.ms) is how long a leader's
	// own fsync may run before it resigns the leadership (0: never).
	FlushStallMs int64
	// OpenTimeoutMs bounds an open; past it a leadership placed here is
	// resigned (the open keeps running and is adopted if it finishes).
	OpenTimeoutMs int64
	// AlterTimeoutMs bounds an AlterPartition without an answer.
	AlterTimeoutMs int64
	// Open spaces failed opens; after OpenAttempts in a row the replica
	// gives up until restart. Alter spaces refused or unanswered
	// AlterPartitions (ISR changes and resignations); after AlterAttempts
	// in a row it stays at Alter.Max. An Attempts of 0 bounds only the
	// rate, not the count.
	Open, Alter                 lifecycle.Backoff
	OpenAttempts, AlterAttempts int
}

// retryIn is the wait in milliseconds after n failures in a row under b
// (n >= 1), the core's unit of time.
func retryIn(b lifecycle.Backoff, n int) int64 { return b.Delay(n).Milliseconds() }

// Assignment is what the metadata image says about the partition.
type Assignment struct {
	Leader         int32 // -1: none
	LeaderEpoch    int32
	PartitionEpoch int32
	Replicas, ISR  []int32 // read-only
	// Live are the replicas the image shows unfenced; a damaged leader
	// resigns only to a live ISR member.
	Live []int32
	// Removing are the replicas a partition move takes away (a subset of
	// Replicas; nil when none moves): the partition's replication factor
	// is len(Replicas) - len(Removing).
	Removing []int32
}

// Events. Each is a value the owner passes to Step.
type (
	// Assign carries the partition's state in a new metadata image.
	Assign struct{ Assignment }
	// Unassign: the image no longer places the replica here.
	Unassign struct{ TopicDeleted bool }
	// OpenDone answers Ready.Open: the log's offsets, or the error.
	OpenDone struct {
		Err                 error
		Start, End, Durable int64
	}
	// Appended: the log end moved to End (a leader's or a follower's append).
	Appended struct{ End int64 }
	// Flushed: everything below Durable is fsynced.
	Flushed struct{ Durable int64 }
	// FollowerFetched: follower ID fetched at Offset (its log end),
	// reporting Durable as its durable end (FollowerDurableEnd: the
	// fetch's DurableEndTag, or Offset when it carries none; above Offset
	// counts as Offset, negative as nothing) and its log start offset
	// LogStart (-1: not reported, Fetch v4). LeaderEpoch is the epoch of
	// the view the fetch was checked against (its CurrentLeaderEpoch,
	// leadership, membership); a report checked against another epoch
	// than the core's counts for nothing: the check and the step are
	// apart, and in between this replica may have followed another leader,
	// cut its log and led again, so the offsets may name records the
	// follower does not have.
	FollowerFetched struct {
		ID          int32
		LeaderEpoch int32
		Offset      int64
		Durable     int64
		LogStart    int64
	}
	// StartMoved: the log start offset moved forward to Start
	// (AdvanceStartOffset: DeleteRecords, or a follower following its
	// leader's start).
	StartMoved struct{ Start int64 }
	// LeaderHW is the high watermark in the leader's fetch response.
	LeaderHW struct{ HW int64 }
	// Truncated: the log was cut to End (divergence, or a damage repair
	// when Repaired), or restarted at End (behind the leader's start).
	Truncated struct {
		Start, End int64
		Repaired   bool
	}
	// Reconciled: a follower's log now matches its leader's, at
	// LeaderEpoch, up to its end.
	Reconciled struct{ LeaderEpoch int32 }
	// Diverged: a follower's fetch at LeaderEpoch found its log no longer
	// matches (an append refused, an offset out of range): reconcile again.
	Diverged struct{ LeaderEpoch int32 }
	// DamageFound: a read found the log damaged from Offset on.
	DamageFound struct{ Offset int64 }
	// LogFailed: the log takes no more appends (a failed fsync: the page
	// cache cannot be trusted; a write it could not undo), for Why.
	// SetAside: the disk failed (EIO), so a repair should set the copy
	// aside and fetch the partition again, rather than reopen it in place
	// (a full disk: recovery keeps what is whole).
	LogFailed struct {
		Why      string
		SetAside bool
	}
	// FlushStalled: an fsync of the log has been running for ForMs.
	FlushStalled struct{ ForMs int64 }
	// LeaderDamaged: the leader answered KAFKA_STORAGE_ERROR: its copy is
	// damaged and it is handing the partition on; pause fetching briefly.
	LeaderDamaged struct{}
	// AlterAnswered answers Ready.Propose: the partition's error code, or
	// -1 when no answer came.
	AlterAnswered struct {
		Proposal Proposal
		Code     int16
	}
	// LogDeleted answers Ready.Delete.
	LogDeleted struct{}
	// Reconfigured: the topic's flush policy changed at run time
	// (flush.messages, or its broker default, altered): SyncOnAck from now.
	Reconfigured struct{ SyncOnAck bool }
)

// Proposal is an AlterPartition to send from this leader: an ISR change,
// or, without this broker in ISR, a resignation (the controller then
// elects another ISR member).
type Proposal struct {
	LeaderEpoch, PartitionEpoch int32
	ISR                         []int32
	Resign                      bool
	Why                         string
}

// Repair is how a failed log is brought back (Ready.Repair).
type Repair struct{ SetAside bool }

// Ready is what a Step or Tick asks of the owner, in this order: publish
// View (when ViewChanged) and HW, record StartEpoch in the log before any
// append of the new leader, wake waiters, then do the I/O (Open, Propose,
// TruncateTo, Delete) and answer each with its event.
type Ready struct {
	ViewChanged bool
	HWMoved     bool // HW moved (up on a leader; a follower's may drop)
	HW          int64
	// StartEpoch >= 0: this broker leads from now at that epoch, starting
	// at StartOffset; the log must record it before the first append.
	StartEpoch  int32
	StartOffset int64
	WakeHW      bool // acks=all and long-poll waiters look again
	WakeAppend  bool // replica long polls look again
	WakeLow     bool // a log start moved here or on a follower: DeleteRecords waiters look again
	Open        bool // open the log, answer OpenDone
	// Repair: close the failed log, set its directory aside (SetAside)
	// or keep it, and open it again (empty once set aside); answer
	// OpenDone.
	Repair     *Repair
	Propose    *Proposal
	TruncateTo int64 // >= 0: cut the log there (damage repair), answer Truncated{Repaired}
	Delete     bool  // close and remove the log, answer LogDeleted
	// Notes are state changes worth one log line each.
	Notes []string
}

func (r *Ready) note(format string, args ...any) {
	r.Notes = append(r.Notes, fmt.Sprintf(format, args...))
}
