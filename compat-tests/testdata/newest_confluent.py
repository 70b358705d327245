"""confluent-kafka-python (Debian's python3-confluent-kafka, on librdkafka):
produce, consume in a group, commit, leave, then the admin calls, every
connection kept open until the Go test (clients_newest_test.go) has read
the versions they used off the node's console.

Usage: newest_confluent.py HOST:PORT TOPIC GROUP CLIENT_ID

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
import time
import traceback

import confluent_kafka
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic

addr, topic, group, cid = sys.argv[1:5]
N = 30
conf = {"bootstrap.servers": addr, "client.id": cid}


def say(obj):
    print(json.dumps(obj), flush=True)


admin = AdminClient(conf)
admin.create_topics([NewTopic(topic, num_partitions=3, replication_factor=1)])[topic].result(timeout=30)

acked = []
producer = Producer(dict(conf, acks="all"))
for i in range(N):
    producer.produce(topic, key=b"k%d" % i, value=b"v%d" % i,
                     on_delivery=lambda err, msg: acked.append(err is None))
producer.flush(30)

consumer = Consumer(dict(conf, **{"group.id": group, "auto.offset.reset": "earliest",
                                  "enable.auto.commit": False, "session.timeout.ms": 6000,
                                  "heartbeat.interval.ms": 100}))
consumer.subscribe([topic])
values = set()
deadline = time.time() + 60
while len(values) < N and time.time() < deadline:
    m = consumer.poll(0.5)
    if m is not None and m.error() is None:
        values.add(m.value().decode())
consumer.commit(asynchronous=False)
say({"phase": "consumed", "acked": sum(acked), "consumed": len(values),
     "version": confluent_kafka.version()[0], "libversion": confluent_kafka.libversion()[0]})
sys.stdin.readline()

out = {"phase": "ready", "errors": []}
consumer.unsubscribe()
# librdkafka leaves the group (LeaveGroup) once the application has served
# the unassignment, which polling does.
deadline = time.time() + 3
while time.time() < deadline:
    consumer.poll(0.2)
for name, call in [
    ("describe_configs", lambda: [f.result(timeout=30) for f in
                                  admin.describe_configs([ConfigResource("topic", topic)]).values()]),
    ("list_groups", lambda: admin.list_groups(timeout=30)),
    ("list_topics", lambda: admin.list_topics(topic, timeout=30)),
]:
    try:
        call()
    except Exception:
        out["errors"].append(name + ": " + traceback.format_exc())
say(out)
sys.stdin.readline()

consumer.close()
