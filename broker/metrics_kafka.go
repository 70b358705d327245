package broker

import (
	"net"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/fjordlog/fjord/broker/coordinator"
	"github.com/fjordlog/fjord/controller"
)

// kafkaCollector serves, at scrape time, the series that dashboards and
// alerts made for Kafka read: kafka_exporter's (danielqsj/kafka_exporter)
// topic and consumer-group series, and the gauges and counters the JMX
// exporter's kafka-kraft-3_0_0.yml rules make of a broker's MBeans.
// docs/metrics.md lists each one with the node that exports it.
//
// Every node serves its own /metrics and Prometheus scrapes them all, so
// each cluster-wide figure is exported by exactly one node, and sum() over
// the nodes is the cluster's figure, as it is for kafka_exporter's one
// process per cluster:
//   - a partition's series by its leader, or by the active controller
//     while it has none;
//   - a group's series by its coordinator (the leader of its
//     __consumer_offsets partition, with the offsets loaded);
//   - kafka_brokers, kafka_broker_info and kafka_topic_partitions by the
//     active controller.
//
// It reads state only (the replicas' views, the coordinator's tables, the
// metadata image): no goroutine per partition and no request to another
// node. A scrape costs O(local partitions + committed group offsets); the
// labels are those of existing topics, partitions and groups only.
type kafkaCollector struct {
	b *Broker
}

func kdesc(name, help string, labels ...string) *prometheus.Desc {
	return prometheus.NewDesc(name, help, labels, nil)
}

var (
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

func (c kafkaCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{kBrokers, kBrokerInfo, kTopicPartitions, kCurrentOffset, kOldestOffset, kLeader, kReplicas, kISR,
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

func (c kafkaCollector) Collect(ch chan<- prometheus.Metric) {
	b, m := c.b, c.b.metrics
	topics := b.replicas.Topics()
	c.collectController(ch)

	// Partitions: from the leader. hw keeps every local replica's high
	// watermark for the groups' lag below.
	hw := make(map[coordinator.TopicPartition]int64)
	parts, leads := 0, 0
	for name, t := range topics {
		for i, p := range t.Parts {
			if p == nil {
				continue
			}
			parts++
			tp := coordinator.TopicPartition{Topic: name, Partition: int32(i)}
			v := p.View()
			lg := p.Log()
			if lg != nil {
				// A follower learns the leader's high watermark a fetch
				// late; what it has replicated is the closer figure.
				hw[tp] = p.HW()
				if !v.Leads() {
					hw[tp] = max(p.HW(), lg.EndOffset())
				}
			}
			if !v.Leads() {
				continue
			}
			leads++
			pi := strconv.Itoa(i)
			if lg != nil {
				gauge(ch, kCurrentOffset, float64(p.HW()), name, pi)
				gauge(ch, kOldestOffset, float64(lg.StartOffset()), name, pi)
			}
			rf := len(v.Replicas) - len(v.Removing)
			gauge(ch, kLeader, float64(v.Leader), name, pi)
			gauge(ch, kReplicas, float64(len(v.Replicas)), name, pi)
			gauge(ch, kISR, float64(len(v.ISR)), name, pi)
			gauge(ch, kPreferred, boolf(len(v.Replicas) > 0 && v.Replicas[0] == v.Leader), name, pi)
			gauge(ch, kUnderReplicated, boolf(len(v.ISR) < rf), name, pi)
		}
	}

	// Groups: from the coordinator, lag against the local replica's high
	// watermark on the leader, or what a follower replica here has
	// replicated (at most one fetch behind, and possibly ahead of the high
	// watermark by records not yet on every in-sync replica); a partition
	// with no replica here has no lag series.
	if b.coord != nil {
		for _, g := range b.coord.ListGroups() {
			if b.coord.Status(g.ID) != nil {
				continue
			}
			gauge(ch, kGroupMembers, float64(b.coord.Members(g.ID)), g.ID)
			type sums struct {
				off, lag int64
				lagged   bool
			}
			byTopic := map[string]*sums{}
			for tp, off := range b.coord.Offsets(g.ID) {
				if off.Offset < 0 {
					continue
				}
				s := byTopic[tp.Topic]
				if s == nil {
					s = &sums{}
					byTopic[tp.Topic] = s
				}
				pi := strconv.Itoa(int(tp.Partition))
				s.off += off.Offset
				gauge(ch, kGroupOffset, float64(off.Offset), g.ID, tp.Topic, pi)
				if h, ok := hw[tp]; ok {
					lag := max(h-off.Offset, 0)
					s.lag += lag
					s.lagged = true
					gauge(ch, kGroupLag, float64(lag), g.ID, tp.Topic, pi)
				}
			}
			for topic, s := range byTopic {
				gauge(ch, kGroupOffsetSum, float64(s.off), g.ID, topic)
				if s.lagged {
					gauge(ch, kGroupLagSum, float64(s.lag), g.ID, topic)
				}
			}
		}
	}

	// This node's broker series.
	gauge(ch, jUnderReplicated, float64(b.replicas.UnderReplicated()))
	gauge(ch, jPartitionCount, float64(parts))
	gauge(ch, jLeaderCount, float64(leads))
	ch <- prometheus.MustNewConstMetric(jISRShrinks, prometheus.CounterValue, counterValue(m.isrShrinks))
	ch <- prometheus.MustNewConstMetric(jISRExpands, prometheus.CounterValue, counterValue(m.isrExpands))
	m.jmx.topics.Range(func(k, v any) bool {
		name := k.(string)
		if topics[name] == nil {
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
func (c kafkaCollector) collectController(ch chan<- prometheus.Metric) {
	b := c.b
	active := b.actl != nil && b.meta.Leader() == b.cfg.NodeID
	gauge(ch, jActive, boolf(active))
	if !active {
		gauge(ch, jOffline, 0)
		gauge(ch, jTopicCount, 0)
		gauge(ch, jPartCount, 0)
		return
	}
	img := b.meta.Image()
	if img == nil {
		return
	}
	live := img.LiveBrokers()
	gauge(ch, kBrokers, float64(len(live)))
	for _, bs := range live {
		gauge(ch, kBrokerInfo, 1, c.brokerAddress(img, bs), strconv.Itoa(int(bs.ID)))
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

// brokerAddress is the host:port a client reaches bs at, as Metadata
// answers it: on the listener named as this node's first client listener,
// else (a controller-only node has none) on bs's first registered one.
func (c kafkaCollector) brokerAddress(img *controller.Image, bs controller.BrokerState) string {
	e, ok := controller.Endpoint{}, false
	if len(c.b.advertised) > 0 {
		e, ok = endpoint(img, bs.ID, c.b.advertised[0].Name)
	}
	if !ok && len(bs.Endpoints) > 0 {
		e = bs.Endpoints[0]
	}
	return net.JoinHostPort(e.Host, strconv.Itoa(int(e.Port)))
}
