package metrics

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
)

// stateCollector serves the series read from the node's state at scrape
// time, all from one Source.Topics snapshot: fjord_partitions and
// fjord_log_bytes, and the series that dashboards and alerts made for
// Kafka read: kafka_exporter's (danielqsj/kafka_exporter) topic and
// consumer-group series, and the gauges and counters the JMX exporter's
// kafka-kraft-3_0_0.yml rules make of a broker's MBeans.
// docs/metrics.md lists each one with the node that exports it.
//
// Every node serves its own /metrics and Prometheus scrapes them all, so
// each cluster-wide figure of the Kafka-named series is exported by
// exactly one node, and sum() over the nodes is the cluster's figure, as
// it is for kafka_exporter's one process per cluster:
//   - a partition's series by its leader, or by the active controller
//     while it has none;
//   - a group's series by its coordinator (the leader of its
//     __consumer_offsets partition, with the offsets loaded);
//   - kafka_brokers, kafka_broker_info and kafka_topic_partitions by the
//     active controller.
//
// It reads state only (through Source): no goroutine per partition and no
// request to another node. A scrape costs O(topics + local partitions +
// committed group offsets); the labels are those of existing topics,
// partitions and groups only.
type stateCollector struct {
	m *Metrics
}

func kdesc(name, help string, labels ...string) *prometheus.Desc {
	return prometheus.NewDesc(name, help, labels, nil)
}

var (
	// Fjord's own figures of the node's replicas.
	fPartitions      = kdesc("fjord_partitions", "Partitions hosted on this node.")
	fLogBytes        = kdesc("fjord_log_bytes", "Bytes in all partition logs on this node.")
	fStorage         = kdesc("fjord_replica_storage_state", "Local replicas whose disk is in trouble, by state: full (its last write met ENOSPC/EDQUOT; produces get KAFKA_STORAGE_ERROR), failed (its log failed on a disk error and is being repaired), stalled (an fsync of its log has run over fjord.log.flush.stall.max.ms). 0 for a state none is in.", "state")
	fStorageOf       = kdesc("fjord_replica_storage_problem", "1 for each local replica whose disk is in trouble, with its state (see fjord_replica_storage_state); absent for replicas whose disk is fine.", "topic", "partition", "state")
	jOfflineReplicas = kdesc("kafka_server_replicamanager_offlinereplicacount", "Local replicas offline on a failed log, being repaired (ReplicaManager OfflineReplicaCount).")

	// kafka_exporter's names, labels and help texts.
	kBrokers         = kdesc("kafka_brokers", "Number of Brokers in the Kafka Cluster.")
	kBrokerInfo      = kdesc("kafka_broker_info", "Information about the Kafka Broker.", "address", "id")
	kTopicPartitions = kdesc("kafka_topic_partitions", "Number of partitions for this Topic", "topic")
	kCurrentOffset   = kdesc("kafka_topic_partition_current_offset", "Current Offset of a Broker at Topic/Partition", "topic", "partition")
	kOldestOffset    = kdesc("kafka_topic_partition_oldest_offset", "Oldest Offset of a Broker at Topic/Partition", "topic", "partition")
	kLeader          = kdesc("kafka_topic_partition_leader", "Leader Broker ID of this Topic/Partition", "topic", "partition")
	kReplicas        = kdesc("kafka_topic_partition_replicas", "Number of Replicas for this Topic/Partition", "topic", "partition")
	kISR             = kdesc("kafka_topic_partition_in_sync_replica", "Number of In-Sync Replicas for this Topic/Partition", "topic", "partition")
	kPreferred       = kdesc("kafka_topic_partition_leader_is_preferred", "1 if Topic/Partition is using the Preferred Broker", "topic", "partition")
	kUnderReplicated = kdesc("kafka_topic_partition_under_replicated_partition", "1 if Topic/Partition is under Replicated", "topic", "partition")
	kGroupOffset     = kdesc("kafka_consumergroup_current_offset", "Current Offset of a ConsumerGroup at Topic/Partition", "consumergroup", "topic", "partition")
	kGroupOffsetSum  = kdesc("kafka_consumergroup_current_offset_sum", "Current Offset of a ConsumerGroup at Topic for all partitions", "consumergroup", "topic")
	kGroupLag        = kdesc("kafka_consumergroup_lag", "Current Approximate Lag of a ConsumerGroup at Topic/Partition", "consumergroup", "topic", "partition")
	kGroupLagSum     = kdesc("kafka_consumergroup_lag_sum", "Current Approximate Lag of a ConsumerGroup at Topic for all partitions", "consumergroup", "topic")
	kGroupMembers    = kdesc("kafka_consumergroup_members", "Amount of members in a consumer group", "consumergroup")

	// The JMX exporter's names (kafka-kraft-3_0_0.yml, lowercaseOutputName).
	jUnderReplicated = kdesc("kafka_server_replicamanager_underreplicatedpartitions", "Partitions led by this broker whose ISR is smaller than their replication factor (ReplicaManager UnderReplicatedPartitions).")
	jPartitionCount  = kdesc("kafka_server_replicamanager_partitioncount", "Partitions with a replica on this broker (ReplicaManager PartitionCount).")
	jLeaderCount     = kdesc("kafka_server_replicamanager_leadercount", "Partitions this broker leads (ReplicaManager LeaderCount).")
	jISRShrinks      = kdesc("kafka_server_replicamanager_isrshrinks_total", "ISR shrinks this broker proposed as a leader (ReplicaManager IsrShrinksPerSec).")
	jISRExpands      = kdesc("kafka_server_replicamanager_isrexpands_total", "ISR expansions this broker proposed as a leader (ReplicaManager IsrExpandsPerSec).")
	jActive          = kdesc("kafka_controller_kafkacontroller_activecontrollercount", "1 on the active controller, else 0 (KafkaController ActiveControllerCount).")
	jOffline         = kdesc("kafka_controller_kafkacontroller_offlinepartitionscount", "Partitions without a leader; reported by the active controller, 0 elsewhere (KafkaController OfflinePartitionsCount).")
	jTopicCount      = kdesc("kafka_controller_kafkacontroller_globaltopiccount", "Topics in the cluster; reported by the active controller, 0 elsewhere (KafkaController GlobalTopicCount).")
	jPartCount       = kdesc("kafka_controller_kafkacontroller_globalpartitioncount", "Partitions in the cluster; reported by the active controller, 0 elsewhere (KafkaController GlobalPartitionCount).")
	jBytesIn         = kdesc("kafka_server_brokertopicmetrics_bytesin_total", "Record-batch bytes appended by producers to partitions this broker leads (BrokerTopicMetrics BytesInPerSec).", "topic")
	jMessagesIn      = kdesc("kafka_server_brokertopicmetrics_messagesin_total", "Records appended by producers to partitions this broker leads (BrokerTopicMetrics MessagesInPerSec).", "topic")
	jBytesOut        = kdesc("kafka_server_brokertopicmetrics_bytesout_total", "Record-batch bytes returned to consumers, replica fetches excluded (BrokerTopicMetrics BytesOutPerSec).", "topic")
	jQueue           = kdesc("kafka_network_requestchannel_requestqueuesize", "Requests dispatched whose handler has not yet returned or parked them (RequestChannel RequestQueueSize).")
	jTotalTime       = kdesc("kafka_network_requestmetrics_totaltimems", "Milliseconds from a request's dispatch to its response being ready, recent percentiles (RequestMetrics TotalTimeMs).", "request", "quantile")
	jTotalTimeCount  = kdesc("kafka_network_requestmetrics_totaltimems_count", "Requests timed by kafka_network_requestmetrics_totaltimems.", "request")
	jFlush           = kdesc("kafka_log_logflushstats_logflushrateandtimems", "Milliseconds to make one partition's appended data durable, recent percentiles (LogFlushStats LogFlushRateAndTimeMs).", "quantile")
	jFlushCount      = kdesc("kafka_log_logflushstats_logflushrateandtimems_count", "Partition flushes (LogFlushStats LogFlushRateAndTimeMs).")
)

func (c stateCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{fPartitions, fLogBytes, fStorage, fStorageOf, jOfflineReplicas,
		kBrokers, kBrokerInfo, kTopicPartitions, kCurrentOffset, kOldestOffset, kLeader, kReplicas, kISR,
		kPreferred, kUnderReplicated, kGroupOffset, kGroupOffsetSum, kGroupLag, kGroupLagSum, kGroupMembers,
		jUnderReplicated, jPartitionCount, jLeaderCount, jISRShrinks, jISRExpands, jActive, jOffline, jTopicCount, jPartCount,
		jBytesIn, jMessagesIn, jBytesOut, jQueue, jTotalTime, jTotalTimeCount, jFlush, jFlushCount} {
		ch <- d
	}
}

func gauge(ch chan<- prometheus.Metric, d *prometheus.Desc, v float64, labels ...string) {
	ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
}

func boolf(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

func (c stateCollector) Collect(ch chan<- prometheus.Metric) {
	m := c.m
	topics := m.src.Topics()
	c.collectController(ch)

	// Partitions: from the leader. hw keeps every local replica's high
	// watermark for the groups' lag below.
	hw := make(map[TopicPartition]int64)
	parts, leads := 0, 0
	var logBytes int64
	storage := map[string]int{StorageFull: 0, StorageFailed: 0, StorageStalled: 0}
	for name, ps := range topics {
		for _, p := range ps {
			parts++
			tp := TopicPartition{Topic: name, Partition: p.Index}
			if p.Storage != "" {
				storage[p.Storage]++
				gauge(ch, fStorageOf, 1, name, strconv.Itoa(int(p.Index)), p.Storage)
			}
			if p.HasLog {
				logBytes += p.LogBytes
				// A follower learns the leader's high watermark a fetch
				// late; what it has replicated is the closer figure.
				hw[tp] = p.HW
				if !p.Leads {
					hw[tp] = max(p.HW, p.LogEnd)
				}
			}
			if !p.Leads {
				continue
			}
			leads++
			pi := strconv.Itoa(int(p.Index))
			if p.HasLog {
				gauge(ch, kCurrentOffset, float64(p.HW), name, pi)
				gauge(ch, kOldestOffset, float64(p.LogStart), name, pi)
			}
			rf := len(p.Replicas) - len(p.Removing)
			gauge(ch, kLeader, float64(p.Leader), name, pi)
			gauge(ch, kReplicas, float64(len(p.Replicas)), name, pi)
			gauge(ch, kISR, float64(len(p.ISR)), name, pi)
			gauge(ch, kPreferred, boolf(len(p.Replicas) > 0 && p.Replicas[0] == p.Leader), name, pi)
			gauge(ch, kUnderReplicated, boolf(len(p.ISR) < rf), name, pi)
		}
	}
	gauge(ch, fPartitions, float64(parts))
	gauge(ch, fLogBytes, float64(logBytes))
	for state, n := range storage {
		gauge(ch, fStorage, float64(n), state)
	}
	gauge(ch, jOfflineReplicas, float64(storage[StorageFailed]))

	// Groups: from the coordinator, lag against the local replica's high
	// watermark on the leader, or what a follower replica here has
	// replicated (at most one fetch behind, and possibly ahead of the high
	// watermark by records not yet on every in-sync replica); a partition
	// with no replica here has no lag series.
	for _, g := range m.src.Groups() {
		gauge(ch, kGroupMembers, float64(g.Members), g.ID)
		type sums struct {
			off, lag int64
			lagged   bool
		}
		byTopic := map[string]*sums{}
		for _, off := range g.Offsets {
			if off.Offset < 0 {
				continue
			}
			s := byTopic[off.Topic]
			if s == nil {
				s = &sums{}
				byTopic[off.Topic] = s
			}
			pi := strconv.Itoa(int(off.Partition))
			s.off += off.Offset
			gauge(ch, kGroupOffset, float64(off.Offset), g.ID, off.Topic, pi)
			if h, ok := hw[off.TopicPartition]; ok {
				lag := max(h-off.Offset, 0)
				s.lag += lag
				s.lagged = true
				gauge(ch, kGroupLag, float64(lag), g.ID, off.Topic, pi)
			}
		}
		for topic, s := range byTopic {
			gauge(ch, kGroupOffsetSum, float64(s.off), g.ID, topic)
			if s.lagged {
				gauge(ch, kGroupLagSum, float64(s.lag), g.ID, topic)
			}
		}
	}

	// This node's broker series.
	gauge(ch, jUnderReplicated, float64(m.src.UnderReplicated()))
	gauge(ch, jPartitionCount, float64(parts))
	gauge(ch, jLeaderCount, float64(leads))
	ch <- prometheus.MustNewConstMetric(jISRShrinks, prometheus.CounterValue, counterValue(m.ISRShrinks))
	ch <- prometheus.MustNewConstMetric(jISRExpands, prometheus.CounterValue, counterValue(m.ISRExpands))
	m.jmx.topics.Range(func(k, v any) bool {
		name := k.(string)
		if _, ok := topics[name]; !ok {
			m.jmx.topics.Delete(k) // the topic is gone: so are its series
			return true
		}
		tc := v.(*topicCounters)
		ch <- prometheus.MustNewConstMetric(jBytesIn, prometheus.CounterValue, float64(tc.bytesIn.Load()), name)
		ch <- prometheus.MustNewConstMetric(jMessagesIn, prometheus.CounterValue, float64(tc.messagesIn.Load()), name)
		ch <- prometheus.MustNewConstMetric(jBytesOut, prometheus.CounterValue, float64(tc.bytesOut.Load()), name)
		return true
	})
	gauge(ch, jQueue, float64(max(m.jmx.queued.Load(), 0)))
	m.jmx.times.Range(func(k, v any) bool {
		emitTimer(ch, jTotalTime, jTotalTimeCount, v.(prometheus.Summary), k.(string))
		return true
	})
	emitTimer(ch, jFlush, jFlushCount, m.jmx.flush)
}

// collectController writes the cluster-wide series: the active
// controller's figures from its image, zeros (for the two counts Kafka
// reports on every controller) elsewhere.
func (c stateCollector) collectController(ch chan<- prometheus.Metric) {
	src := c.m.src
	img, active := src.Controller()
	gauge(ch, jActive, boolf(active))
	if !active {
		gauge(ch, jOffline, 0)
		gauge(ch, jTopicCount, 0)
		gauge(ch, jPartCount, 0)
		return
	}
	if img == nil {
		return
	}
	live := img.LiveBrokers()
	gauge(ch, kBrokers, float64(len(live)))
	for _, bs := range live {
		gauge(ch, kBrokerInfo, 1, src.BrokerAddress(img, bs), strconv.Itoa(int(bs.ID)))
	}
	offline, parts := 0, 0
	ts := img.Topics()
	for _, t := range ts {
		gauge(ch, kTopicPartitions, float64(len(t.Partitions)), t.Name)
		for i, p := range t.Partitions {
			parts++
			if p.Leader >= 0 {
				continue
			}
			// No leader exports it: the controller does, as
			// kafka_exporter would show it (no offsets: no replica serves).
			offline++
			pi := strconv.Itoa(i)
			gauge(ch, kLeader, -1, t.Name, pi)
			gauge(ch, kReplicas, float64(len(p.Replicas)), t.Name, pi)
			gauge(ch, kISR, float64(len(p.ISR)), t.Name, pi)
			gauge(ch, kPreferred, 0, t.Name, pi)
			gauge(ch, kUnderReplicated, boolf(len(p.ISR) < len(p.Replicas)-len(p.Removing)), t.Name, pi)
		}
	}
	gauge(ch, jOffline, float64(offline))
	gauge(ch, jTopicCount, float64(len(ts)))
	gauge(ch, jPartCount, float64(parts))
}
