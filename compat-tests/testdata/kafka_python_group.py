"""kafka-python 2.0 (Debian's python3-kafka) consumer group against Fjord.

Usage: kafka_python_group.py HOST:PORT TOPIC GROUP

Produces 300 records to a new 3-partition topic, consumes them all in a
group with manual commits, commits, closes, then inspects the group with
KafkaAdminClient. Prints one JSON line; the Go test checks it. Failures in
one step are reported in "errors" rather than aborting, when possible.
"""
import json
import sys
import time
import traceback

from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import KafkaAdminClient, NewTopic

addr, topic, group = sys.argv[1], sys.argv[2], sys.argv[3]
N = 300
out = {"errors": []}

admin = KafkaAdminClient(bootstrap_servers=addr, request_timeout_ms=10000)
admin.create_topics([NewTopic(topic, num_partitions=3, replication_factor=1)])

producer = KafkaProducer(bootstrap_servers=addr, acks="all")
futures = [producer.send(topic, key=b"k%d" % (i % 11), value=b"v%d" % i) for i in range(N)]
producer.flush()
out["acked"] = len([f.get(timeout=10) for f in futures])
producer.close()

consumer = KafkaConsumer(topic, bootstrap_servers=addr, group_id=group,
                         enable_auto_commit=False, auto_offset_reset="earliest",
                         session_timeout_ms=6000, heartbeat_interval_ms=500,
                         consumer_timeout_ms=1000)
values = []
partitions = set()
deadline = time.time() + 60
while len(values) < N and time.time() < deadline:
    for m in consumer:  # ends after consumer_timeout_ms without records
        values.append(m.value.decode())
        partitions.add(m.partition)
        if len(values) >= N:
            break
out["values"] = values
out["assignment"] = sorted(tp.partition for tp in consumer.assignment())
out["api_version"] = list(consumer.config["api_version"])
consumer.commit()
tps = [TopicPartition(topic, p) for p in range(3)]
out["end_offsets"] = {str(tp.partition): o for tp, o in consumer.end_offsets(tps).items()}
out["committed_by_consumer"] = {str(tp.partition): consumer.committed(tp) for tp in tps}
consumer.close()

try:
    out["listed"] = [list(g) for g in admin.list_consumer_groups()]
except Exception:
    out["errors"].append("list_consumer_groups: " + traceback.format_exc())
try:
    described = admin.describe_consumer_groups([group])
    out["described"] = [{"group": d.group, "state": d.state, "protocol_type": d.protocol_type,
                         "protocol": d.protocol, "members": len(d.members)} for d in described]
except Exception:
    out["errors"].append("describe_consumer_groups: " + traceback.format_exc())
try:
    offs = admin.list_consumer_group_offsets(group)
    out["group_offsets"] = {"%s/%d" % (tp.topic, tp.partition): om.offset for tp, om in offs.items()}
except Exception:
    out["errors"].append("list_consumer_group_offsets: " + traceback.format_exc())
admin.close()

print(json.dumps(out))
