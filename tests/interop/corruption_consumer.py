"""kafka-python consumer for the corruption tests.

Usage:
    corruption_consumer.py consume BOOTSTRAP TOPIC PARTITION COUNT

Reads partition PARTITION of TOPIC from the beginning until COUNT distinct
offsets were received (or the deadline passes), checking every value's own
checksum (the `baton_broker::history` payloads of the Rust tests, read by
`history_payload.py`).
Prints one `RESULT {json}` line: counts, and `pairs`, a string of
`offset:id` items separated by commas (id -1 for a value that fails its
checksum). Exits non-zero on failure.
"""

import json
import os
import sys

from kafka import KafkaConsumer, TopicPartition

import history_payload

TIMEOUT_S = float(os.environ.get("INTEROP_CLIENT_TIMEOUT_S", "120"))


def parse(value):
    return history_payload.parse(value)


def consume(bootstrap, topic, partition, count):
    import time

    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap,
        client_id="corruption-kafka-python-consumer",
        group_id=None,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        request_timeout_ms=30000,
        retry_backoff_ms=100,
        metadata_max_age_ms=1000,
    )
    seen = {}
    received = 0
    try:
        tp = TopicPartition(topic, partition)
        consumer.assign([tp])
        consumer.seek_to_beginning(tp)
        deadline = time.monotonic() + TIMEOUT_S
        while len(seen) < count and time.monotonic() < deadline:
            batch = consumer.poll(timeout_ms=500, max_records=1000)
            for msgs in batch.values():
                for m in msgs:
                    received += 1
                    seen.setdefault(m.offset, []).append(parse(m.value))
        # Anything more (duplicates, extra records) would show up in one more poll.
        for msgs in consumer.poll(timeout_ms=300).values():
            for m in msgs:
                received += 1
                seen.setdefault(m.offset, []).append(parse(m.value))
    finally:
        consumer.close()
    duplicated = sum(len(v) - 1 for v in seen.values())
    bad = sum(1 for v in seen.values() for i in v if i < 0)
    pairs = ",".join("%d:%d" % (o, v[0]) for o, v in sorted(seen.items()))
    print("RESULT " + json.dumps({
        "received": received,
        "distinct": len(seen),
        "duplicated": duplicated,
        "bad": bad,
        "pairs": pairs,
    }))
    sys.stdout.flush()
    if len(seen) < count:
        print("only %d of %d offsets received" % (len(seen), count), file=sys.stderr)
        return 1
    return 0


def main(argv):
    if len(argv) == 6 and argv[1] == "consume":
        return consume(argv[2], argv[3], int(argv[4]), int(argv[5]))
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
