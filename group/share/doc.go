// Package share is the membership state machine of one KIP-932 share group
// as Kafka 4.2 runs it: ShareGroupHeartbeat (join, heartbeat, leave),
// session timeouts, the group epoch, the target assignment computed by the
// share assignor ("simple", group/assign), each member's assignment, and
// ShareGroupDescribe. The delivery state of the share-partitions (which
// records are acquired, acknowledged, redelivered) is not here but in
// group/sharepart; what this package tells the coordinator is which
// partitions the group consumes (SubscribedPartitions, Initialized) and
// which members went away (Left).
//
// A Group is a plain struct: no goroutines, clocks, sockets, files or
// logging. Time comes in as now (unix milliseconds); Tick applies session
// timeouts and NextDeadline says when the next one is due. The caller owns
// the clock, the metadata image (the current one passed as an *Image, from
// package group/topics as in group/consumer, to every call that resolves
// topic names), the locking (one call at a time) and the offsets topic:
// every mutating call returns the records to append before the response
// is sent. Given the same calls, a Group returns the same responses and
// records byte for byte (TestDeterminism).
//
// The coordinator's part, in short: route ShareGroupHeartbeat to
// HeartbeatFrom (creating the Group for an epoch 0 request, answering
// GROUP_ID_NOT_FOUND otherwise when it has none), call Tick at
// NextDeadline and MetadataChanged when topics change, make sure the
// share-partitions of SubscribedPartitions have state, release what the
// members in Left had acquired, answer ShareGroupDescribe with Describe,
// and on load Replay the group's records (GroupOfKey) and call Loaded.
//
// # States
//
//	                first member joins (epoch 0 heartbeat)
//	+-------+ ---------------------------------------------> +--------+
//	| Empty |                                                | Stable | ---+
//	+-------+ <--------------------------------------------- +--------+    | a member joins, leaves,
//	    |        last member leaves or its session expires       ^         | expires, changes its
//	    | Delete (DeleteGroups)                                  +---------+ subscription, or the
//	    v                                                                    subscribed topics change:
//	+------+                                                                 epoch + 1
//	| Dead | terminal: the caller drops the Group
//	+------+
//
// These are Kafka's three share group states; the state is only a function
// of the member count. Everything else is epochs:
//
//   - The group epoch goes up by one when a member joins, leaves or is
//     removed, changes its subscribed topic names, or when the subscribed
//     topics themselves change (the metadata hash: created, deleted,
//     repartitioned).
//   - The next heartbeat of any member after that computes a new target
//     assignment for the group epoch (the target epoch catches up).
//   - A member whose epoch is behind the target epoch moves to it on its
//     own next heartbeat, taking its target partitions at once: share
//     groups have no revocation phase, because several members may consume
//     one partition and records are locked per member, not per partition.
//     Every member is therefore always in Kafka's STABLE member state.
//   - A heartbeat must carry the member's epoch or the one before it (the
//     response that bumped it may have been lost); anything else is
//     FENCED_MEMBER_EPOCH, after which the member rejoins with epoch 0 and
//     its same id.
//
// Forced exits: nothing waits for an event that may never come. The only
// timer is each member's session (Config.SessionTimeoutMs), restarted by
// each successful heartbeat and ended by Tick, which removes the member as
// a leave would.
//
// # Records
//
// Every change is a record in the offsets topic, in Kafka 4.2's own
// format, and the group applies its records to itself exactly as Replay
// does: replaying a group's records rebuilds the group (checked after every step of every test).
// Keys are the classic encoding: int16 record type (Kafka's key version,
// since 4.0 the schema's "apiKey"), then STRING fields (int16 length,
// bytes). Values are the flexible encoding of version 0: int16 version 0,
// the fields, and an empty tagged-field section (uvarint 0) after every
// struct; COMPACT_STRING is uvarint(len+1) then bytes (0 = null),
// COMPACT_ARRAY uvarint(n+1) then elements, UUID 16 bytes, integers big
// endian (the primitives are group/internal/wire's, shared with
// group/consumer and group/sharepart). A tombstone is a record with the key
// and no value.
//
//	type  record                              key fields          value fields
//	 10   ShareGroupMemberMetadata            GroupId, MemberId   RackId (nullable), ClientId, ClientHost,
//	                                                              SubscribedTopicNames []string (sorted)
//	 11   ShareGroupMetadata                  GroupId             Epoch int32, MetadataHash int64
//	 12   ShareGroupTargetAssignmentMetadata  GroupId             AssignmentEpoch int32
//	 13   ShareGroupTargetAssignmentMember    GroupId, MemberId   TopicPartitions []{TopicId uuid, Partitions []int32}
//	 14   ShareGroupCurrentMemberAssignment   GroupId, MemberId   MemberEpoch int32, PreviousMemberEpoch int32,
//	                                                              State int8 (0 = STABLE),
//	                                                              AssignedPartitions []{TopicId, Partitions}
//	 15   ShareGroupStatePartitionMetadata    GroupId             InitializingTopics, InitializedTopics
//	                                                              []{TopicId, TopicName, Partitions []int32},
//	                                                              DeletingTopics []{TopicId, TopicName}
//
// Type 9 (ShareGroupPartitionMetadata, Kafka 4.0's subscription metadata)
// is recognized and replayed as nothing, as Kafka 4.1+ does. Topic lists
// are written sorted by topic id, partitions ascending.
//
// Order, as Kafka writes them: a heartbeat writes 10 (if the member's
// subscription, client or rack changed), 11 (if the epoch moves), 13 for
// every member whose target changed and then 12 (if a new target
// assignment was computed), 14 (if the member's epoch or partitions
// changed) and 15 (if the share-partitions changed). A leave or an expired
// session writes tombstones of 14, 13 and 10, then 11 with the next epoch.
// Delete writes tombstones of 12, 15 and 11; the group is then Dead, and a
// later record for its id starts a new group.
//
// # Where this follows Kafka and where it does not
//
// It follows Kafka 4.2's GroupMetadataManager (shareGroupHeartbeat,
// shareGroupLeave, shareGroupFenceMember, the share group replay),
// ShareGroup, ShareGroupMember and ShareGroupAssignmentBuilder: the checks
// and their order and messages, the epoch rules, when the epoch is bumped,
// when the assignment is sent, the records and their order, the session
// timeout, group.share.max.size. It departs where Kafka involves another
// component or is arbitrary:
//
//   - Share-partition initialization. Kafka assigns a partition only once
//     its share-group state is initialized by the share coordinator: a
//     heartbeat writes the missing partitions to ShareGroupStatePartition
//     Metadata as initializing, asks the persister to initialize them, and
//     when it answers moves them to initialized; the next heartbeat then
//     bumps the epoch and assigns them. Here every subscribed partition is
//     assignable at once, written straight to InitializedTopics (never
//     InitializingTopics) by the heartbeat or MetadataChanged that first
//     sees it subscribed; the coordinator must make sure its
//     share-partition state exists (SubscribedPartitions), for instance
//     creating it on first use. A first member therefore gets partitions in
//     its first heartbeat response instead of a later one.
//     The offsets administration (offsets.go: AlterShareGroupOffsets,
//     DeleteShareGroupOffsets, DeleteGroups) is what adds to
//     InitializingTopics and DeletingTopics, as Kafka's does; entries there
//     are kept until their topic is deleted. Topics deleted from the image
//     leave the record (Kafka moves them through DeletingTopics while the
//     share coordinator deletes their state).
//   - The metadata hash is ours (FNV-64a over subscribed topics' names,
//     ids and partition counts; Kafka: XXHash64 also over racks), and it is
//     recomputed on every heartbeat and by MetadataChanged, where Kafka
//     recomputes it on the heartbeat after a refresh deadline or an image
//     change touching a subscribed topic. Same epochs, possibly bumped one
//     call earlier.
//   - A member that rejoins with epoch 0 while the group still has it is
//     accepted and gets its current epoch and assignment, as Kafka does
//     since KAFKA-19233 (January 2026); earlier 4.2 code answered
//     FENCED_MEMBER_EPOCH until the member's session expired.
//   - Kafka iterates hash maps; here members are processed in id order and
//     topics in id order, so records and responses are deterministic.
//   - Left, IsMember and Assigned have no Kafka counterpart in the
//     group coordinator. Kafka's ShareFetch and ShareAcknowledge check
//     neither membership nor assignment, and a departed member's acquired
//     records are released when its share session ends or their
//     acquisition lock expires; Left lets the coordinator release them when
//     the member is removed, which is sooner (kfake does the same).
//   - The group id in the request must be this group's (a coordinator
//     bug otherwise: INVALID_REQUEST). A Dead group answers
//     COORDINATOR_NOT_AVAILABLE, so the client looks again and the caller,
//     which drops Dead groups, creates a new one.
//   - Kafka's SimpleAssignor differs from assign.Simple in which member gets
//     which partition (see group/assign); the balance is the same.
//
// Share groups have no static membership, no client-side assignors and no
// regular expression subscriptions in Kafka 4.2; nor does this package.
package share
