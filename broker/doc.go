// Package broker is a node's lifecycle and its Kafka front: it owns the
// client listeners, dispatches each decoded request to its handler (one
// file per API key, NN_name.go), follows the metadata log, and wires the
// rooms that do the work.
//
// The front: every API key is one api.Entry (package broker/api), made in
// its NN_name.go file here or by the room package that owns the key, and
// bound to the host it runs on when the node's registry is built
// (registry.go): its versions on client listeners and on the CONTROLLER
// listener, its handler, its authorization rule, whether it mutates, its
// error response. One dispatch (dispatch.go) serves every Kafka listener
// from that registry — version table, authorization (authz.go runs the
// rule with the current authorizer), audit (api.Audit), handler — so an
// API cannot be served without its rule, nor a listener without the
// authorizer; the CONTROLLER listener's Kafka half is this dispatch in
// front of the controller role.
//
// The rooms:
//
//   - broker/replica: each local partition replica — its replication
//     state as a deterministic core, the driver that does the core's I/O,
//     and the follower fetchers.
//   - broker/replicamgr: the node's set of replicas. It creates, assigns
//     and unassigns them as images arrive, publishes the topic map and
//     image the handlers read (b.replicas), and does the I/O replicas ask
//     for: opening logs within a descriptor budget, deleting them,
//     AlterPartition; also stray clean-up and DeleteTopics' wait for the
//     other brokers. replicahosts.go gives it, and the fetchers, what they
//     need of the broker.
//   - broker/admin: the administration APIs the active controller
//     decides (topic creation, deletion and partitions, elections,
//     reassignments, ACLs, client quotas, SCRAM credentials); forward.go
//     gives it what it needs of the broker (adminHost), topics.go and
//     groups.go create topics through it (admin.CreateTopics).
//   - broker/discovery: the APIs clients find the cluster with
//     (Metadata, DescribeTopicPartitions, DescribeCluster,
//     FindCoordinator); discoveryhost.go gives it what it needs.
//   - broker/partitions: the data path's APIs, what clients and followers
//     do with partitions (00 Produce, 01 Fetch, 02 ListOffsets, 21
//     DeleteRecords, 23 OffsetForLeaderEpoch, 34 AlterReplicaLogDirs, 35
//     DescribeLogDirs); partitions.go is the
//     broker's side (partitionsHost), with quota.go and throttle.go.
//   - broker/coordinator: consumer groups and committed offsets, backed by
//     the __consumer_offsets replicas, and the room of the group APIs
//     (08 OffsetCommit … 47 OffsetDelete; groups.go is the broker's side).
//   - broker/metrics: the node's Prometheus series, counted by the
//     broker's code where events happen and read at scrape time through
//     metricsSource (metrics.go); serveMetrics (metrics.go) serves its
//     handler on the metrics listener through broker/httpserve.
//   - broker/console: the web console. console.NodeSource reads the node
//     from the parts consoleSource (console.go) hands it — the image, the
//     replica manager, the coordinator, the client servers — and
//     console.Listen serves it, with its Host check, through
//     broker/httpserve.
//   - broker/httpserve: the plumbing the HTTP listeners share (a server
//     per listener on the broker's lifecycle.Group, closed when it stops).
//   - broker/quota: client quotas and replication throttles as a pure
//     core (quota.go and throttle.go are the glue).
//   - broker/txn and broker/txncoord: transactions, a pure core per
//     transactional id and the driver doing its I/O. txncoord is also the
//     room of the transaction APIs (22, 24-28, 61, 65, 66: its
//     NN_name.go files, registered by txncoord.Entries) and of a
//     produce's check with the coordinator (VerifyProduce); txns.go is
//     the broker's side, txnHost the host both run on.
//   - broker/config: the node's configuration — Config, its defaults and
//     validation, the key table that parses every key at start-up and at
//     run time, topic configs, the dynamic layers (the running
//     configuration is config.Live of the static one and the image, which
//     b.live() returns), the AlterConfigs policy, feature levels and the
//     sealing of password configs; broker/config/catalogue is Apache
//     Kafka's configuration keys and what Fjord does with each. config is
//     also the room of the configuration APIs (32 DescribeConfigs, 33
//     AlterConfigs, 44 IncrementalAlterConfigs, 57 UpdateFeatures,
//     registered by config.APIEntries); confighost.go gives it what it
//     needs of the broker (configHost), loggers.go the node's log level.
//   - broker/acl (the authorizer); broker/sasl (SASL servers and clients,
//     SCRAM credentials) and broker/tlsconf (TLS stores, principals,
//     reload, dynamic SSL), which listeners.go hands the listeners'
//     settings (Kafka's listener-name rules are broker/config's);
//     broker/pwenc (the encoding of password configs at rest),
//     broker/brokertest (an N-node cluster in one process).
//   - broker/ctllink: the link to the controller quorum — the client of
//     the active controller, the follower of the metadata log on a
//     broker-only node, and the broker's lifecycle (register, heartbeat,
//     controlled shutdown); cluster.go wires it.
//   - controller/active: the controller role (the quorum member, the
//     active controller and the CONTROLLER listener), built in one place
//     (quorum.go) and held through interfaces (ctllink.MetadataLog,
//     activeController); broker does not import controller/node.
//
// Metadata comes from the metadata log. Every node applies it to an
// immutable controller.Image (ctllink.MetadataLog: the node's controller
// role when it has one, else a ctllink.Follower fetching the log from the
// voters), and the replica manager's publish loop makes the local
// replicas match each new image. Changes to metadata (registration, heartbeats, topic admin, ISR
// changes, producer-id blocks) are requests to the active controller, all
// carried by ctllink.Client: in-process when this node leads the quorum,
// else to the leader's CONTROLLER listener. A client's admin requests go
// through one helper (api.Forward; forward.go is what it needs of the
// broker), which answers once this broker's image
// has reached the metadata offset the controller committed them at.
//
// Client quotas are enforced per broker from the image: produce and fetch
// byte rates, request time and connection rate, with Kafka's windows; a
// client over its quota is answered with a throttle time and its
// connection muted (protocol.Request.Mute). broker/quota is the pure
// core (the sensors, precedence, throttle times, and the replication
// throttles' token buckets); quota.go and throttle.go are the glue.
//
// Password-type dynamic configs (ssl.*.password and the like) are stored
// only as ciphertext: the broker that receives an AlterConfigs encrypts
// them with password.encoder.secret before forwarding it, and the broker
// that uses them decrypts them (broker/config/passwords.go, broker/pwenc).
//
// Every goroutine the broker starts goes through goLoop (a
// lifecycle.Group), refused once Close began; Close cancels the one root
// context (Broker.ctx) that ends them all and waits for them.
package broker
