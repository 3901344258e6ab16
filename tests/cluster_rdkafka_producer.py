"""confluent-kafka (librdkafka) producer for the cluster rolling-restart test.

Usage:
    cluster_rdkafka_producer.py BOOTSTRAP TOPIC COUNT

Produces COUNT self-checking records (acks=all, idempotence off) at a steady pace
so that the test can restart nodes meanwhile, then prints one
`RESULT {"acked": [[id, partition, offset], ...], "failed": N}` line.

Values are the self-checking payloads of `baton_broker::history` (id, CRC-32C,
`id % 50` filler bytes), written by `tests/interop/history_payload.py`, as
`baton_testkit::cluster` writes them.
"""

import json
import os
import sys
import time

from confluent_kafka import Producer

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "interop"))
import history_payload  # noqa: E402


def value(i):
    return history_payload.payload(i, i % 50)


def main():
    bootstrap, topic, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
    acked = []
    failed = [0]

    def on_delivery(err, msg):
        if err is not None:
            failed[0] += 1
            print("delivery failed: %s" % (err,), file=sys.stderr, flush=True)
        else:
            acked.append([int(msg.key()), msg.partition(), msg.offset()])

    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "client.id": "cluster-rolling-rdkafka",
            "acks": "all",
            "enable.idempotence": False,
            "linger.ms": 5,
            "message.timeout.ms": 120000,
            "log_level": 4,
        }
    )
    for i in range(count):
        while True:
            try:
                producer.produce(topic, key=str(i).encode(), value=value(i), on_delivery=on_delivery)
                break
            except BufferError:
                producer.poll(0.05)
        if i % 200 == 199:
            producer.poll(0)
            time.sleep(0.05)
    remaining = producer.flush(180)
    if remaining:
        print("%d records still queued after flush" % remaining, file=sys.stderr, flush=True)
    print("RESULT " + json.dumps({"acked": acked, "failed": failed[0]}), flush=True)


if __name__ == "__main__":
    main()
