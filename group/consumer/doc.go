// Package consumer is the state machine of one consumer group under
// KIP-848's protocol (ConsumerGroupHeartbeat, Kafka 4.x's ConsumerGroup and
// the consumer-group half of its GroupMetadataManager): members, their
// subscriptions (topic names and regular expressions), the group epoch,
// the target assignment computed by a server-side assignor (group/assign),
// and every member's incremental reconciliation towards it. Offsets are
// not kept here; CheckOffsetCommit and ValidateOffsetFetch say whether a
// member may use them. Classic groups are package group; consumers that
// still speak the classic protocol may be members of a consumer group
// (classic.go), and a group migrates online between the two protocols
// (convert.go).
//
// A Group is a plain struct, as in package group: no goroutines, clocks,
// sockets, files or logging. Time comes in as now (Unix milliseconds),
// the cluster's topics as an *Image (package group/topics, shared with
// group/share), and every call returns the records to persist. The caller
// (the coordinator) owns the clock, the locking (one call at a time), the
// I/O and the persistence. Given the same calls, a Group returns the same
// responses and records byte for byte (TestDeterminism).
//
// # What the coordinator does
//
//   - Heartbeat / HeartbeatFrom for every ConsumerGroupHeartbeat of the
//     group; persist the records, then send the response. After a failed
//     first join the group's Epoch is still 0: nothing created it, drop it.
//   - Tick at NextDeadline (or any time after): session and rebalance
//     timeouts.
//   - MetadataChanged whenever its metadata image changes topics (created,
//     deleted, partitions added), for every consumer group, and once after
//     a load.
//   - On load: New, Replay for every record whose key GroupOfKey gives
//     this group, in log order, then Loaded(now), then MetadataChanged. A
//     group that ends Dead was deleted: drop it.
//   - Delete for DeleteGroups (and offset expiry of an Empty group): on
//     success persist the tombstones and drop the group.
//   - CheckOffsetCommit for every OffsetCommit and TxnOffsetCommit naming a
//     member, then CommitCheck.Partition for each partition it would
//     write (KIP-1251); ValidateOffsetFetch for every OffsetFetch v9+.
//   - ClassicJoin, ClassicSync, ClassicHeartbeat and ClassicLeave for the
//     JoinGroup, SyncGroup, Heartbeat and LeaveGroup of a group with
//     members (after checking JoinGroup's session timeout bounds); persist
//     the records before answering.
//   - Upgrade when a ConsumerGroupHeartbeat joins a classic group with
//     members: run the join on the group it returns, and keep it (and
//     persist the conversion's records, then the join's) only if the
//     join succeeded. After any call, a Dead group whose Downgraded is
//     set became a classic group: restore it (group.Restore) and start its
//     rebalance (group.Group.Rebalance).
//
// # States
//
// The group, by Kafka's names (State):
//
//	+-------+     +-----------+     +-------------+     +--------+
//	| Empty | --> | Assigning | --> | Reconciling | --> | Stable |
//	+-------+     +-----------+     +-------------+     +--------+
//	  |   ^             ^      epoch bump   |                |
//	  |   |             +-------------------+----------------+
//	  |   +------------ last member removed (from any state)
//	  | Delete
//	  v
//	+------+
//	| Dead |
//	+------+
//
//	Empty       -> Assigning    a member joins
//	any         -> Assigning    the group epoch moves: a member joins,
//	                            leaves or is removed, changes what it
//	                            subscribes to, or subscribed topics change
//	Assigning   -> Reconciling  a heartbeat (of any member) computes the
//	                            target assignment of the epoch
//	Reconciling -> Stable       every member reached its target
//	any         -> Empty        the last member is removed; the group keeps
//	                            its epoch (and its offsets) until deleted
//	Empty       -> Dead         Delete
//
// A heartbeat that moves the epoch also computes the new target, so
// Assigning is seen between calls only after a removal or a metadata
// change.
//
// A member (the State of ConsumerGroupCurrentMemberAssignment), one
// heartbeat at a time (reconcile.go, Kafka's CurrentAssignmentBuilder),
// once the target epoch moved past it:
//
//	stable, unreleased -> unrevoked   it owns partitions the new target
//	                                  gives others: it keeps its epoch and
//	                                  must stop consuming them
//	stable, unreleased,               nothing (more) to revoke: it moves to
//	unrevoked          -> stable      the target epoch with its partitions
//	                                  that stay and every new one that is
//	                                  free
//	                   -> unreleased  ... but some new ones are still owned
//	                                  by others: it takes what is free and
//	                                  waits for the rest
//
// An unrevoked member moves on once a heartbeat no longer reports the
// partitions it had to revoke; an unreleased one at each heartbeat takes
// what has become free.
//
// A member never gets a partition another member still owns (assigned or
// being revoked): the owner first revokes it, staying at its epoch
// (unrevoked) until a heartbeat no longer reports it; only then is it
// given to the new owner, which may already be at the new epoch waiting
// for it (unreleased). A member that does not revoke within its rebalance
// timeout is removed; so is one whose session expires.
//
// Epochs: the group epoch moves when the members or what they subscribe
// to change; the target assignment is computed for a group epoch
// (AssignmentEpoch); a member's epoch is the target epoch it has reached.
// A heartbeat must quote the member's epoch, or its previous epoch while
// reporting only partitions it is assigned (the response that moved it on
// was lost); anything else is FENCED_MEMBER_EPOCH, after which the client
// rejoins with epoch 0 under the same member id and gets its state back.
//
// Assignment epochs (KIP-1251, Kafka 4.3): every partition a member owns
// remembers the epoch at which the member got it (epochs.go). An offset
// commit at the member's epoch may write any partition; at an older epoch
// (the response that moved the member on was lost: the client still
// commits at the epoch it knows) only the partitions the member has held
// since that epoch or earlier, which nobody else can have owned in
// between; at a newer epoch none.
//
// # Classic members and migration
//
// A classic member (ClassicMemberMetadata set) is a member like any other
// (classic.go, Kafka's classicGroup*ToConsumerGroup): the server assignor
// gives it its target, and it reconciles by the rules above, one
// JoinGroup at a time, from the owned partitions its subscription
// reports (none for an eager consumer). JoinGroup answers at once with
// the member epoch as the generation and no leader; SyncGroup gives it
// its assigned partitions (not those it waits for) as a
// ConsumerProtocolAssignment of its subscription's version; Heartbeat
// answers REBALANCE_IN_PROGRESS whenever it must rejoin: the group epoch
// moved past it, it has partitions to revoke, or every partition it waits
// for was released. It has no rebalance timeout of its own: told to
// rejoin, it must within its rebalance timeout (join deadline), and having
// joined, sync within it (sync deadline), else it is removed; its session
// timeout is its JoinGroup's. It commits offsets at its epoch with any
// OffsetCommit version (ILLEGAL_GENERATION otherwise). Static classic
// members replace their instance's holder when they join without a member
// id, whatever its protocol.
//
// Upgrade (convert.go, Kafka's convertToConsumerGroup) turns a classic
// group with members into a consumer group: group epoch and target epoch =
// the generation, every member stable at that epoch owning and targeted
// with its classic assignment. The policy (Config.MigrationPolicy), the
// protocol type ("consumer"), Config.MaxSize, every member's subscription
// and assignment parsing, and no assignment carrying user data (a custom
// assignor's) are its conditions; a refusal is GROUP_ID_NOT_FOUND with
// Kafka's message. The downgrade (Kafka's convertToClassicGroup) happens in
// place of removing the last member that uses ConsumerGroupHeartbeat
// (it left with -1, or its session or rebalance timeout expired) while
// classic members remain, the policy allows it and they fit
// Config.ClassicMaxSize: the group's records are tombstoned and a classic
// GroupMetadata (key version 2) is written, Stable at generation = the
// group epoch, its protocol chosen as package group chooses, the first
// member by id leading, each member with its target assignment; the group
// is Dead and Downgraded holds the classic group for the caller, which
// rebalances it. A static classic member joining under the instance id of
// the last member using ConsumerGroupHeartbeat downgrades the group too,
// in its place and without a rebalance (Kafka's
// validateOnlineDowngradeWithReplacedMemberId).
//
// # Records
//
// The group's durable state lives in Kafka's own __consumer_offsets record
// types, with Kafka's bytes (records.go on group/internal/wire's
// primitives, pinned in records_test.go):
//
//	key   = int16 type | STRING group id | [STRING member id or regex]
//	value = int16 version (0) | fields, flexible encoding | tagged fields
//	        (STRING: int16 length; COMPACT_STRING / COMPACT_ARRAY: uvarint
//	        length+1, 0 for null; UUID: 16 bytes; tagged fields: uvarint
//	        count, then uvarint tag, uvarint size, data; nil value: tombstone)
//
//	type  record                                  value fields
//	 3    ConsumerGroupMetadata                   Epoch int32; tag 0 MetadataHash int64
//	 4    ConsumerGroupPartitionMetadata          (pre-4.1; replayed, tombstoned at the next bump)
//	 5    ConsumerGroupMemberMetadata   (member)  InstanceId?, RackId?, ClientId, ClientHost,
//	                                              SubscribedTopicNames [], SubscribedTopicRegex?,
//	                                              RebalanceTimeoutMs int32, ServerAssignor?;
//	                                              tag 0 ClassicMemberMetadata? {SessionTimeoutMs
//	                                              int32, SupportedProtocols [] {Name, Metadata
//	                                              COMPACT_BYTES}} (a nullable tagged struct: a
//	                                              presence uvarint 1 first), classic members only
//	 6    ConsumerGroupTargetAssignmentMetadata   AssignmentEpoch int32
//	 7    ConsumerGroupTargetAssignmentMember     TopicPartitions [] {TopicId, Partitions []int32}
//	      (member)
//	 8    ConsumerGroupCurrentMemberAssignment    MemberEpoch, PreviousMemberEpoch int32, State int8,
//	      (member)                                AssignedPartitions [], PartitionsPendingRevocation [],
//	                                              each {TopicId, Partitions []int32; tag 0
//	                                              AssignmentEpochs []int32?, aligned with Partitions
//	                                              (4.3, KIP-1251; absent: the member epoch, >= 0)}
//	16    ConsumerGroupRegularExpression (regex)  Topics [], Version int64, Timestamp int64
//
// They are emitted as deltas in Kafka's order: a member record when the
// member joins or its metadata changes, then regular expressions, the
// group epoch, the target assignment of the members whose target changed
// followed by the target epoch, and the member's current assignment; a
// removed member's current assignment, target and metadata tombstones,
// then the epoch. An upgrade writes the classic GroupMetadata's tombstone,
// every member, the epoch, every target, the target epoch and every
// current assignment; a downgrade the tombstones of every record (current
// assignments, targets, target epoch, members, expressions, group) and
// the classic GroupMetadata. The group applies its own records through
// the same code as Replay (apply.go), so a group replayed from its records
// equals the live one (checked after every test step, classic members
// included); the classic GroupMetadata is the coordinator's, not this
// package's (GroupOfKey rejects it, ClassicGroupOfKey names it).
//
// # Where this follows Kafka and where it does not
//
// It follows Kafka 4.1/4.2's group coordinator: request validation and its
// messages, the error order (group exists, max size, member and instance
// lookup, epoch, regular expression), static membership with epoch -2
// leaves that keep the assignment until the session expires, the
// previous-epoch tolerance, the reconciliation rules, the assignment sent
// on a join, on a full request and when it changed, the group states, the
// offset validation rules, and the records. It includes KAFKA-19233 (a
// member may rejoin with epoch 0 under its own id and get its state back)
// and Kafka 4.3's KIP-1251 (assignment epochs: the records' tag, the
// reset to 0 when a static member leaves with -2, and the commit rule of
// ConsumerGroup.validateOffsetCommit and its per-partition validator).
// It departs from Kafka where Kafka is asynchronous, unreleased or not
// expressible here:
//
//   - Regular expressions are resolved synchronously, against the Image
//     of the call, when the first member subscribes and on every
//     MetadataChanged (Kafka: in a background executor, batched, at most
//     every 10 s, refreshed when topics are created or after
//     group.consumer.regex.refresh.interval.ms). Go's regexp (RE2) stands
//     for RE2/J, full-match like Kafka's matches(). As in Kafka, only
//     topics the heartbeating member's principal may DESCRIBE are kept
//     (Visibility, from the caller's authorizer); a change no heartbeat
//     brings leaves the resolutions as they are. A resolved
//     expression's record is written only when its topics change, with
//     Version 0 (Kafka: the metadata image's offset).
//   - A member switching to a new regular expression bumps the epoch when
//     its topics change (Kafka bumps only if the new expression matched
//     something, which can leave its old partitions unassigned until the
//     next rebalance).
//   - The metadata hash (tag 0 of type 3) is this package's FNV-64a
//     fingerprint of the subscribed topics' names, ids and partition counts
//     (Kafka: XXHash64 including racks), so rack changes do not rebalance.
//     MetadataChanged bumps the epoch at once; Kafka marks the group and
//     bumps at its next heartbeat.
//   - A static member rejoining with epoch 0 under its own member id is
//     re-admitted in place (its epoch restarts if it had left with -2), and
//     a join that changes a known member's instance id is INVALID_REQUEST:
//     the fix of Kafka PR 23542. Released Kafka answers
//     UNRELEASED_INSTANCE_ID, which is fatal for the Java client.
//   - Loaded arms the rebalance timeout of members that have partitions to
//     revoke; Kafka arms it for every member in the unrevoked state, which
//     fences a static member that left with -2 at its rebalance timeout
//     instead of its session timeout.
//   - Assignor ties (as many members naming each) go to the one listed
//     first in Config.Assignors (Kafka: hash map order). Describe lists
//     members by id and topics by name (Kafka: hash order).
//   - Member ids generated for v0 joins are derived from the group id,
//     Config.MemberIDNonce and a counter (Kafka: random UUIDs).
//   - Classic members: a JoinGroup from a new member (no member id, v4+)
//     gets a member id generated as for v0 heartbeats; ClassicSync and
//     ClassicHeartbeat answer at once (Kafka completes them once its
//     earlier writes are committed). The classic GroupMetadata a
//     downgrade writes is version 3. Members are
//     converted in member id order, and the downgraded group's leader is
//     the first of them (Kafka: hash map order). DescribeClassic answers
//     for DescribeGroups that this is not a classic group, as Kafka 4.x
//     does for any consumer group.
//   - Group-level overrides of group.consumer.* (dynamic group configs)
//     are the caller's: it passes each group its Config.
//   - A heartbeat to a Dead group answers COORDINATOR_NOT_AVAILABLE (the
//     caller should have dropped it; Kafka has no such group).
//   - CheckOffsetCommit returns a CommitCheck holding the member's epochs
//     of that moment, so that the caller may check the partitions after
//     letting go of the group; Kafka validates and writes in one step of
//     its coordinator shard. Kafka fails the whole commit with the first
//     partition refused; CommitCheck answers per partition and leaves
//     that to the caller, as it leaves TxnOffsetCommit's mapping of
//     STALE_MEMBER_EPOCH to ILLEGAL_GENERATION. ValidateOffsetCommit keeps
//     the rule before KIP-1251 (exact epoch) for a caller that does not
//     check partitions.
package consumer
