"""confluent-kafka (librdkafka) producer for the cluster rolling-restart test.

Usage:
    cluster_rdkafka_producer.py BOOTSTRAP TOPIC COUNT

Produces COUNT self-checking records (acks=all, idempotence off) at a steady pace
so that the test can restart nodes meanwhile, then prints one
`RESULT {"acked": [[id, partition, offset], ...], "failed": N}` line.

Values are `id=<10 digits>;pad=<id % 50 x>;sum=<FNV-1a 64 of the rest, 16 hex>`,
the same format as `tests/cluster_util/mod.rs`.
"""

import json
import sys
import time

from confluent_kafka import Producer


def fnv(data):
    h = 0xCBF29CE484222325
    for b in data:
        h ^= b
        h = (h * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return h


def value(i):
    body = ("id=%010d;pad=%s" % (i, "x" * (i % 50))).encode()
    return body + (";sum=%016x" % fnv(body)).encode()


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
