"""kafka-python 2.0 (Debian's python3-kafka) against Fjord, without groups.

Usage: kafka_python_roundtrip.py HOST:PORT TOPIC
Prints one JSON line with what it observed; the Go test checks it.
"""
import json
import sys

from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import KafkaAdminClient, NewTopic

addr, topic = sys.argv[1], sys.argv[2]
admin = KafkaAdminClient(bootstrap_servers=addr, request_timeout_ms=10000)
admin.create_topics([NewTopic(topic, num_partitions=2, replication_factor=1)])
admin.close()

producer = KafkaProducer(bootstrap_servers=addr, acks="all", compression_type="gzip")
futures = [producer.send(topic, key=b"k%d" % (i % 7), value=b"v%d" % i, timestamp_ms=1000 + i)
           for i in range(200)]
producer.flush()
acked = [f.get(timeout=10) for f in futures]
producer.close()

consumer = KafkaConsumer(bootstrap_servers=addr, consumer_timeout_ms=5000,
                         auto_offset_reset="earliest", enable_auto_commit=False)
tps = [TopicPartition(topic, 0), TopicPartition(topic, 1)]
consumer.assign(tps)
consumer.seek_to_beginning()
values = [m.value.decode() for m in consumer]
end = consumer.end_offsets(tps)
begin = consumer.beginning_offsets(tps)
by_time = consumer.offsets_for_times({tp: 1100 for tp in tps})
consumer.close()

print(json.dumps({
    "acked": len(acked),
    "values": values,
    "end": sum(end.values()),
    "begin": sum(begin.values()),
    "by_time_ts": sorted(v.timestamp for v in by_time.values() if v is not None),
    "api_version": list(KafkaProducer(bootstrap_servers=addr).config["api_version"]),
}))
