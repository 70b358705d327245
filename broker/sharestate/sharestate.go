// Package sharestate is the contract between KIP-932's two broker-side
// halves: the share-partition leaders (broker/sharefetch), which hold
// each share-partition's delivery state in memory on the node that leads
// the data partition, and the share coordinator (broker/sharecoord),
// which keeps that state durable and replicated in the __share_group_state
// topic, on the node that leads the state partition the key hashes to.
// The two are usually different nodes; Persister hides whether a call is
// local or a Kafka RPC (ReadShareGroupState, WriteShareGroupState,
// InitializeShareGroupState, DeleteShareGroupState) to another node.
//
// Records are group/sharepart's: a leader's step returns them, Write makes
// them durable, and Read hands back what Restore needs.
package sharestate

import (
	"context"
	"errors"

	"github.com/fjordlog/fjord/group/sharepart"
)

// Errors a Persister returns (wrapped with context); the broker maps
// them to Kafka codes in its one mapping.
var (
	// ErrNoState: nothing is stored for the key (never initialized, or
	// deleted). The leader initializes it (share.auto.offset.reset).
	ErrNoState = errors.New("sharestate: no state for this share-partition")
	// ErrFencedLeaderEpoch: the caller's leader epoch is older than one
	// the coordinator has seen for the key: a newer leader has taken the
	// share-partition over, and this one must stop serving it.
	ErrFencedLeaderEpoch = errors.New("sharestate: fenced leader epoch")
	// ErrNotAvailable: the coordinator cannot be reached or is loading
	// (retriable; the caller backs off and retries within its bound).
	ErrNotAvailable = errors.New("sharestate: share coordinator not available")
)

// Persister stores share-partition state durably. Every method blocks
// until its outcome is known, bounded by ctx; none may be called while
// holding a lock that a network or disk wait must not hold.
type Persister interface {
	// Read returns the durable state of key as records Restore accepts
	// (a snapshot, possibly followed by updates), and records leaderEpoch
	// as the newest leader of the key: from then on a Write with an
	// older epoch is fenced. ErrNoState when nothing is stored. State
	// initialized without a start offset (-1) is returned as such, at its
	// state epoch: Restore refuses it, and the leader starts it with New
	// at the offset share.auto.offset.reset gives and that state epoch.
	Read(ctx context.Context, key sharepart.Key, leaderEpoch int32) ([]sharepart.Record, error)
	// Write makes recs (returned by the leader's steps, in order)
	// durable: replicated to every in-sync replica of the state
	// partition. Only then may the leader answer the request that caused
	// them. stateEpoch is the leader's sharepart.Partition.StateEpoch():
	// the state epoch of the state it loaded (ShareUpdate records do not
	// carry one; a ShareSnapshot's own is checked). Errors:
	// ErrFencedLeaderEpoch when a newer leader has read the key; a
	// coordinator's fenced-state-epoch error when the stored state epoch
	// is not stateEpoch (the state was initialized again since, by
	// AlterShareGroupOffsets, or deleted and initialized again); ErrNoState
	// when the key has no state. On any error the leader drops what it
	// holds and loads again.
	//
	// Creation: the one write that may create state for a key without
	// any is the first snapshot of a sharepart.New (snapshot epoch 0),
	// which a leader builds only after Read reported ErrNoState. Every
	// other write to a key without state is ErrNoState: a leader that
	// loaded state since deleted must not bring it back. Nor does a
	// leader's write change the state epoch: only the group
	// coordinator's initialization does.
	Write(ctx context.Context, key sharepart.Key, leaderEpoch, stateEpoch int32, recs []sharepart.Record) error
	// Delete removes key's state (its group was deleted, or its offsets
	// were deleted with DeleteShareGroupOffsets).
	Delete(ctx context.Context, key sharepart.Key) error
}
