"""kafka-python 2.0 (Debian's python3-kafka): produce, consume in a group,
commit, leave, then the admin calls, every connection kept open until the
Go test (clients_newest_test.go) has read the versions they used off the
node's console.

Usage: newest_kafka_python.py HOST:PORT TOPIC GROUP CLIENT_ID

Every client is made with CLIENT_ID, which is how the test finds their
connections. Protocol on stdout, one JSON line each:
  {"phase": "consumed", ...}  then waits for a line on stdin (the test
                              has seen a Heartbeat), then leaves the group
                              (unsubscribe) and runs the admin calls;
  {"phase": "ready", ...}     then waits for a line on stdin (or EOF) and
                              closes everything.
"""
import json
import sys
import traceback

from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import ConfigResource, ConfigResourceType, KafkaAdminClient, NewTopic

addr, topic, group, cid = sys.argv[1:5]
N = 30


def say(obj):
    print(json.dumps(obj), flush=True)


admin = KafkaAdminClient(bootstrap_servers=addr, client_id=cid, request_timeout_ms=10000)
admin.create_topics([NewTopic(topic, num_partitions=3, replication_factor=1)])

producer = KafkaProducer(bootstrap_servers=addr, client_id=cid, acks="all")
futures = [producer.send(topic, key=b"k%d" % i, value=b"v%d" % i) for i in range(N)]
producer.flush()
acked = len([f.get(timeout=10) for f in futures])

consumer = KafkaConsumer(topic, bootstrap_servers=addr, client_id=cid, group_id=group,
                         enable_auto_commit=False, auto_offset_reset="earliest",
                         session_timeout_ms=6000, heartbeat_interval_ms=100,
                         consumer_timeout_ms=1000)
values = set()
for _ in range(60):
    for m in consumer:  # ends after consumer_timeout_ms without records
        values.add(m.value.decode())
    if len(values) >= N:
        break
consumer.commit()
# end_offsets is ListOffsets on the consumer's own path (fetcher.py).
end = sum(consumer.end_offsets([TopicPartition(topic, p) for p in range(3)]).values())
say({"phase": "consumed", "acked": acked, "consumed": len(values), "end": end,
     "api_version": list(consumer.config["api_version"])})
sys.stdin.readline()

out = {"phase": "ready", "errors": []}
consumer.unsubscribe()  # LeaveGroup (coordinator/base.py maybe_leave_group)
for name, call in [
    ("describe_configs", lambda: admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, topic)])),
    ("list_consumer_groups", lambda: admin.list_consumer_groups()),
    ("describe_consumer_groups", lambda: admin.describe_consumer_groups([group])),
    ("list_consumer_group_offsets", lambda: admin.list_consumer_group_offsets(group)),
    # Last: the admin's Metadata (min(5, broker's)) is then what its
    # connection used last, not the v1 of the client's refreshes.
    ("list_topics", lambda: admin.list_topics()),
]:
    try:
        call()
    except Exception:
        out["errors"].append(name + ": " + traceback.format_exc())
say(out)
sys.stdin.readline()

consumer.close()
producer.close()
admin.close()
