"""confluent-kafka (librdkafka) transactions, for the interop tests
(tests/interop_suite/interop_txn.rs).

Usage:
    confluent_txn.py transact BOOTSTRAP INPUT OUTPUT GROUP TXN_ID PARTITIONS BATCH BATCHES
    confluent_txn.py read     BOOTSTRAP TOPIC GROUP EXPECTED [ISOLATION]

`transact` is a consume-transform-produce loop: a consumer in GROUP (at
read_committed) reads the BATCH * BATCHES records of partition 0 of INPUT
(values `in-<i>`), and a transactional producer (TXN_ID: init_transactions,
begin_transaction, produce, send_offsets_to_transaction with the consumer's
group metadata, flush, commit_transaction or abort_transaction) writes
`out-<i>-a<attempt>` (key `k-<i>`) to partition i % PARTITIONS of OUTPUT. Batch
0 commits; batch 1 is aborted once (attempt 0), then the group's committed
offset is read back (it must stay at batch 0's end), and batch 1 is redone and
committed (attempt 1); every later batch commits. The final committed offset is
printed too.

`read` is a group consumer (a fresh GROUP, from the earliest offset) of TOPIC at
ISOLATION, `committed` (the default) or `uncommitted`: it prints every record it
receives and stops EXPECTED records later plus a quiet second.

Every line on stdout is one flat JSON object, `{"event": ...}`; librdkafka logs
to stderr. Exit status 0 on success; on failure the reason goes to stderr, exit
status 1.
"""

import json
import os
import sys
import time

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

TIMEOUT_S = float(os.environ.get("INTEROP_CLIENT_TIMEOUT_S", "90"))
# Longest a committed offset may take to show a transaction's outcome: the
# coordinator may write the markers after it answers EndTxn (Apache Kafka does).
OFFSET_SETTLE_S = 15.0
# How long the committed offset must stay at batch 0's end after the abort.
ABORT_HOLD_S = 1.0
# How long a reader keeps reading after its expected count, for extra records.
QUIET_S = 1.0


def emit(**fields):
    print(json.dumps(fields, separators=(",", ":")), flush=True)


def error_cb(err):
    print("librdkafka error: %s" % (err,), file=sys.stderr, flush=True)


def base_config(bootstrap, client_id):
    return {
        "bootstrap.servers": bootstrap,
        "client.id": client_id,
        "socket.timeout.ms": 30000,
        "log_level": int(os.environ.get("INTEROP_RDKAFKA_LOG_LEVEL", "4")),
        "error_cb": error_cb,
    }


def consumer(bootstrap, client_id, group, isolation):
    config = base_config(bootstrap, client_id)
    config.update(
        {
            "group.id": group,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "isolation.level": "read_%s" % isolation,
            "session.timeout.ms": 10000,
            "heartbeat.interval.ms": 500,
        }
    )
    return Consumer(config)


def poll_until(c, count, keep):
    """Polls `c` until `count` messages passed `keep`; returns them."""
    deadline = time.monotonic() + TIMEOUT_S
    kept = []
    while len(kept) < count:
        if time.monotonic() > deadline:
            raise RuntimeError("timed out after %d of %d records" % (len(kept), count))
        msg = c.poll(0.2)
        if msg is None:
            continue
        if msg.error():
            raise KafkaException(msg.error())
        if keep(msg):
            kept.append(msg)
    return kept


def committed_offset(c, topic):
    [tp] = c.committed([TopicPartition(topic, 0)], timeout=TIMEOUT_S)
    if tp.error:
        raise KafkaException(tp.error)
    return tp.offset


def settled_offset(c, topic, expected, hold_s):
    """The committed offset once it has equalled `expected` for `hold_s`, or
    the last one seen after OFFSET_SETTLE_S."""
    deadline = time.monotonic() + OFFSET_SETTLE_S
    since = None
    offset = None
    while time.monotonic() < deadline:
        offset = committed_offset(c, topic)
        if offset != expected:
            since = None
        elif since is None:
            since = time.monotonic()
        if since is not None and time.monotonic() - since >= hold_s:
            break
        time.sleep(0.1)
    return offset


def attempts(batch):
    """(attempt, commit) of each try of `batch`: batch 1 is aborted once."""
    return [(0, False), (1, True)] if batch == 1 else [(0, True)]


def transact(bootstrap, input_topic, output, group, txn_id, partitions, batch, batches):
    c = consumer(bootstrap, "interop-confluent-input-%s" % group, group, "committed")
    c.subscribe([input_topic])
    try:
        messages = poll_until(c, batch * batches, lambda m: m.partition() == 0)
        emit(event="input", count=len(messages))
        config = base_config(bootstrap, "interop-confluent-%s" % txn_id)
        config.update({"transactional.id": txn_id, "linger.ms": 5})
        p = Producer(config)
        p.init_transactions(TIMEOUT_S)
        emit(event="init", txn_id=txn_id)
        for b in range(batches):
            chunk = messages[b * batch : (b + 1) * batch]
            for attempt, commit in attempts(b):
                p.begin_transaction()
                for m in chunk:
                    i = int(m.value().decode()[len("in-") :])
                    p.produce(
                        output,
                        key=b"k-%d" % i,
                        value=b"out-%d-a%d" % (i, attempt),
                        partition=i % partitions,
                    )
                    p.poll(0)
                following = chunk[-1].offset() + 1
                p.send_offsets_to_transaction(
                    [TopicPartition(input_topic, 0, following)],
                    c.consumer_group_metadata(),
                    TIMEOUT_S,
                )
                # Every record reaches the log before the transaction ends:
                # abort_transaction purges the ones still queued, and the test
                # wants the aborted ones written (read_uncommitted sees them).
                p.flush(TIMEOUT_S)
                if commit:
                    p.commit_transaction(TIMEOUT_S)
                else:
                    p.abort_transaction(TIMEOUT_S)
                emit(
                    event="commit" if commit else "abort",
                    batch=b,
                    attempt=attempt,
                    records=len(chunk),
                    offset=following,
                )
                if not commit:
                    offset = settled_offset(c, input_topic, b * batch, ABORT_HOLD_S)
                    emit(event="committed-offset", after="abort", offset=offset)
        offset = settled_offset(c, input_topic, batch * batches, 0)
        emit(event="committed-offset", after="end", offset=offset)
        p.flush(TIMEOUT_S)
    finally:
        c.close()
    return 0


def read(bootstrap, topic, group, expected, isolation="committed"):
    if isolation not in ("committed", "uncommitted"):
        raise ValueError("isolation %r?" % (isolation,))
    c = consumer(bootstrap, "interop-confluent-reader-%s" % group, group, isolation)
    c.subscribe([topic])
    count = 0
    try:
        for m in poll_until(c, expected, lambda m: True):
            count += 1
            emit_record(m)
        quiet_until = time.monotonic() + QUIET_S
        while time.monotonic() < quiet_until:
            m = c.poll(0.1)
            if m is None:
                continue
            if m.error():
                raise KafkaException(m.error())
            count += 1
            emit_record(m)
    finally:
        c.close()
    emit(event="read", count=count)
    return 0


def emit_record(m):
    emit(
        event="record",
        partition=m.partition(),
        offset=m.offset(),
        key=m.key().decode() if m.key() is not None else None,
        value=m.value().decode() if m.value() is not None else None,
    )


def main(argv):
    if len(argv) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    cmd, bootstrap, args = argv[1], argv[2], argv[3:]
    try:
        if cmd == "transact" and len(args) == 7:
            input_topic, output, group, txn_id = args[:4]
            partitions, batch, batches = (int(a) for a in args[4:])
            return transact(bootstrap, input_topic, output, group, txn_id, partitions, batch, batches)
        if cmd == "read" and len(args) in (3, 4):
            return read(bootstrap, args[0], args[1], int(args[2]), *args[3:])
    except (KafkaException, RuntimeError, ValueError) as e:
        print("%s: %s" % (type(e).__name__, e), file=sys.stderr)
        return 1
    print("bad command %r\n%s" % (argv[1:], __doc__), file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
