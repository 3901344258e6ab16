"""Deterministic record generator and checker shared by the interop scripts.

Every producer script sends exactly the records that `generate(seed, count,
partitions)` returns, to the partition each record names, in order. Every
consumer script regenerates the same list from the same seed and compares
what it read back, field by field, per partition.

The mix covers what the wire format has to get right: null keys and values,
0-byte keys and values, 100 KiB values, several headers per record (with
repeated and non-ASCII names and empty values), explicit create-time
timestamps, and repetitive values so that compressed batches shrink.
"""

import json
import os
import random
import struct
import sys
import threading
import time

#: Size of the large values, in bytes (100 KiB).
BIG_VALUE = 100 * 1024

#: Header names drawn from; repeats within one record are allowed by Kafka.
HEADER_NAMES = ["trace-id", "content-type", "ключ", "", "x" * 40, "emoji-\u2603"]


#: Words repeated to make compressible values.
WORDS = ["baton ", "kafka record ", "0123456789", "\u2603 snow ", "{\"k\": 1} "]


class Record:
    """One record as produced and as expected back."""

    __slots__ = ("partition", "key", "value", "headers", "timestamp_ms")

    def __init__(self, partition, key, value, headers, timestamp_ms):
        self.partition = partition
        self.key = key
        self.value = value
        self.headers = headers
        self.timestamp_ms = timestamp_ms


def generate(seed, count, partitions):
    """Returns `count` records drawn from a generator seeded with `seed`."""
    rng = random.Random(seed)
    base_ts = 1_600_000_000_000 + rng.randrange(10**11)
    records = []
    for i in range(count):
        partition = rng.randrange(partitions)

        roll = rng.random()
        if roll < 0.10:
            value = None
        elif roll < 0.15:
            value = b""
        elif roll < 0.17:
            value = rng.randbytes(BIG_VALUE)
        elif roll < 0.50:
            # Repetitive text, so that compressed batches really shrink.
            value = (rng.choice(WORDS) * rng.randrange(1, 400)).encode()
        else:
            value = rng.randbytes(rng.randrange(1, 2048))

        roll = rng.random()
        if roll < 0.10 and value is not None:
            # kafka-python refuses a record whose key and value are both null.
            key = None
        elif roll < 0.15:
            key = b""
        else:
            key = rng.randbytes(rng.randrange(1, 64))

        headers = []
        if rng.random() < 0.6:
            for _ in range(rng.randrange(1, 5)):
                name = rng.choice(HEADER_NAMES)
                hvalue = b"" if rng.random() < 0.2 else rng.randbytes(rng.randrange(1, 64))
                headers.append((name, hvalue))

        records.append(Record(partition, key, value, headers, base_ts + i))
    # Guarantee the edge cases appear even for small counts.
    # kafka-python refuses a record whose key and value are both null.
    if count >= 4:
        records[0].value = None
        if records[0].key is None:
            records[0].key = b"null value, non-null key"
        records[1].value = b""
        records[1].key = b""
        records[2].value = rng.randbytes(BIG_VALUE)
        records[3].key = None
        if records[3].value is None:
            records[3].value = b"null key, non-null value"
        records[3].headers = [("", b""), ("dup", b"1"), ("dup", b"2")]
    return records


def by_partition(records, partitions):
    """Splits records into one list per partition, keeping their order."""
    out = [[] for _ in range(partitions)]
    for r in records:
        out[r.partition].append(r)
    return out


def short(b):
    """A short printable description of a bytes value for error messages."""
    if b is None:
        return "null"
    if len(b) <= 16:
        return "%d bytes %s" % (len(b), b.hex())
    return "%d bytes %s..." % (len(b), b[:16].hex())


def describe_headers(headers):
    return "[" + ", ".join("%r=%s" % (k, short(v)) for k, v in headers) + "]"


class Checker:
    """Compares consumed records with the expected ones, per partition."""

    def __init__(self, seed, count, partitions):
        self.expected = by_partition(generate(seed, count, partitions), partitions)
        self.received = [0] * partitions
        self.mismatches = []
        self.unexpected = 0

    def done(self):
        return all(self.received[p] >= len(e) for p, e in enumerate(self.expected))

    def check(self, partition, offset, key, value, headers, timestamp_ms):
        """Checks one consumed record. Headers must be a list of (str, bytes)."""
        expected = self.expected[partition]
        index = self.received[partition]
        self.received[partition] += 1
        if index >= len(expected):
            self.unexpected += 1
            self.fail("partition %d: unexpected extra record at offset %d" % (partition, offset))
            return
        want = expected[index]
        where = "partition %d offset %d (record #%d of the partition)" % (partition, offset, index)
        if offset != index:
            self.fail("%s: offset %d, expected %d (topic is fresh, offsets start at 0)" % (where, offset, index))
        if key != want.key:
            self.fail("%s: key %s, expected %s" % (where, short(key), short(want.key)))
        if value != want.value:
            self.fail("%s: value %s, expected %s" % (where, short(value), short(want.value)))
        if headers != want.headers:
            self.fail("%s: headers %s, expected %s" % (where, describe_headers(headers), describe_headers(want.headers)))
        if timestamp_ms is not None and timestamp_ms != want.timestamp_ms:
            self.fail("%s: timestamp %d, expected %d" % (where, timestamp_ms, want.timestamp_ms))

    def fail(self, message):
        if len(self.mismatches) < 20:
            self.mismatches.append(message)
        else:
            self.mismatches[-1] = "... (more mismatches omitted)"

    def finish(self, client, extra=None):
        """Prints the result line and returns the process exit code."""
        ok = self.done() and not self.mismatches and self.unexpected == 0
        result = {
            "client": client,
            "ok": ok,
            "consumed": sum(self.received),
            "per_partition": self.received,
            "expected_per_partition": [len(e) for e in self.expected],
        }
        if extra:
            result.update(extra)
        for m in self.mismatches:
            print("MISMATCH " + m, file=sys.stderr)
        if not self.done():
            print(
                "INCOMPLETE consumed %s of %s per partition"
                % (self.received, [len(e) for e in self.expected]),
                file=sys.stderr,
            )
        emit(result)
        return 0 if ok else 1


def emit(result):
    """Prints one result line that the Rust test parses."""
    print("RESULT " + json.dumps(result, sort_keys=True), flush=True)


class Security:
    """How to connect, from the environment the Rust tests set
    (`baton_testkit::security::ClientSecurity::env`): `INTEROP_SECURITY_PROTOCOL`
    (SASL_SSL), `INTEROP_SASL_MECHANISM` (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512),
    `INTEROP_SASL_USERNAME`, `INTEROP_SASL_PASSWORD` and `INTEROP_SSL_CA` (the
    CA's PEM file; the broker's host name is verified against its certificate)."""

    def __init__(self, protocol, mechanism, username, password, ca):
        self.protocol = protocol
        self.mechanism = mechanism
        self.username = username
        self.password = password
        self.ca = ca

    def __repr__(self):
        # Never the password.
        return "Security(%s, %s, user %s)" % (self.protocol, self.mechanism, self.username)


def security():
    """The `Security` the environment names, or None for plaintext."""
    protocol = os.environ.get("INTEROP_SECURITY_PROTOCOL")
    if not protocol or protocol == "PLAINTEXT":
        return None
    return Security(
        protocol,
        os.environ.get("INTEROP_SASL_MECHANISM"),
        os.environ.get("INTEROP_SASL_USERNAME"),
        os.environ.get("INTEROP_SASL_PASSWORD"),
        os.environ.get("INTEROP_SSL_CA"),
    )


class Deadline:
    """A wall-clock deadline for loops that wait on the broker."""

    def __init__(self, seconds):
        self.end = time.monotonic() + seconds

    def expired(self):
        return time.monotonic() >= self.end


# ---------------------------------------------------------------------------
# The generated records for producers written in other languages.


def dump(seed, count, partitions, path):
    """Writes `generate(seed, count, partitions)` to `path` for a producer that
    is not written in Python (the Rust tests produce them with Baton).

    Layout, big-endian: u32 record count, then per record: u32 partition,
    i64 timestamp, key and value each as i32 length (-1 for null) and bytes,
    u32 header count, and per header a u32 name length, the UTF-8 name, an
    i32 value length (-1 for null) and the value bytes.
    """
    out = [struct.pack(">I", count)]

    def blob(b):
        if b is None:
            out.append(struct.pack(">i", -1))
        else:
            out.append(struct.pack(">i", len(b)))
            out.append(b)

    for r in generate(seed, count, partitions):
        out.append(struct.pack(">Iq", r.partition, r.timestamp_ms))
        blob(r.key)
        blob(r.value)
        out.append(struct.pack(">I", len(r.headers)))
        for name, value in r.headers:
            encoded = name.encode()
            out.append(struct.pack(">I", len(encoded)))
            out.append(encoded)
            blob(value)
    with open(path, "wb") as f:
        f.write(b"".join(out))


# ---------------------------------------------------------------------------
# Group consumer tests: numbered records and the member's event log.


def numbered_value(partition, offset):
    """The value of the record at `offset` of `partition` in the group tests,
    whose topics are written only by `produce-numbered`."""
    return b"%d:%d" % (partition, offset)


def numbered_key(partition, offset):
    """The key that goes with `numbered_value`."""
    return b"k%d-%d" % (partition, offset)


def stdin_closed():
    """An event set once stdin reaches end of file: the Rust test stops a
    group member by closing the member's stdin."""
    closed = threading.Event()

    def watch():
        try:
            sys.stdin.read()
        finally:
            closed.set()

    threading.Thread(target=watch, daemon=True).start()
    return closed


class MemberLog:
    """What a group member prints on stdout, one event a line, for the Rust
    test to follow while the member runs:

    - `ASSIGNED p,p,...` / `REVOKED p,p,...` on rebalances,
    - `R p o` for every record consumed (after its content was checked),
    - `C p n` when a commit of next offset `n` for partition `p` succeeded,
    - `CF reason` when a commit failed (its records form an uncommitted tail).
    """

    def __init__(self):
        self.consumed = 0
        self.mismatches = []
        self.commit_failures = 0

    def line(self, text):
        print(text, flush=True)

    def assigned(self, partitions):
        self.line("ASSIGNED " + ",".join(str(p) for p in sorted(partitions)))

    def revoked(self, partitions):
        self.line("REVOKED " + ",".join(str(p) for p in sorted(partitions)))

    def record(self, partition, offset, key, value):
        want_key = numbered_key(partition, offset)
        want_value = numbered_value(partition, offset)
        if key != want_key or value != want_value:
            self.fail(
                "partition %d offset %d: key %s value %s, expected key %s value %s"
                % (partition, offset, short(key), short(value), short(want_key), short(want_value))
            )
        self.consumed += 1
        self.line("R %d %d" % (partition, offset))

    def committed(self, partition, next_offset):
        self.line("C %d %d" % (partition, next_offset))

    def commit_failed(self, reason):
        self.commit_failures += 1
        self.line("CF %s" % (str(reason).replace("\n", " "),))

    def fail(self, message):
        print("MISMATCH " + message, file=sys.stderr, flush=True)
        if len(self.mismatches) < 20:
            self.mismatches.append(message)

    def finish(self, client, name):
        ok = not self.mismatches
        emit(
            {
                "client": client,
                "member": name,
                "ok": ok,
                "consumed": self.consumed,
                "commit_failures": self.commit_failures,
            }
        )
        return 0 if ok else 1


def keyed_key(seed, i):
    """Key number `i` of the partitioner test: lengths vary so that murmur2's
    1-3 trailing bytes are all exercised. The Rust test builds the same keys."""
    return ("key-%d-%d%s" % (seed, i, "#" * (i % 4))).encode()


def main(argv):
    if len(argv) == 6 and argv[1] == "dump":
        dump(int(argv[2]), int(argv[3]), int(argv[4]), argv[5])
        return 0
    print("usage: records.py dump SEED COUNT PARTITIONS PATH", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
