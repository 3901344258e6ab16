//! Seeded records and the files exchanged with the Go program (the format is
//! described at the top of `tests/interop/go/records.go`).

use baton_protocol::testing::Rng;

/// Header names drawn from: repeats in one record, an empty and a non-ASCII name.
const HEADER_NAMES: [&str; 5] = ["trace-id", "content-type", "ключ", "", "dup"];

/// One record as produced and as consumed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rec {
    /// Partition (the one to produce to, or the one it was consumed from).
    pub partition: i32,
    /// Offset it was consumed at (-1 in the records file).
    pub offset: i64,
    /// Key: the record's id as 8 big-endian bytes, then random bytes.
    pub key: Vec<u8>,
    /// Value; the Go clients do not all tell an empty value from a null one,
    /// so the records never have a null value and a consumed null reads as empty.
    pub value: Vec<u8>,
    /// Headers in order (duplicate names allowed); values never null.
    pub headers: Vec<(String, Vec<u8>)>,
}

impl Rec {
    /// The id in the key, if the key has one.
    pub fn id(&self) -> Option<u64> {
        Some(u64::from_be_bytes(self.key.get(..8)?.try_into().ok()?))
    }

    /// A CRC-32C over key, value and headers, for the history checker.
    pub fn checksum(&self) -> u32 {
        let mut buf = Vec::new();
        encode_body(&mut buf, self);
        crc32c::crc32c(&buf)
    }
}

/// `count` records for `partitions` partitions drawn from `seed`. With `big`, about
/// 2 % of the values are 100 KiB.
pub fn generate(seed: u64, count: u64, partitions: u32, big: bool) -> Vec<Rec> {
    let mut rng = Rng::new(seed);
    (0..count)
        .map(|id| {
            let mut key = id.to_be_bytes().to_vec();
            let extra = rng.below(24) as usize;
            key.extend(rng.bytes(extra));
            let value = match rng.below(100) {
                0..=4 => Vec::new(),
                5..=6 if big => rng.bytes(100 * 1024),
                _ => {
                    let n = 1 + rng.below(512) as usize;
                    rng.bytes(n)
                }
            };
            let headers = (0..rng.below(4))
                .map(|_| {
                    let name = HEADER_NAMES[rng.below(HEADER_NAMES.len() as u64) as usize];
                    let n = rng.below(32) as usize;
                    (name.to_string(), rng.bytes(n))
                })
                .collect();
            Rec {
                partition: rng.below(u64::from(partitions)) as i32,
                offset: -1,
                key,
                value,
                headers,
            }
        })
        .collect()
}

fn blob(out: &mut Vec<u8>, b: &[u8]) {
    out.extend_from_slice(&(b.len() as u32).to_be_bytes());
    out.extend_from_slice(b);
}

fn encode_body(out: &mut Vec<u8>, r: &Rec) {
    blob(out, &r.key);
    blob(out, &r.value);
    out.extend_from_slice(&(r.headers.len() as u32).to_be_bytes());
    for (name, value) in &r.headers {
        blob(out, name.as_bytes());
        blob(out, value);
    }
}

/// The records file the Go producers read.
pub fn encode_records(records: &[Rec]) -> Vec<u8> {
    let mut out = (records.len() as u32).to_be_bytes().to_vec();
    for r in records {
        out.extend_from_slice(&(r.partition as u32).to_be_bytes());
        encode_body(&mut out, r);
    }
    out
}

/// A cursor over a file the Go program wrote.
struct Cursor<'a>(&'a [u8]);

impl Cursor<'_> {
    fn take(&mut self, n: usize) -> &[u8] {
        assert!(self.0.len() >= n, "file from the Go program is truncated");
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        head
    }
    fn u8(&mut self) -> u8 {
        self.take(1)[0]
    }
    fn u16(&mut self) -> u16 {
        u16::from_be_bytes(self.take(2).try_into().unwrap())
    }
    fn u32(&mut self) -> u32 {
        u32::from_be_bytes(self.take(4).try_into().unwrap())
    }
    fn i64(&mut self) -> i64 {
        i64::from_be_bytes(self.take(8).try_into().unwrap())
    }
    /// A blob; null reads as empty (see [`Rec::value`]).
    fn blob(&mut self) -> Vec<u8> {
        let len = self.u32() as i32;
        if len < 0 {
            return Vec::new();
        }
        self.take(len as usize).to_vec()
    }
}

/// The consumed file: every record a consumer received, in delivery order.
pub fn decode_consumed(bytes: &[u8]) -> Vec<Rec> {
    let mut c = Cursor(bytes);
    let mut out = Vec::new();
    while !c.0.is_empty() {
        let partition = c.u32() as i32;
        let offset = c.i64();
        let key = c.blob();
        let value = c.blob();
        let headers = (0..c.u32())
            .map(|_| {
                let n = c.u32() as usize;
                let name = String::from_utf8_lossy(c.take(n)).into_owned();
                (name, c.blob())
            })
            .collect();
        out.push(Rec {
            partition,
            offset,
            key,
            value,
            headers,
        });
    }
    out
}

/// One produce outcome as the Go program reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    /// The client acknowledged the record.
    pub acked: bool,
    /// Partition.
    pub partition: i32,
    /// Offset, or -1 when the client does not report it (kafka-go) or failed.
    pub offset: i64,
    /// The client's error text, empty when acknowledged.
    pub error: String,
}

/// The outcomes file: one outcome per record sent, in records-file order.
pub fn decode_outcomes(bytes: &[u8]) -> Vec<Outcome> {
    let mut c = Cursor(bytes);
    let mut out = Vec::new();
    while !c.0.is_empty() {
        let status = c.u8();
        let partition = c.u32() as i32;
        let offset = c.i64();
        let n = c.u16() as usize;
        let error = String::from_utf8_lossy(c.take(n)).into_owned();
        out.push(Outcome {
            acked: status == 0,
            partition,
            offset,
            error,
        });
    }
    out
}
