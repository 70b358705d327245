// Package sharefetch is the share-partition leader side of KIP-932 share
// groups (Kafka 4.2's SharePartitionManager, the I/O of its
// SharePartition, ShareSessionCache, and KafkaApis' ShareFetch and
// ShareAcknowledge): for every share group consuming a data partition this
// node leads, the delivery state of that share-partition (which records
// are available, acquired by which member until when, acknowledged or
// archived), kept in memory here and made durable through the share
// coordinator (broker/sharestate.Persister) before any answer that
// depends on it.
//
// The delivery state machine itself is group/sharepart's, pure and
// deterministic; this package drives it: it reads the log, reads the
// clock, serializes the steps of each share-partition, writes their
// records in step order, keeps the share sessions, waits for data, and
// answers the two APIs.
//
// # Share-partitions
//
// A share-partition (group, topic id, partition) is loaded on the first
// ShareFetch that names it, under the leader epoch this node leads the
// partition at: Persister.Read (which fences any older leader's writes),
// then sharepart.Restore, or, with nothing stored or no start offset
// stored (AlterShareGroupOffsets gave none), sharepart.New at the offset
// share.auto.offset.reset gives (latest: the high watermark; earliest: the
// log start; by_duration: ListOffsets by timestamp) and the state epoch
// read (0 for none), then the first snapshot is written. Every write
// carries that state epoch, which the share coordinator fences. Until then it is loading. It is dropped,
// and loaded afresh on next use, when this node no longer leads the
// partition at that epoch (noticed by every use and by the expiry loop,
// or told by Unload), when a write fails or is fenced, and when its group
// is reset (UnloadGroup). It is unloaded while idle (nothing acquired,
// nothing to write) when its group has no share session here any more,
// or when the cap on loaded share-partitions needs the room.
//
//	           first ShareFetch                Read, Restore/New, Write ok
//	(absent) ----------------------> loading ----------------------------> serving
//	    ^                               |                                    |
//	    |   read/write failed, fenced   |    leader epoch gone, write failed |
//	    +------------ dropped <---------+------------------------------------+
//	                                         or fenced, unloaded
//
// partition.go says how steps are serialized (a mutex for the pure step,
// an ordered queue and one writer for the records) and why.
//
// # Sessions, fetches, acknowledgements, expiry
//
// session.go keeps the share sessions (Kafka's epochs and errors);
// fetch.go reads the log and acquires, waiting up to MaxWaitMs: up to the
// high watermark, or, when the group's share.isolation.level is
// read_committed, up to the last stable offset, leaving aborted
// transactions' batches out as gaps. The level is read from the group's
// config for every ShareFetch (as Kafka does), unlike the settings a
// share-partition loads with; a change applies from the next request,
// records already in flight included. ack.go
// applies acknowledgements; expiry.go ends acquisition locks when no
// request does. 78_share_fetch.go and 79_share_acknowledge.go are the two
// APIs' room (their registrations, for broker/api), api.go what they need
// of the node (APIHost); host.go what the Manager needs (Host, Replica)
// and its settings.
//
// # Goroutines and locks
//
// Handlers run on the connection's reader goroutine only for what never
// waits (session bookkeeping, acknowledgement steps); the waits (writes,
// long polls) run on node goroutines (APIHost.Go). The Manager's
// goroutines, all through Host.Go: the expiry loop, one loader per
// share-partition while it loads, one writer per share-partition while it
// owes writes. A context.AfterFunc per session notices its connection's
// end and hands the release to a node goroutine at once.
//
// Locks: Manager.mu (the maps of share-partitions and sessions) before
// sharePartition.mu (one share-partition's state, queue and waiters),
// never the reverse; Manager.wakeMu (the expiry alarm) is taken alone.
// None is held across a Persister call, a log read or a wait.
//
// # Where this departs from Kafka
//
//   - Acquisitions are written before the answer (sharepart persists
//     delivery counts on acquisition), so a ShareFetch that acquires waits
//     a share coordinator round trip; Kafka writes nothing then.
//   - share.isolation.level=read_committed reads up to the last stable
//     offset, as Kafka does, and leaves the batches of aborted
//     transactions out of what the state machine may acquire, so they are
//     archived as gaps without being acquired first. Kafka acquires them,
//     then archives them (their delivery count raised by one, and counted
//     against MaxRecords, so a fetch can hand out fewer records than it
//     could); here they keep their count and cost nothing.
//   - A fetch whose reads held only gaps (control batches, aborted
//     transactions) reads on at once, past them, up to maxRereads times,
//     rather than waiting out MaxWaitMs or answering empty.
//   - A share-partition's settings (lock duration, delivery limit,
//     in-flight limit) are read when it loads, not on every step.
//   - Closing a session (epoch -1 or the connection's end) releases the
//     member's records in every share-partition of its group here, not
//     only in the session's partitions.
//   - Loaded share-partitions are capped (Config.MaxPartitions): a load
//     that finds no idle one to unload is refused with
//     LEADER_NOT_AVAILABLE.
//   - An error on a partition found while a fetch waits (leadership lost,
//     a failed read or write) answers the fetch at once; errors known
//     before it waits do not.
//   - Acknowledgement batches are checked for shape inside the state
//     machine, after the leadership checks; Kafka checks them first, so a
//     malformed batch for a partition not led here answers
//     NOT_LEADER_OR_FOLLOWER rather than INVALID_REQUEST.
//   - No quotas (ThrottleMillis 0), no share group metrics beyond Stats.
package sharefetch
