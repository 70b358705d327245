// Package replica is one partition replica's replication state as a
// deterministic core: whether this broker leads or follows it and at which
// leader epoch, the in-sync replicas, the high watermark, each follower's
// progress, whether its log is open, being deleted or damaged, and the
// proposals it has in flight with the active controller.
//
// The core (Core) changes only through Step(now, event) and Tick(now) and
// answers with a Ready: what the caller must publish (the high watermark,
// a new View), wake (acks=all and long-poll waiters), send (an
// AlterPartition that changes the ISR or resigns a leadership) and do to
// the log (open it, record a leader epoch, truncate it, delete it). It
// reads no clock, opens no file and sends nothing; etcd raft's RawNode is
// the model. The broker owns one Core per local replica, runs its Steps
// one at a time, and does the I/O.
//
// A replica's life is a set of explicit phases, each with a forced exit:
//
//	Opening ──open ok──► Reconciling ──divergence found──► Following
//	   │  ▲                  ▲  (a follower at a new epoch)     │
//	   │  └─backoff─┐        └───────── damaged, out of ISR ◄── Damaged
//	   ▼            │                                      (in the ISR)
//	Offline ────────┘    Opening ──open ok, leads──► Leading ──► Resigning
//	(gave up after                                    ▲              │
//	 OpenAttempts)                                    └── refused ───┘
//
//	any phase ──unassigned──► Deleting ──log deleted──► Deleted
//
// Opening overruns OpenTimeoutMs or fails: a leadership placed here is
// resigned. A failed open is retried with a growing backoff and given up
// after a bound. An ISR proposal or a resignation without an answer in
// AlterTimeoutMs counts as refused; refusals back off. A follower outside
// the ISR (catching up) is Following with InISR false.
//
// The high watermark is the minimum durable end over the ISR, the
// leader's own included (fsync-before-ack: an acks=all record is
// acknowledged only once every ISR member has fsynced it). Replication is
// pipelined (pipeline.go): a leader serves followers up to its log end
// before its own fsync ends, a follower fetches again before its fsync
// ends and reports its durable end apart from its fetch offset, so the
// fsyncs of the leader and its followers overlap. A follower's fetch
// offset alone counts as durable only for a fetch that reports nothing
// else, from a follower that fsyncs before fetching (Kafka's rule). A
// replica joins the ISR on its durable end; it keeps up on its fetch
// offset.
//
// A follower whose log ends below the leader's local log start on a
// tiered topic (the leader answers OFFSET_MOVED_TO_TIERED_STORAGE)
// restarts its log at the end of the remote copy, with the copy's
// producer snapshot and leader epochs, and fetches on from there
// (tierfollow.go, KIP-405's follower path).
//
// A replica whose log fails on a disk error (LogFailed) or whose leader's
// fsync stalls past FlushStallMs (FlushStalled) hands its leadership on
// and, for a failed log, is repaired once out of the ISR (failure.go);
// StorageState tells the console and metrics which disk is in trouble.
//
// Every request that meets a replica asks View.Check, the one place a
// phase becomes a Kafka error code: a replica that cannot serve answers
// NOT_LEADER_OR_FOLLOWER, UNKNOWN_TOPIC_OR_PARTITION or KAFKA_STORAGE_ERROR,
// which clients retry after refreshing metadata.
package replica
