"""confluent-kafka-python (librdkafka) with SASL/SCRAM on a SASL_PLAINTEXT
listener.

Usage:
  confluent_scram.py roundtrip BOOTSTRAP MECHANISM USER TOPIC GROUP
      produces 20 records "<MECHANISM>-0" .. "<MECHANISM>-19" with
      acks=all, then reads partition 0 of TOPIC from the beginning (group
      GROUP, assigned, no commits) until all 20 are seen or 20 s pass.
  confluent_scram.py login BOOTSTRAP MECHANISM USER
      waits (10 s bound) for librdkafka to report an authentication
      failure, then asks for the cluster's metadata (2 s bound) and
      reports whether it came and what librdkafka reported.

The password is read from stdin, so it never shows on a command line.
Prints one JSON line; a client failure in roundtrip raises, so the script
exits non-zero with the traceback on stderr.
"""
import json
import sys
import time

from confluent_kafka import (OFFSET_BEGINNING, Consumer, KafkaException,
                             Producer, TopicPartition, libversion)


def config(addr, mechanism, user, password, errors):
    return {
        "bootstrap.servers": addr,
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanisms": mechanism,
        "sasl.username": user,
        "sasl.password": password,
        "error_cb": lambda e: errors.append({"name": e.name(), "str": e.str()}),
    }


def roundtrip(common, mechanism, topic, group, errors):
    want = ["%s-%d" % (mechanism, i) for i in range(20)]
    p = Producer(dict(common, acks="all"))
    acked = []
    for v in want:
        p.produce(topic, v.encode(), callback=lambda err, msg: acked.append(err))
    if p.flush(20) != 0 or acked != [None] * len(want):
        raise SystemExit("produce not acknowledged: %r errors %r" % (acked, errors))
    c = Consumer(dict(common, **{"group.id": group, "enable.auto.commit": False}))
    c.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
    values, deadline = [], time.time() + 20
    while len(values) < len(want) and time.time() < deadline:
        m = c.poll(0.5)
        if m is not None and m.error() is None:
            values.append(m.value().decode())
    c.close()
    return {"librdkafka": libversion()[0], "acked": len(acked), "values": values, "errors": errors}


def login(common, errors):
    p = Producer(common)
    # Serve error_cb until librdkafka reports an authentication failure
    # (then the metadata cannot come) or 10 s pass.
    deadline = time.time() + 10
    while time.time() < deadline and not any(e["name"] == "_AUTHENTICATION" for e in errors):
        p.poll(0.1)
    try:
        md = p.list_topics(timeout=2)
        return {"ok": True, "brokers": len(md.brokers), "errors": errors}
    except KafkaException as e:
        return {"ok": False, "error": {"name": e.args[0].name(), "str": e.args[0].str()}, "errors": errors}


def main():
    mode, addr, mechanism, user = sys.argv[1:5]
    password = sys.stdin.read().strip()
    errors = []
    common = config(addr, mechanism, user, password, errors)
    if mode == "roundtrip":
        out = roundtrip(common, mechanism, sys.argv[5], sys.argv[6], errors)
    elif mode == "login":
        out = login(common, errors)
    else:
        raise SystemExit("unknown mode %r" % mode)
    print(json.dumps(out))


main()
