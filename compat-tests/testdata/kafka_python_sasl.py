"""kafka-python 2.0 with SASL/PLAIN (a SaslHandshake v0, then bare tokens).

Usage: kafka_python_sasl.py HOST:PORT TOPIC USER PASSWORD
Produces 20 records and reads them back; prints one JSON line.
"""
import json
import sys

from kafka import KafkaConsumer, KafkaProducer, TopicPartition

addr, topic, user, password = sys.argv[1:5]
sasl = dict(security_protocol="SASL_PLAINTEXT", sasl_mechanism="PLAIN",
            sasl_plain_username=user, sasl_plain_password=password)
producer = KafkaProducer(bootstrap_servers=addr, acks="all", **sasl)
futures = [producer.send(topic, value=b"p%d" % i) for i in range(20)]
producer.flush()
acked = [f.get(timeout=10) for f in futures]
producer.close()

consumer = KafkaConsumer(bootstrap_servers=addr, consumer_timeout_ms=5000,
                         auto_offset_reset="earliest", enable_auto_commit=False, **sasl)
consumer.assign([TopicPartition(topic, 0)])
consumer.seek_to_beginning()
values = [m.value.decode() for m in consumer]
consumer.close()
print(json.dumps({"acked": len(acked), "values": values}))
