// Package group is the membership state machine of one consumer group under
// Kafka's classic group protocol (JoinGroup, SyncGroup, Heartbeat,
// LeaveGroup; not KIP-848). Offsets are not kept here.
//
// A Group is a plain struct: no goroutines, clocks, sockets, files or
// logging. Time comes in as now (Unix milliseconds) on every call. Each call
// returns the replies that became ready because of it, which may include
// replies to other members' parked requests. Tick applies timeouts, and
// NextDeadline says when the next one is due. The caller owns the clock, the
// connections and the locking, and must call one method at a time. Given
// the same calls with the same arguments, a Group returns the same replies
// byte for byte (see determinism_test.go).
//
// # States
//
//	                  first member joins
//	+-------+ --------------------------------> +--------------------+
//	| Empty |                                   | PreparingRebalance | <-------+
//	+-------+ <-------------------------------- +--------------------+         |
//	    |      join phase ends with no members     |                           |
//	    | Delete                                   | all members rejoined, or  |
//	    v                                          | the join deadline passed  |
//	+------+                                       | (stragglers removed)      |
//	| Dead | terminal: the caller                  v                           |
//	+------+ drops the Group            +---------------------+                |
//	                                    | CompletingRebalance | ----- (A) -----+
//	                                    +---------------------+                |
//	                                               |                           |
//	                                               | the leader's SyncGroup    |
//	                                               v                           |
//	                                          +--------+                       |
//	                                          | Stable | ---------- (A) -------+
//	                                          +--------+
//
//	(A) a member joins or changes its metadata, the leader rejoins, a member
//	    leaves, misses its session, or never sends SyncGroup
//
// The generation goes up by one at the end of every join phase, including
// one that ends with no members (Empty), as in Kafka.
//
// # Forced exits
//
// No state waits for an event that may never come:
//
//   - Empty: nothing waits. Member ids handed out with MEMBER_ID_REQUIRED
//     expire after the session timeout of the join that asked for them.
//   - PreparingRebalance: the join deadline, set when the phase starts to
//     the largest rebalance timeout among the members, ends the phase; the
//     members that did not rejoin are removed. A phase that starts from
//     Empty instead waits group.initial.rebalance.delay.ms, extended by the
//     same delay while new members keep arriving, up to the rebalance
//     timeout. Members that have not rejoined still need their sessions.
//   - CompletingRebalance: the sync deadline (the rebalance timeout again)
//     removes every member that has not sent SyncGroup, including a leader
//     that never sends the assignment, and starts a new rebalance. Members
//     that got their JoinGroup response but are not parked in SyncGroup
//     need their sessions.
//   - Stable: session timeouts; the sync deadline still applies to members
//     that never sent SyncGroup after the last join phase.
//   - Any rebalancing state: a member whose joins have forced
//     Config.MaxRebalanceAttempts rebalances since the group was last
//     Stable is removed when it tries to force another (the ceiling on a
//     rebalance storm).
//
// Every parked request is answered exactly once: with its result, with an
// error when its member is removed or fenced, or with
// REBALANCE_IN_PROGRESS when a new rebalance supersedes it.
//
// # Where this follows Kafka and where it does not
//
// It follows Apache Kafka's classic group coordinator (GroupCoordinator in
// 2.x-3.x, ClassicGroup and GroupMetadataManager since 3.7): error order,
// KIP-394 pending member ids, KIP-345 static membership (a known instance
// id rejoining a Stable group replaces the old member without a rebalance,
// and KIP-814 skip-assignment for a static leader at JoinGroup v9+), the
// pending-sync timeout, protocol voting, initial rebalance delay. It
// departs from Kafka where Kafka can wait forever or is arbitrary:
//
//   - The end of a join phase keeps static members that did not rejoin (as
//     Kafka does), but only if at least one member did rejoin; Kafka instead
//     reschedules the phase, which an alive static member that heartbeats
//     without rejoining can prolong indefinitely.
//   - A protocol vote tie goes to the protocol the leader prefers (Kafka:
//     hash map order).
//   - A rejoining member's own previous protocols are not counted when
//     checking that it shares a protocol with the group, so a sole member
//     can switch protocols (Kafka counts them and refuses).
//   - MaxRebalanceAttempts has no Kafka equivalent.
//   - A parked JoinGroup or SyncGroup that the same member replaces with a
//     new one is answered REBALANCE_IN_PROGRESS rather than dropped.
//   - Requests quoting a member id that a static member replaced get
//     FENCED_INSTANCE_ID even without the instance id (Kafka:
//     UNKNOWN_MEMBER_ID when the instance id is absent).
//
// # Rebalance timeline
//
// Each group keeps its last TimelineLen rebalances (Timeline): the cause
// (a member joined, left or went silent, changed its metadata, the leader
// rejoined, a static member was replaced, members never synced, a member
// hit the rebalance limit), the member, the generations, and when the
// rebalance started, its join phase ended and it settled (Stable, Empty, or
// superseded by the next one). The console shows it; nothing here reads it.
//
// Member ids are clientID (or, for static members, the instance id) + "-" +
// [Config.MemberIDNonce + "-"] + a per-group counter: unique within the
// group and repeatable in tests.
package group
