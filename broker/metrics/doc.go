// Package metrics is a node's Prometheus series and the handler that
// serves them: /metrics, and Go's /debug/pprof when
// fjord.metrics.pprof.enable asks for it. It is the broker's: only broker
// and cmd import Prometheus, and this package is part of the broker (the
// core packages expose plain numbers, which it reads).
//
// Two kinds of series:
//
//   - counted where events happen: the broker increments the exported
//     counters of Metrics and calls its methods (RequestStarted, Produced,
//     Fetched, FlushObserver, PartitionError) on its hot paths;
//   - read at scrape time through Source, a narrow interface the broker
//     implements from its published state (the topics map, the replicas'
//     views, the coordinator's tables, the metadata image). The package
//     never sees the broker itself.
//
// docs/metrics.md lists every series and which node exports it.
//
// Files:
//
//   - source.go: Source, and the snapshots it returns (Partition, Group).
//   - metrics.go: Metrics, New and the fjord_* series counted by the
//     broker; Handler; request timing (Request).
//   - jmx.go: the event-driven half of the Kafka-named series (the JMX
//     exporter's counters and timers, kafka_network_*, BrokerTopicMetrics,
//     LogFlushStats).
//   - state.go: stateCollector, the series read from Source at scrape
//     time: fjord_partitions and fjord_log_bytes, kafka_exporter's topic
//     and group series, and the JMX exporter's ReplicaManager and
//     KafkaController gauges.
//
// Listening is the broker's: it serves Handler through broker/httpserve,
// the goroutine and shutdown plumbing it shares with the web console.
package metrics
