"""confluent-kafka (librdkafka) side of the interop tests.

Usage:
    confluent_client.py create-topic BOOTSTRAP TOPIC PARTITIONS
    confluent_client.py delete-topic BOOTSTRAP TOPIC
    confluent_client.py list-topics  BOOTSTRAP
    confluent_client.py produce      BOOTSTRAP TOPIC SEED COUNT PARTITIONS [COMPRESSION [idempotent]]
    confluent_client.py consume      BOOTSTRAP TOPIC SEED COUNT PARTITIONS

Each command prints one `RESULT {json}` line on success and exits 0; on
failure it prints the reason to stderr and exits non-zero.

Configuration needed against baton-broker (and why):
- producer: `enable.idempotence` is given explicitly; the tests run both the
  plain producer (librdkafka's default) and the idempotent one
  (InitProducerId, producer id/epoch/sequence in every batch).
- consumer: the Python binding refuses to build a Consumer without `group.id`
  ("group.id must be set"), so one is set, but it is never used for group
  membership: partitions are given to `assign()` with OFFSET_BEGINNING (no
  committed offsets to look up), `enable.auto.commit=False` and
  `enable.auto.offset.store=False`, so no OffsetCommit/OffsetFetch is sent.
"""

import os
import sys

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

import records

TIMEOUT_S = float(os.environ.get("INTEROP_CLIENT_TIMEOUT_S", "90"))


def base_config(bootstrap, client_id):
    config = {
        "bootstrap.servers": bootstrap,
        "client.id": client_id,
        "socket.timeout.ms": 30000,
        # librdkafka logs through stderr; the Rust test shows it on failure.
        "log_level": int(os.environ.get("INTEROP_RDKAFKA_LOG_LEVEL", "4")),
    }
    debug = os.environ.get("INTEROP_RDKAFKA_DEBUG")
    if debug:
        config["debug"] = debug
    return config


def error_cb(err):
    print("librdkafka error: %s" % (err,), file=sys.stderr, flush=True)


def create_topic(bootstrap, topic, partitions):
    client = AdminClient(dict(base_config(bootstrap, "interop-confluent-admin"), error_cb=error_cb))
    futures = client.create_topics(
        [NewTopic(topic, num_partitions=partitions, replication_factor=1)],
        operation_timeout=30,
        request_timeout=30,
    )
    futures[topic].result(timeout=TIMEOUT_S)
    md = client.list_topics(topic=topic, timeout=30)
    t = md.topics.get(topic)
    if t is None or t.error is not None:
        print("topic %s missing after create: %r" % (topic, t and t.error), file=sys.stderr)
        return 1
    records.emit({"client": "confluent-kafka", "created": topic, "partitions": len(t.partitions)})
    return 0


def delete_topic(bootstrap, topic):
    client = AdminClient(dict(base_config(bootstrap, "interop-confluent-admin"), error_cb=error_cb))
    futures = client.delete_topics([topic], operation_timeout=30, request_timeout=30)
    futures[topic].result(timeout=TIMEOUT_S)
    records.emit({"client": "confluent-kafka", "deleted": topic})
    return 0


def list_topics(bootstrap):
    client = AdminClient(dict(base_config(bootstrap, "interop-confluent-admin"), error_cb=error_cb))
    md = client.list_topics(timeout=30)
    topics = {name: len(t.partitions) for name, t in md.topics.items() if t.error is None}
    records.emit({"client": "confluent-kafka", "topics": topics})
    return 0


def produce(bootstrap, topic, seed, count, partitions, compression="none", idempotent=False):
    recs = records.generate(seed, count, partitions)
    config = base_config(bootstrap, "interop-confluent-producer")
    config.update(
        {
            "enable.idempotence": idempotent,
            "acks": "all",
            "linger.ms": 5,
            "message.max.bytes": 1024 * 1024,
            "message.timeout.ms": int(TIMEOUT_S * 1000),
            "compression.type": compression,
            "error_cb": error_cb,
        }
    )
    producer = Producer(config)
    acked = [None] * count
    errors = []

    def on_delivery(index):
        def cb(err, msg):
            if err is not None:
                errors.append("record #%d: delivery failed: %s" % (index, err))
            else:
                acked[index] = (msg.partition(), msg.offset())

        return cb

    for i, r in enumerate(recs):
        while True:
            try:
                producer.produce(
                    topic,
                    key=r.key,
                    value=r.value,
                    partition=r.partition,
                    timestamp=r.timestamp_ms,
                    headers=r.headers,
                    on_delivery=on_delivery(i),
                )
                break
            except BufferError:
                producer.poll(0.1)
        producer.poll(0)
    remaining = producer.flush(TIMEOUT_S)
    if remaining:
        errors.append("%d records still undelivered after %ss" % (remaining, TIMEOUT_S))

    next_offset = [0] * partitions
    for i, r in enumerate(recs):
        got = acked[i]
        want = (r.partition, next_offset[r.partition])
        if got is not None and got != want:
            errors.append(
                "record #%d: acked at partition %d offset %d, expected partition %d offset %d"
                % ((i,) + got + want)
            )
        next_offset[r.partition] += 1
    for e in errors[:20]:
        print("PRODUCE " + e, file=sys.stderr)
    records.emit(
        {
            "client": "confluent-kafka",
            "ok": not errors,
            "produced": count,
            "compression": compression,
            "idempotent": idempotent,
            "per_partition": next_offset,
        }
    )
    return 0 if not errors else 1


def consume(bootstrap, topic, seed, count, partitions):
    checker = records.Checker(seed, count, partitions)
    config = base_config(bootstrap, "interop-confluent-consumer")
    config.update(
        {
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            "enable.partition.eof": False,
            "auto.offset.reset": "earliest",
            "error_cb": error_cb,
        }
    )
    # Required by the binding; only names the (unused) group.
    config["group.id"] = "interop-confluent-unused-group"
    consumer = Consumer(config)
    try:
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
        deadline = records.Deadline(TIMEOUT_S)
        while not checker.done() and not deadline.expired():
            for m in consumer.consume(num_messages=1000, timeout=0.5):
                err = m.error()
                if err is not None:
                    if err.code() == KafkaError._PARTITION_EOF:
                        continue
                    checker.fail("consume error: %s" % (err,))
                    continue
                ts_type, ts = m.timestamp()
                if ts_type != 1:  # TIMESTAMP_CREATE_TIME
                    checker.fail("partition %d offset %d: timestamp type %d, expected CreateTime"
                                 % (m.partition(), m.offset(), ts_type))
                checker.check(m.partition(), m.offset(), m.key(), m.value(), list(m.headers() or []), ts)
        for m in consumer.consume(num_messages=1000, timeout=0.2):
            if m.error() is None:
                checker.check(m.partition(), m.offset(), m.key(), m.value(), list(m.headers() or []), None)
        ends = []
        for p in range(partitions):
            low, high = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=30, cached=False)
            ends.append(high)
            if low != 0:
                checker.fail("partition %d: low watermark %d, expected 0" % (p, low))
    finally:
        consumer.close()
    if ends != [len(e) for e in checker.expected]:
        checker.fail("high watermarks %s, expected %s" % (ends, [len(e) for e in checker.expected]))
    return checker.finish("confluent-kafka", {"end_offsets": ends})


def main(argv):
    if len(argv) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    cmd, bootstrap = argv[1], argv[2]
    try:
        if cmd == "create-topic":
            return create_topic(bootstrap, argv[3], int(argv[4]))
        if cmd == "delete-topic":
            return delete_topic(bootstrap, argv[3])
        if cmd == "list-topics":
            return list_topics(bootstrap)
        if cmd in ("produce", "consume"):
            topic, seed, count, partitions = argv[3], int(argv[4]), int(argv[5]), int(argv[6])
            if cmd == "produce":
                compression = argv[7] if len(argv) > 7 else "none"
                idempotent = len(argv) > 8 and argv[8] == "idempotent"
                return produce(bootstrap, topic, seed, count, partitions, compression, idempotent)
            return consume(bootstrap, topic, seed, count, partitions)
    except KafkaException as e:
        print("KafkaException: %s" % (e,), file=sys.stderr)
        return 1
    print("unknown command %r\n%s" % (cmd, __doc__), file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
