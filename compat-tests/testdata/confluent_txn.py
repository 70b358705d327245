"""confluent-kafka-python (Debian's python3-confluent-kafka 1.7, librdkafka
2.0) transactions against Fjord.

Usage:
  confluent_txn.py produce   BOOTSTRAP TOPIC TXID
      init_transactions; begin, produce c0-*, commit; begin, produce a1-*,
      abort; begin, produce c2-*, commit. Each round puts 10 records on
      each of the topic's 3 partitions (explicit partitions).
  confluent_txn.py fence     BOOTSTRAP TOPIC TXID
      producer A begins and produces zombie-*; producer B (same id)
      init_transactions, which fences A and aborts its transaction; B
      commits fresh-*; A's commit must fail.
  confluent_txn.py read      BOOTSTRAP TOPIC ISOLATION
      reads every partition from the beginning with isolation.level
      ISOLATION until each has reported its end (read_committed: the last
      stable offset), and prints the values with partition and offset.
  confluent_txn.py ctp       BOOTSTRAP IN OUT GROUP TXID N
      puts N records on IN (idempotent, not transactional), then copies IN
      to OUT in transactions with send_offsets_to_transaction (group GROUP,
      read_committed); the second transaction is aborted and the consumer
      replaced by a new one of the group, which must resume from the
      committed offsets.

Prints one JSON line with what it observed; the Go test checks it. A
failure of the client raises, so the script exits non-zero with the
traceback on stderr.
"""
import json
import sys
import time

from confluent_kafka import (Consumer, KafkaError, KafkaException, Producer,
                             TopicPartition)

TIMEOUT = 10.0  # seconds, for every blocking transactional call
PARTITIONS = 3


def log(*a):
    print(*a, file=sys.stderr, flush=True)


def txn_producer(addr, txid, **extra):
    conf = {
        "bootstrap.servers": addr,
        "transactional.id": txid,
        "transaction.timeout.ms": 20000,
        "acks": "all",
        "linger.ms": 5,
        "error_cb": lambda e: log("producer error_cb:", e),
    }
    conf.update(extra)
    p = Producer(conf)
    p.init_transactions(TIMEOUT)
    return p


def delivery_checker(failures):
    def cb(err, msg):
        if err is not None:
            failures.append("%s[%s]: %s" % (msg.topic(), msg.partition(), err))
    return cb


def produce_round(p, topic, prefix, failures):
    cb = delivery_checker(failures)
    for i in range(10 * PARTITIONS):
        p.produce(topic, key=b"k%d" % i, value=("%s-%d" % (prefix, i)).encode(),
                  partition=i % PARTITIONS, on_delivery=cb)
    p.flush(TIMEOUT)


def cmd_produce(addr, topic, txid):
    p = txn_producer(addr, txid)
    failures = []
    rounds = []
    for r, commit in enumerate([True, False, True]):
        prefix = ("c%d" if commit else "a%d") % r
        p.begin_transaction()
        produce_round(p, topic, prefix, failures)
        if commit:
            p.commit_transaction(TIMEOUT)
        else:
            p.abort_transaction(TIMEOUT)
        rounds.append({"prefix": prefix, "commit": commit})
    p.flush(TIMEOUT)
    print(json.dumps({"rounds": rounds, "delivery_failures": failures}))


def cmd_fence(addr, topic, txid):
    failures = []
    a = txn_producer(addr, txid)
    a.begin_transaction()
    produce_round(a, topic, "zombie", failures)
    zombie_failures = list(failures)
    failures.clear()

    b = txn_producer(addr, txid)  # fences A, aborting its transaction
    b.begin_transaction()
    produce_round(b, topic, "fresh", failures)
    b.commit_transaction(TIMEOUT)

    a_error = None
    try:
        a.produce(topic, value=b"after-fence", partition=0)
        a.commit_transaction(TIMEOUT)
    except KafkaException as e:
        err = e.args[0]
        a_error = {"name": err.name(), "str": err.str(), "fatal": err.fatal(),
                   "retriable": err.retriable(),
                   "txn_requires_abort": err.txn_requires_abort()}
    print(json.dumps({"zombie_delivery_failures": zombie_failures,
                      "fresh_delivery_failures": failures,
                      "a_commit_error": a_error}))


def cmd_read(addr, topic, isolation):
    c = Consumer({
        "bootstrap.servers": addr,
        "group.id": "fjord-txn-reader",  # required by the client, never joined
        "isolation.level": isolation,
        "enable.auto.commit": False,
        "enable.partition.eof": True,
        "error_cb": lambda e: log("consumer error_cb:", e),
    })
    md = c.list_topics(topic, timeout=TIMEOUT)
    parts = sorted(md.topics[topic].partitions)
    c.assign([TopicPartition(topic, p, 0) for p in parts])  # offset 0: the log starts there
    eof = set()
    records = []
    deadline = time.time() + 20
    while len(eof) < len(parts):
        if time.time() > deadline:
            raise SystemExit("read %s (%s): only partitions %s reached their end in 20 s"
                             % (topic, isolation, sorted(eof)))
        m = c.poll(0.5)
        if m is None:
            continue
        if m.error():
            if m.error().code() == KafkaError._PARTITION_EOF:
                eof.add(m.partition())
                continue
            raise KafkaException(m.error())
        eof.discard(m.partition())
        records.append({"p": m.partition(), "o": m.offset(), "v": m.value().decode()})
    positions = {tp.partition: tp.offset for tp in c.position([TopicPartition(topic, p) for p in parts])}
    c.close()
    print(json.dumps({"records": records, "positions": positions}))


def cmd_ctp(addr, src, dst, group, txid, n):
    n = int(n)
    plain = Producer({"bootstrap.servers": addr, "enable.idempotence": True, "linger.ms": 5})
    failures = []
    cb = delivery_checker(failures)
    for i in range(n):
        plain.produce(src, key=b"k%d" % (i % 17), value=b"%d" % i, partition=i % PARTITIONS, on_delivery=cb)
    plain.flush(TIMEOUT)
    if failures:
        raise SystemExit("input produce failed: %s" % failures[:5])

    def new_consumer():
        c = Consumer({
            "bootstrap.servers": addr,
            "group.id": group,
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "session.timeout.ms": 6000,
            "error_cb": lambda e: log("consumer error_cb:", e),
        })
        c.subscribe([src])
        return c

    p = txn_producer(addr, txid)
    c = new_consumer()
    copied = 0
    commits = 0
    aborted = []  # values of the aborted transaction
    deadline = time.time() + 40
    while copied < n:
        if time.time() > deadline:
            raise SystemExit("ctp: copied %d of %d in 40 s (%d commits, aborted %d)"
                             % (copied, n, commits, len(aborted)))
        msgs = c.consume(num_messages=40, timeout=0.5)
        batch = []
        for m in msgs:
            if m.error():
                raise KafkaException(m.error())
            batch.append(m)
        if not batch:
            continue
        p.begin_transaction()
        for m in batch:
            p.produce(dst, key=m.key(), value=m.value(), partition=m.partition(), on_delivery=cb)
        p.send_offsets_to_transaction(c.position(c.assignment()), c.consumer_group_metadata(), TIMEOUT)
        if commits == 1 and not aborted:
            # Abort the second transaction: its records and its offsets
            # must vanish. A new consumer of the group resumes from the
            # offsets committed by the first transaction. Flushed first, so
            # that the aborted records are in the log (an abort purges what
            # is still queued).
            p.flush(TIMEOUT)
            p.abort_transaction(TIMEOUT)
            aborted = [m.value().decode() for m in batch]
            c.close()
            c = new_consumer()
            continue
        p.commit_transaction(TIMEOUT)
        commits += 1
        copied += len(batch)
    committed = c.committed([TopicPartition(src, q) for q in range(PARTITIONS)], timeout=TIMEOUT)
    c.close()
    print(json.dumps({"copied": copied, "commits": commits, "aborted": aborted,
                      "delivery_failures": failures,
                      "committed": {tp.partition: tp.offset for tp in committed}}))


def main():
    cmd, args = sys.argv[1], sys.argv[2:]
    {"produce": cmd_produce, "fence": cmd_fence, "read": cmd_read, "ctp": cmd_ctp}[cmd](*args)


if __name__ == "__main__":
    main()
