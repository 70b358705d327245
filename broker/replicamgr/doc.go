// Package replicamgr is a node's set of local partition replicas: the map
// of the applied image's topics to this node's replicas of them, and the
// I/O the replicas ask for. broker/replica is one replica (its core and
// driver); this package creates, assigns and unassigns the drivers as
// metadata images arrive, and does their I/O (replica.Host).
//
// Files:
//
//   - manager.go: Manager, its Config (what it needs of the broker), the
//     published Topic map and image, and their readers.
//   - publish.go: PublishLoop and Apply, which make the local replicas
//     match each new image and then publish it.
//   - host.go: the replica host: the registry of drivers and their
//     directory claims, opening a log (within the descriptor budget),
//     deleting one, proposing ISR changes; TickLoop.
//   - fdbudget.go: the descriptor budget, and the refusal of topic and
//     partition creations that would exceed it.
//   - stray.go: removing partition directories the metadata no longer
//     places here, once per process.
//   - peerbarrier.go: AwaitPeersApplied, the wait that lets the answer to
//     a metadata change promise the whole cluster acts on it
//     (read-your-writes on every broker).
//   - isr.go: the AlterPartition batcher, one request in flight.
//   - upkeep.go: the local logs' upkeep loops (retention, relaxed
//     flushing, compaction), reading the node through Upkeep.
//
// The topic map: PublishLoop is its one writer (Apply before it starts,
// on a node's start-up). Each image gives a new map, published whole under
// mu with the image; readers (Topic, TopicByID, Topics, Image) take mu for
// reading just long enough to load them, and never see a map change.
// WaitImage waits for a published image to satisfy a predicate.
//
// Invariants:
//   - Every driver is in the registry (replicaRegistry.live) from its
//     creation until its log is deleted (Ended), including after it left
//     the published map; CloseLogs closes every one of their logs.
//   - A partition directory has at most one owner at a time: each driver
//     claims its directory, and opens only once the previous claim (a
//     deleted topic's replica of the same name, or a stray's removal) is
//     released (dirClaim).
//   - At most budget.partLimit logs are open (replicaRegistry.fds counts
//     them; one descriptor each for its active segment).
//   - At most one AlterPartition request is in flight (alterBatcher).
//
// Nothing here blocks the publish loop on a disk or a peer: opens,
// deletions, proposals and stray removals run on goroutines started
// through Config.Go and answer the driver with a step; Apply waits for new
// replicas' first opens at most fjord.partition.open.timeout.ms.
//
// # Locks
//
//	Manager.mu             (leaf: the topic map and image, replaced whole)
//	replicaRegistry.mu     (leaf: the drivers, directory claims, descriptor count)
//	alterBatcher.mu        (leaf: queued AlterPartition proposals)
//
// None is held across I/O or while calling the broker's Config funcs.
package replicamgr
