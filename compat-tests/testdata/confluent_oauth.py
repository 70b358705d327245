"""confluent-kafka-python (librdkafka) with a signed OAUTHBEARER token.

Usage:
  confluent_oauth.py BOOTSTRAP TOPIC GROUP
      reads the token (a signed JWT) from stdin and hands it to librdkafka
      through oauth_cb; produces one record "rdkafka-oauth" with acks=all,
      then reads TOPIC from the beginning (group GROUP, assigned partition
      0, no commits) until that record is seen.

Prints one JSON line {"acked": n, "values": [...]}; a client failure
raises, so the script exits non-zero with the traceback on stderr.
"""
import json
import sys
import time

from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition


def main():
    addr, topic, group = sys.argv[1:4]
    token = sys.stdin.read().strip()
    errors = []
    common = {
        "bootstrap.servers": addr,
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanisms": "OAUTHBEARER",
        "oauth_cb": lambda _cfg: (token, time.time() + 3600),
        "error_cb": lambda e: errors.append(str(e)),
    }
    p = Producer(dict(common, acks="all"))
    acked = []
    p.produce(topic, b"rdkafka-oauth", callback=lambda err, msg: acked.append(err))
    if p.flush(20) != 0 or acked != [None]:
        raise SystemExit("produce not acknowledged: %r errors %r" % (acked, errors))
    c = Consumer(dict(common, **{"group.id": group, "enable.auto.commit": False}))
    c.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
    values, deadline = [], time.time() + 20
    while b"rdkafka-oauth" not in values and time.time() < deadline:
        m = c.poll(0.5)
        if m is not None and m.error() is None:
            values.append(m.value())
    c.close()
    print(json.dumps({"acked": len(acked), "values": [v.decode() for v in values], "errors": errors}))


main()
