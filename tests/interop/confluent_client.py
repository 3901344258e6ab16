"""confluent-kafka (librdkafka) side of the interop tests.

Usage:
    confluent_client.py create-topic BOOTSTRAP TOPIC PARTITIONS
    confluent_client.py delete-topic BOOTSTRAP TOPIC
    confluent_client.py list-topics  BOOTSTRAP
    confluent_client.py produce      BOOTSTRAP TOPIC SEED COUNT PARTITIONS [COMPRESSION [idempotent]]
    confluent_client.py consume      BOOTSTRAP TOPIC SEED COUNT PARTITIONS
    confluent_client.py consume-rack BOOTSTRAP TOPIC SEED COUNT PARTITIONS RACK
    confluent_client.py produce-numbered BOOTSTRAP TOPIC PARTITIONS FIRST COUNT
    confluent_client.py produce-keyed    BOOTSTRAP TOPIC SEED COUNT
    confluent_client.py group-member     BOOTSTRAP TOPIC GROUP NAME [classic|consumer]
    confluent_client.py auth-check       BOOTSTRAP

With `INTEROP_SECURITY_PROTOCOL` and the other variables of `records.Security`
set, every client connects with them (SASL_SSL); otherwise in plaintext.
`auth-check` asks for metadata once and reports whether the client
authenticated or which authentication error librdkafka reported.

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
- consume-rack: `consume` with `client.rack=RACK` (KIP-392), and librdkafka's
  statistics every 200 ms: the result's `fetch_brokers` names, per partition,
  the broker librdkafka last fetched it from (its `broker` statistic).
- produce-keyed: `partitioner=murmur2_random`, librdkafka's Java-compatible
  partitioner (its own default, `consistent_random`, hashes with CRC32).
- group-member: `subscribe()` (the classic protocol with librdkafka's default
  `range,roundrobin` assignors), `enable.auto.commit=False` and a synchronous
  `commit()` of the records of every `consume()` call before the next one;
  `heartbeat.interval.ms=500` so that rebalances start quickly. It runs until
  its stdin closes, then `close()` leaves the group (LeaveGroup).
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
    sec = records.security()
    if sec is not None:
        config.update(
            {
                "security.protocol": sec.protocol,
                "sasl.mechanisms": sec.mechanism,
                "sasl.username": sec.username,
                "sasl.password": sec.password,
                "ssl.ca.location": sec.ca,
                # librdkafka's default since 2.0, given explicitly: the broker's
                # certificate must name the host connected to.
                "ssl.endpoint.identification.algorithm": "https",
            }
        )
    return config


def error_cb(err):
    print("librdkafka error: %s" % (err,), file=sys.stderr, flush=True)


def auth_check(bootstrap):
    """Lists topics once; reports the authentication error librdkafka saw, if any."""
    errors = []

    def on_error(err):
        errors.append(err)

    client = AdminClient(dict(base_config(bootstrap, "interop-confluent-auth-check"), error_cb=on_error))
    listed = None
    try:
        listed = client.list_topics(timeout=5)
    except KafkaException as e:
        errors.append(e.args[0])
    # Errors reach error_cb from poll().
    client.poll(1)
    for e in errors[:3]:
        print("auth-check: %s" % (e,), file=sys.stderr)
    auth = [e for e in errors if e.code() == KafkaError._AUTHENTICATION]
    records.emit(
        {
            "client": "confluent-kafka",
            "authenticated": listed is not None and not auth,
            "auth_error": str(auth[0]) if auth else "",
        }
    )
    return 0


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


def consume(bootstrap, topic, seed, count, partitions, rack=None):
    checker = records.Checker(seed, count, partitions)
    config = base_config(bootstrap, "interop-confluent-consumer")
    fetched_from = {}
    if rack is not None:
        import json

        def on_stats(text):
            stats = json.loads(text)
            for p, v in stats.get("topics", {}).get(topic, {}).get("partitions", {}).items():
                if int(p) >= 0 and v.get("broker", -1) >= 0:
                    fetched_from[int(p)] = v["broker"]

        config.update({"client.rack": rack, "statistics.interval.ms": 200, "stats_cb": on_stats})
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
        if rack is not None:
            # Statistics arrive through consume(): wait for a report after the reads.
            fetched_from.clear()
            stats_deadline = records.Deadline(10)
            while len(fetched_from) < partitions and not stats_deadline.expired():
                for m in consumer.consume(num_messages=1000, timeout=0.3):
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
    extra = {"end_offsets": ends}
    if rack is not None:
        extra["fetch_brokers"] = [fetched_from.get(p, -1) for p in range(partitions)]
    return checker.finish("confluent-kafka", extra)


def producer_for_tests(bootstrap, client_id, **extra):
    config = base_config(bootstrap, client_id)
    config.update(
        {
            "enable.idempotence": False,
            "acks": "all",
            "linger.ms": 5,
            "message.timeout.ms": int(TIMEOUT_S * 1000),
            "error_cb": error_cb,
        }
    )
    config.update(extra)
    return Producer(config)


def produce_all(producer, sends):
    """Produces every `(topic, kwargs)` of `sends`; returns the delivery
    reports in send order, as `(partition, offset)` or an error string."""
    reports = [None] * len(sends)

    def on_delivery(index):
        def cb(err, msg):
            reports[index] = str(err) if err is not None else (msg.partition(), msg.offset())

        return cb

    for i, (topic, kwargs) in enumerate(sends):
        while True:
            try:
                producer.produce(topic, on_delivery=on_delivery(i), **kwargs)
                break
            except BufferError:
                producer.poll(0.1)
        producer.poll(0)
    producer.flush(TIMEOUT_S)
    return reports


def produce_numbered(bootstrap, topic, partitions, first, count):
    """Writes offsets FIRST..FIRST+COUNT of every partition (see
    `records.numbered_value`), interleaving the partitions."""
    producer = producer_for_tests(bootstrap, "interop-confluent-numbered")
    want = [(p, o) for o in range(first, first + count) for p in range(partitions)]
    sends = [
        (topic, {"key": records.numbered_key(p, o), "value": records.numbered_value(p, o), "partition": p})
        for p, o in want
    ]
    reports = produce_all(producer, sends)
    problems = [
        "acked %r, expected partition %d offset %d" % (got, p, o)
        for got, (p, o) in zip(reports, want)
        if got != (p, o)
    ]
    for p in problems[:20]:
        print("PRODUCE " + p, file=sys.stderr)
    records.emit({"client": "confluent-kafka", "ok": not problems, "produced": len(sends)})
    return 0 if not problems else 1


def produce_keyed(bootstrap, topic, seed, count):
    """Writes `count` keyed records (`records.keyed_key`) with the murmur2
    partitioner choosing the partition; prints the partition of every key, in
    key order."""
    producer = producer_for_tests(bootstrap, "interop-confluent-keyed", partitioner="murmur2_random")
    reports = produce_all(producer, [(topic, {"key": records.keyed_key(seed, i), "value": b"v"}) for i in range(count)])
    errors = [r for r in reports if not isinstance(r, tuple)]
    for e in errors[:20]:
        print("PRODUCE delivery failed: %s" % (e,), file=sys.stderr)
    partitions = [r[0] if isinstance(r, tuple) else -1 for r in reports]
    records.emit({"client": "confluent-kafka", "ok": not errors, "partitions": partitions})
    return 0 if not errors else 1


def group_member(bootstrap, topic, group, name, protocol="classic"):
    """One member of a consumer group; see `records.MemberLog` for what it
    prints. Stops when stdin closes (or after the client timeout). With
    `protocol` "consumer" the member uses the KIP-848 consumer group protocol
    (`group.protocol=consumer`: the coordinator assigns, and sets the session
    timeout and heartbeat interval)."""
    stop = records.stdin_closed()
    log = records.MemberLog()
    config = base_config(bootstrap, name)
    config.update(
        {
            "group.id": group,
            "enable.auto.commit": False,
            "enable.partition.eof": False,
            "auto.offset.reset": "earliest",
            "error_cb": error_cb,
        }
    )
    if protocol == "consumer":
        config["group.protocol"] = "consumer"
    else:
        config["session.timeout.ms"] = 10000
        config["heartbeat.interval.ms"] = 500
    consumer = Consumer(config)

    # The consumer protocol rebalances incrementally: callbacks name the
    # partitions added or taken away, so the member logs what it owns after
    # each (an empty set as REVOKED), as the classic protocol's full lists do.
    owned = set()

    def on_assign(_consumer, partitions):
        if protocol == "consumer":
            owned.update(tp.partition for tp in partitions)
            log.assigned(owned)
        else:
            log.assigned([tp.partition for tp in partitions])

    def on_revoke(_consumer, partitions):
        if protocol == "consumer":
            owned.difference_update(tp.partition for tp in partitions)
            if owned:
                log.assigned(owned)
            else:
                log.revoked([tp.partition for tp in partitions])
        else:
            log.revoked([tp.partition for tp in partitions])

    try:
        consumer.subscribe([topic], on_assign=on_assign, on_revoke=on_revoke)
        deadline = records.Deadline(TIMEOUT_S)
        while not stop.is_set() and not deadline.expired():
            offsets = {}
            for m in consumer.consume(num_messages=100, timeout=0.2):
                err = m.error()
                if err is not None:
                    log.fail("consume error: %s" % (err,))
                    continue
                log.record(m.partition(), m.offset(), m.key(), m.value())
                offsets[m.partition()] = m.offset() + 1
            if offsets:
                try:
                    done = consumer.commit(
                        offsets=[TopicPartition(topic, p, o) for p, o in offsets.items()],
                        asynchronous=False,
                    )
                except KafkaException as e:
                    log.commit_failed(e)
                else:
                    for tp in done:
                        if tp.error is not None:
                            log.commit_failed("partition %d: %s" % (tp.partition, tp.error))
                        else:
                            log.committed(tp.partition, tp.offset)
    finally:
        consumer.close()
    return log.finish("confluent-kafka", name)


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
        if cmd == "auth-check":
            return auth_check(bootstrap)
        if cmd == "produce-numbered":
            return produce_numbered(bootstrap, argv[3], int(argv[4]), int(argv[5]), int(argv[6]))
        if cmd == "produce-keyed":
            return produce_keyed(bootstrap, argv[3], int(argv[4]), int(argv[5]))
        if cmd == "group-member":
            protocol = argv[6] if len(argv) > 6 else "classic"
            return group_member(bootstrap, argv[3], argv[4], argv[5], protocol)
        if cmd == "consume-rack":
            topic, seed, count, partitions, rack = argv[3], int(argv[4]), int(argv[5]), int(argv[6]), argv[7]
            return consume(bootstrap, topic, seed, count, partitions, rack=rack)
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
