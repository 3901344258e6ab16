"""kafka-python side of the interop tests.

Usage:
    kafka_python_client.py create-topic BOOTSTRAP TOPIC PARTITIONS
    kafka_python_client.py delete-topic BOOTSTRAP TOPIC
    kafka_python_client.py list-topics  BOOTSTRAP
    kafka_python_client.py delete-records BOOTSTRAP TOPIC PARTITION OFFSET
    kafka_python_client.py produce      BOOTSTRAP TOPIC SEED COUNT PARTITIONS [COMPRESSION [idempotent]]
    kafka_python_client.py consume      BOOTSTRAP TOPIC SEED COUNT PARTITIONS
    kafka_python_client.py produce-numbered BOOTSTRAP TOPIC PARTITIONS FIRST COUNT
    kafka_python_client.py produce-keyed    BOOTSTRAP TOPIC SEED COUNT
    kafka_python_client.py group-member     BOOTSTRAP TOPIC GROUP NAME
    kafka_python_client.py auth-check       BOOTSTRAP
    kafka_python_client.py read-table       BOOTSTRAP TOPIC END

With `INTEROP_SECURITY_PROTOCOL` and the other variables of `records.Security`
set, every client connects with them (SASL_SSL, `ssl_check_hostname` on);
otherwise in plaintext. `auth-check` connects an admin client once and reports
whether it authenticated or the authentication error it raised.

Each command prints one `RESULT {json}` line on success and exits 0; on
failure it prints the reason to stderr and exits non-zero.

Configuration needed against baton-broker (and why):
- producer: kafka-python 3 turns idempotence on by default (InitProducerId,
  producer id/epoch/sequence in every batch); the tests run it both ways, so
  `enable_idempotence` is always given explicitly.
- consumer `group_id=None` with `assign()`: no FindCoordinator / group APIs, so
  no subscription and no offset commits (`enable_auto_commit=False`).
- group-member: `subscribe()` with `group_id` (the classic protocol with the
  client's default range assignor), `enable_auto_commit=False` and a
  synchronous `commit()` of the records of every poll before the next one;
  `heartbeat_interval_ms=500` so that rebalances start quickly. It runs until
  its stdin closes, then `close()` leaves the group (LeaveGroup).
"""

import logging
import os
import sys

from kafka import KafkaConsumer, KafkaProducer, OffsetAndMetadata, TopicPartition
from kafka.admin import KafkaAdminClient
from kafka.consumer.subscription_state import ConsumerRebalanceListener
from kafka.errors import KafkaError, SaslAuthenticationFailedError

import records

TIMEOUT_S = float(os.environ.get("INTEROP_CLIENT_TIMEOUT_S", "90"))


def security():
    """Keyword arguments for every client: the connection's security settings."""
    sec = records.security()
    if sec is None:
        return {}
    return {
        "security_protocol": sec.protocol,
        "sasl_mechanism": sec.mechanism,
        "sasl_plain_username": sec.username,
        "sasl_plain_password": sec.password,
        "ssl_cafile": sec.ca,
        "ssl_check_hostname": True,
    }


def admin(bootstrap):
    return KafkaAdminClient(
        bootstrap_servers=bootstrap,
        client_id="interop-kafka-python-admin",
        request_timeout_ms=30000,
        **security(),
    )


class AuthFailures(logging.Handler):
    """Collects the authentication failures kafka-python logs: its admin client
    retries a refused bootstrap connection until `bootstrap_timeout_ms` and then
    raises a timeout, so the failure itself shows only in its log."""

    def __init__(self):
        super().__init__(logging.WARNING)
        self.failures = []

    def emit(self, record):
        message = record.getMessage()
        if "SaslAuthenticationFailedError" in message:
            self.failures.append(message)


def auth_check(bootstrap):
    """Connects an admin client and lists topics; reports an authentication error."""
    failures = AuthFailures()
    logging.getLogger("kafka").addHandler(failures)
    error = ""
    authenticated = False
    try:
        client = KafkaAdminClient(
            bootstrap_servers=bootstrap,
            client_id="interop-kafka-python-auth-check",
            request_timeout_ms=10000,
            bootstrap_timeout_ms=5000,
            **security(),
        )
        try:
            client.list_topics()
            authenticated = True
        finally:
            client.close()
    except SaslAuthenticationFailedError as e:
        error = "%s: %s" % (type(e).__name__, e)
    except KafkaError as e:
        print("auth-check: %r" % (e,), file=sys.stderr)
    if not error and failures.failures:
        error = failures.failures[0]
    records.emit({"client": "kafka-python", "authenticated": authenticated, "auth_error": error})
    return 0


def create_topic(bootstrap, topic, partitions):
    client = admin(bootstrap)
    try:
        result = client.create_topics(
            {topic: {"num_partitions": partitions, "replication_factor": 1}},
            wait_for_metadata=True,
        )
        described = client.describe_topics([topic])
        counts = {t["name"]: len(t["partitions"]) for t in described}
    finally:
        client.close()
    errors = [t for t in result["topics"] if t.get("error_code", 0) != 0]
    if errors:
        print("create_topics returned errors: %r" % (errors,), file=sys.stderr)
        return 1
    records.emit({"client": "kafka-python", "created": topic, "partitions": counts.get(topic)})
    return 0


def delete_topic(bootstrap, topic):
    client = admin(bootstrap)
    try:
        result = client.delete_topics([topic])
    finally:
        client.close()
    errors = [t for t in result["topics"] if t.get("error_code", 0) != 0]
    if errors:
        print("delete_topics returned errors: %r" % (errors,), file=sys.stderr)
        return 1
    records.emit({"client": "kafka-python", "deleted": topic})
    return 0


def delete_records(bootstrap, topic, partition, offset):
    """DeleteRecords of one partition below OFFSET (-1: the high watermark) through
    the admin client; reports the low watermark or the error's name."""
    from kafka import TopicPartition

    client = admin(bootstrap)
    low, error = -1, ""
    try:
        result = client.delete_records({TopicPartition(topic, partition): offset}, timeout_ms=30000)
        low = result[TopicPartition(topic, partition)]["low_watermark"]
    except KafkaError as e:
        error = type(e).__name__
    finally:
        client.close()
    records.emit({"client": "kafka-python", "low_watermark": low, "error": error})
    return 0


def list_topics(bootstrap):
    client = admin(bootstrap)
    try:
        described = client.describe_topics()
    finally:
        client.close()
    topics = {t["name"]: len(t["partitions"]) for t in described}
    records.emit({"client": "kafka-python", "topics": topics})
    return 0


def produce(bootstrap, topic, seed, count, partitions, compression="none", idempotent=False):
    recs = records.generate(seed, count, partitions)
    producer = KafkaProducer(
        bootstrap_servers=bootstrap,
        client_id="interop-kafka-python-producer",
        enable_idempotence=idempotent,
        acks="all",
        linger_ms=5,
        max_request_size=1024 * 1024,
        request_timeout_ms=30000,
        max_block_ms=30000,
        compression_type=None if compression == "none" else compression,
        **security(),
    )
    futures = []
    try:
        for r in recs:
            futures.append(
                producer.send(
                    topic,
                    key=r.key,
                    value=r.value,
                    headers=r.headers,
                    partition=r.partition,
                    timestamp_ms=r.timestamp_ms,
                )
            )
        producer.flush(timeout=TIMEOUT_S)
        # Offsets the broker assigned must follow the send order per partition.
        next_offset = [0] * partitions
        problems = []
        for i, (r, f) in enumerate(zip(recs, futures)):
            md = f.get(timeout=TIMEOUT_S)
            if md.partition != r.partition or md.offset != next_offset[r.partition]:
                problems.append(
                    "record #%d: acked at partition %d offset %d, expected partition %d offset %d"
                    % (i, md.partition, md.offset, r.partition, next_offset[r.partition])
                )
            next_offset[r.partition] += 1
    finally:
        producer.close(timeout=10)
    for p in problems[:20]:
        print("PRODUCE " + p, file=sys.stderr)
    records.emit(
        {
            "client": "kafka-python",
            "ok": not problems,
            "produced": count,
            "compression": compression,
            "idempotent": idempotent,
            "per_partition": next_offset,
        }
    )
    return 0 if not problems else 1


def consume(bootstrap, topic, seed, count, partitions):
    checker = records.Checker(seed, count, partitions)
    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap,
        client_id="interop-kafka-python-consumer",
        group_id=None,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        request_timeout_ms=30000,
        **security(),
    )
    try:
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        consumer.assign(tps)
        consumer.seek_to_beginning(*tps)
        end_offsets = consumer.end_offsets(tps)
        deadline = records.Deadline(TIMEOUT_S)
        while not checker.done() and not deadline.expired():
            batch = consumer.poll(timeout_ms=500, max_records=1000)
            for tp, msgs in batch.items():
                for m in msgs:
                    checker.check(
                        m.partition,
                        m.offset,
                        m.key,
                        m.value,
                        [(k, v) for k, v in (m.headers or [])],
                        m.timestamp if m.timestamp_type == 0 else None,
                    )
                    if m.timestamp_type != 0:
                        checker.fail("partition %d offset %d: timestamp type %d, expected 0 (CreateTime)"
                                     % (m.partition, m.offset, m.timestamp_type))
        # Anything past the expected end would show up in one more poll.
        for tp, msgs in consumer.poll(timeout_ms=200).items():
            for m in msgs:
                checker.check(m.partition, m.offset, m.key, m.value, list(m.headers or []), None)
    finally:
        consumer.close()
    ends = [end_offsets[tp] for tp in tps]
    if ends != [len(e) for e in checker.expected]:
        checker.fail("ListOffsets latest offsets %s, expected %s" % (ends, [len(e) for e in checker.expected]))
    return checker.finish("kafka-python", {"end_offsets": ends})


def read_table(bootstrap, topic, end):
    """Reads partition 0 of TOPIC from its beginning until the position reaches
    END (offsets may skip: a compacted topic); prints the offset, key and value of
    every record, keys and values as the integers they spell (-1 for a null
    value, a tombstone)."""
    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap,
        client_id="interop-kafka-python-table",
        group_id=None,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        request_timeout_ms=30000,
        **security(),
    )
    offsets, keys, values = [], [], []
    try:
        tp = TopicPartition(topic, 0)
        consumer.assign([tp])
        consumer.seek_to_beginning(tp)
        deadline = records.Deadline(TIMEOUT_S)
        while consumer.position(tp) < end and not deadline.expired():
            for msgs in consumer.poll(timeout_ms=500, max_records=1000).values():
                for m in msgs:
                    offsets.append(m.offset)
                    keys.append(int(m.key))
                    values.append(-1 if m.value is None else int(m.value))
        position = consumer.position(tp)
    finally:
        consumer.close()
    records.emit({"client": "kafka-python", "ok": position >= end, "position": position,
                  "offsets": offsets, "keys": keys, "values": values})
    return 0


def producer_for_tests(bootstrap, client_id):
    return KafkaProducer(
        bootstrap_servers=bootstrap,
        client_id=client_id,
        enable_idempotence=False,
        acks="all",
        linger_ms=5,
        request_timeout_ms=30000,
        max_block_ms=30000,
        **security(),
    )


def produce_numbered(bootstrap, topic, partitions, first, count):
    """Writes offsets FIRST..FIRST+COUNT of every partition (see
    `records.numbered_value`), interleaving the partitions."""
    producer = producer_for_tests(bootstrap, "interop-kafka-python-numbered")
    sent = []
    try:
        for offset in range(first, first + count):
            for p in range(partitions):
                f = producer.send(
                    topic,
                    key=records.numbered_key(p, offset),
                    value=records.numbered_value(p, offset),
                    partition=p,
                )
                sent.append((p, offset, f))
        producer.flush(timeout=TIMEOUT_S)
        problems = []
        for p, offset, f in sent:
            md = f.get(timeout=TIMEOUT_S)
            if (md.partition, md.offset) != (p, offset):
                problems.append("acked at partition %d offset %d, expected partition %d offset %d"
                                % (md.partition, md.offset, p, offset))
    finally:
        producer.close(timeout=10)
    for p in problems[:20]:
        print("PRODUCE " + p, file=sys.stderr)
    records.emit({"client": "kafka-python", "ok": not problems, "produced": len(sent)})
    return 0 if not problems else 1


def produce_keyed(bootstrap, topic, seed, count):
    """Writes `count` keyed records (`records.keyed_key`) without naming a
    partition, so the default (murmur2) partitioner picks it; prints the
    partition of every key, in key order."""
    producer = producer_for_tests(bootstrap, "interop-kafka-python-keyed")
    try:
        futures = [producer.send(topic, key=records.keyed_key(seed, i), value=b"v") for i in range(count)]
        producer.flush(timeout=TIMEOUT_S)
        partitions = [f.get(timeout=TIMEOUT_S).partition for f in futures]
    finally:
        producer.close(timeout=10)
    records.emit({"client": "kafka-python", "ok": True, "partitions": partitions})
    return 0


class MemberListener(ConsumerRebalanceListener):
    def __init__(self, log):
        self.log = log

    def on_partitions_revoked(self, revoked):
        self.log.revoked([tp.partition for tp in revoked])

    def on_partitions_assigned(self, assigned):
        self.log.assigned([tp.partition for tp in assigned])


def group_member(bootstrap, topic, group, name):
    """One member of a consumer group; see `records.MemberLog` for what it
    prints. Stops when stdin closes (or after the client timeout)."""
    stop = records.stdin_closed()
    log = records.MemberLog()
    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap,
        client_id=name,
        group_id=group,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        session_timeout_ms=10000,
        heartbeat_interval_ms=500,
        max_poll_records=100,
        **security(),
    )
    try:
        consumer.subscribe([topic], listener=MemberListener(log))
        deadline = records.Deadline(TIMEOUT_S)
        while not stop.is_set() and not deadline.expired():
            batch = consumer.poll(timeout_ms=200)
            offsets = {}
            for tp, msgs in batch.items():
                for m in msgs:
                    log.record(m.partition, m.offset, m.key, m.value)
                    offsets[tp] = OffsetAndMetadata(m.offset + 1, "", -1)
            if offsets:
                try:
                    consumer.commit(offsets)
                except KafkaError as e:
                    log.commit_failed(repr(e))
                else:
                    for tp, om in offsets.items():
                        log.committed(tp.partition, om.offset)
    finally:
        consumer.close()
    return log.finish("kafka-python", name)


def main(argv):
    logging.basicConfig(level=os.environ.get("INTEROP_LOG", "WARNING"), stream=sys.stderr)
    if len(argv) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    cmd, bootstrap = argv[1], argv[2]
    if cmd == "create-topic":
        return create_topic(bootstrap, argv[3], int(argv[4]))
    if cmd == "delete-topic":
        return delete_topic(bootstrap, argv[3])
    if cmd == "delete-records":
        return delete_records(bootstrap, argv[3], int(argv[4]), int(argv[5]))
    if cmd == "list-topics":
        return list_topics(bootstrap)
    if cmd == "auth-check":
        return auth_check(bootstrap)
    if cmd == "produce-numbered":
        return produce_numbered(bootstrap, argv[3], int(argv[4]), int(argv[5]), int(argv[6]))
    if cmd == "produce-keyed":
        return produce_keyed(bootstrap, argv[3], int(argv[4]), int(argv[5]))
    if cmd == "read-table":
        return read_table(bootstrap, argv[3], int(argv[4]))
    if cmd == "group-member":
        return group_member(bootstrap, argv[3], argv[4], argv[5])
    if cmd in ("produce", "consume"):
        topic, seed, count, partitions = argv[3], int(argv[4]), int(argv[5]), int(argv[6])
        if cmd == "produce":
            compression = argv[7] if len(argv) > 7 else "none"
            idempotent = len(argv) > 8 and argv[8] == "idempotent"
            return produce(bootstrap, topic, seed, count, partitions, compression, idempotent)
        return consume(bootstrap, topic, seed, count, partitions)
    print("unknown command %r\n%s" % (cmd, __doc__), file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
