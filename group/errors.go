package group

import (
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"
)

// Sentinel errors. Every Kafka error code this package produces comes from
// one of these through ErrorCode, the single mapping.
var (
	// ErrUnknownMember: the member id (or instance id) is not in the group.
	ErrUnknownMember = errors.New("group: unknown member id")
	// ErrIllegalGeneration: the request quotes another generation.
	ErrIllegalGeneration = errors.New("group: illegal generation")
	// ErrRebalanceInProgress: the member must rejoin (or, for OffsetCommit,
	// wait for its assignment).
	ErrRebalanceInProgress = errors.New("group: rebalance in progress")
	// ErrFencedInstance: the member id belongs to a static member that a
	// newer instance with the same group.instance.id has replaced.
	ErrFencedInstance = errors.New("group: fenced instance id")
	// ErrGroupDead: the group was deleted; the client should find the
	// coordinator again (which creates a fresh group).
	ErrGroupDead = errors.New("group: group is dead")
	// ErrNonEmptyGroup: Delete of a group that has members.
	ErrNonEmptyGroup = errors.New("group: group is not empty")
	// ErrGroupNotFound: Delete of a group that is already Dead.
	ErrGroupNotFound = errors.New("group: group id not found")
	// ErrInvalidSessionTimeout: outside [MinSessionTimeoutMs, MaxSessionTimeoutMs].
	ErrInvalidSessionTimeout = errors.New("group: invalid session timeout")
	// ErrInconsistentProtocol: wrong protocol type, or no protocol shared
	// with every other member, or a SyncGroup naming another protocol.
	ErrInconsistentProtocol = errors.New("group: inconsistent group protocol")
	// ErrMemberIDRequired: a v4+ JoinGroup without a member id; the response
	// carries the id to rejoin with (KIP-394).
	ErrMemberIDRequired = errors.New("group: member id required")
	// ErrGroupMaxSize: the group has Config.MaxSize members and pending ids.
	ErrGroupMaxSize = errors.New("group: group max size reached")
)

// Sentinel errors of the consumer group protocol (KIP-848, package
// group/consumer), in the same single mapping.
var (
	// ErrInvalidRequest: a request Kafka rejects before it reaches the
	// group (a missing field on a join, an invalid epoch).
	ErrInvalidRequest = errors.New("group: invalid request")
	// ErrFencedMemberEpoch: the member's epoch is neither its current nor
	// (with a subset of its partitions) its previous one; it must abandon
	// its partitions and rejoin with epoch 0.
	ErrFencedMemberEpoch = errors.New("group: fenced member epoch")
	// ErrStaleMemberEpoch: an OffsetCommit or OffsetFetch quotes another
	// epoch than the member's current one.
	ErrStaleMemberEpoch = errors.New("group: stale member epoch")
	// ErrUnreleasedInstanceID: a static member joins with an instance id
	// that another member still holds (it has not left with epoch -2).
	ErrUnreleasedInstanceID = errors.New("group: unreleased instance id")
	// ErrUnsupportedAssignor: the member names a server assignor that
	// group.consumer.assignors does not list.
	ErrUnsupportedAssignor = errors.New("group: unsupported assignor")
	// ErrInvalidRegularExpression: SubscribedTopicRegex does not compile.
	ErrInvalidRegularExpression = errors.New("group: invalid regular expression")
	// ErrUnsupportedVersion: an OffsetCommit below v9 from a member of a
	// consumer group.
	ErrUnsupportedVersion = errors.New("group: unsupported version")
)

var errorCodes = []struct {
	err  error
	kerr *kerr.Error
}{
	{ErrUnknownMember, kerr.UnknownMemberID},
	{ErrIllegalGeneration, kerr.IllegalGeneration},
	{ErrRebalanceInProgress, kerr.RebalanceInProgress},
	{ErrFencedInstance, kerr.FencedInstanceID},
	{ErrGroupDead, kerr.CoordinatorNotAvailable},
	{ErrNonEmptyGroup, kerr.NonEmptyGroup},
	{ErrGroupNotFound, kerr.GroupIDNotFound},
	{ErrInvalidSessionTimeout, kerr.InvalidSessionTimeout},
	{ErrInconsistentProtocol, kerr.InconsistentGroupProtocol},
	{ErrMemberIDRequired, kerr.MemberIDRequired},
	{ErrGroupMaxSize, kerr.GroupMaxSizeReached},
	{ErrInvalidRequest, kerr.InvalidRequest},
	{ErrFencedMemberEpoch, kerr.FencedMemberEpoch},
	{ErrStaleMemberEpoch, kerr.StaleMemberEpoch},
	{ErrUnreleasedInstanceID, kerr.UnreleasedInstanceID},
	{ErrUnsupportedAssignor, kerr.UnsupportedAssignor},
	{ErrInvalidRegularExpression, kerr.InvalidRegularExpression},
	{ErrUnsupportedVersion, kerr.UnsupportedVersion},
}

// ErrorCode maps an error from this package to its Kafka error code: 0 for
// nil, UNKNOWN_SERVER_ERROR for anything it does not know.
func ErrorCode(err error) int16 {
	if err == nil {
		return 0
	}
	for _, e := range errorCodes {
		if errors.Is(err, e.err) {
			return e.kerr.Code
		}
	}
	return kerr.UnknownServerError.Code
}
