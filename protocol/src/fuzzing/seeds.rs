//! Valid inputs for each fuzz target's starting corpus: every request and response
//! type in every version (seeded [`Random`] values), record batches in every codec,
//! and request sequences a broker can follow (create a topic, produce to it in each
//! codec, fetch it back).

use bytes::{BufMut, Bytes, BytesMut};

use super::{api_keys, visit_request, RequestVisitor};
use crate::envelope;
use crate::messages::*;
use crate::record::{Compression, RecordBatchBuilder, RecordHeader};
use crate::testing::{Random, Rng};
use crate::{Message, Request};

/// Values generated per message type and version.
const PER_VERSION: usize = 2;

/// Encodes `PER_VERSION` random values of request type `R` (and its response) in
/// every version, in the layout of each target.
struct Encode<'a> {
    rng: &'a mut Rng,
    kind: Target,
}

#[derive(Debug, Clone, Copy)]
enum Target {
    Request,
    Response,
    Roundtrip,
}

impl RequestVisitor for Encode<'_> {
    type Output = Vec<Vec<u8>>;
    fn visit<R>(self) -> Vec<Vec<u8>>
    where
        R: Request + Random,
        R::Response: Random,
    {
        let mut out = Vec::new();
        for version in R::MIN_VERSION..=R::MAX_VERSION {
            for i in 0..PER_VERSION {
                let correlation_id = i as i32 + 1;
                match self.kind {
                    Target::Request => {
                        let msg = random::<R>(self.rng, version);
                        let frame =
                            envelope::encode_request(correlation_id, Some("fuzz"), &msg, version)
                                .expect("a random request encodes");
                        out.push(frame[4..].to_vec());
                    }
                    Target::Response => {
                        let msg = random::<R::Response>(self.rng, version);
                        let frame = envelope::encode_response::<R>(correlation_id, version, &msg)
                            .expect("a random response encodes");
                        let mut input = selector(R::API_KEY, version);
                        input.extend_from_slice(&frame[4..]);
                        out.push(input);
                    }
                    Target::Roundtrip => {
                        let response = i % 2 == 1;
                        let mut input = vec![u8::from(response)];
                        input.extend_from_slice(&selector(R::API_KEY, version));
                        let mut body = BytesMut::new();
                        if response {
                            random::<R::Response>(self.rng, version).encode_body(&mut body, version)
                        } else {
                            random::<R>(self.rng, version).encode_body(&mut body, version)
                        }
                        .expect("a random message encodes");
                        input.extend_from_slice(&body);
                        out.push(input);
                    }
                }
            }
        }
        out
    }
}

/// A random `M` in `version`.
fn random<M: Random>(rng: &mut Rng, version: i16) -> M {
    M::random(rng, version)
}

/// The API key and version prefix of the response and roundtrip inputs.
fn selector(api_key: i16, version: i16) -> Vec<u8> {
    let mut out = Vec::with_capacity(4);
    out.put_i16(api_key);
    out.put_i16(version);
    out
}

fn every_api(seed: u64, kind: Target) -> Vec<Vec<u8>> {
    let mut rng = Rng::new(seed);
    let mut out = Vec::new();
    for key in api_keys() {
        let encode = Encode {
            rng: &mut rng,
            kind,
        };
        out.extend(visit_request(key, encode).unwrap_or_default());
    }
    out
}

/// Request frames (after the size prefix) of every request type and version.
pub fn requests(seed: u64) -> Vec<Vec<u8>> {
    every_api(seed, Target::Request)
}

/// Response inputs (API key, version, frame after the size prefix) of every
/// response type and version.
pub fn responses(seed: u64) -> Vec<Vec<u8>> {
    every_api(seed, Target::Response)
}

/// Roundtrip inputs (kind, API key, version, body) of every message type and
/// version.
pub fn roundtrips(seed: u64) -> Vec<Vec<u8>> {
    every_api(seed, Target::Roundtrip)
}

/// A batch of a few records with keys, values and headers in `codec`.
pub fn batch(rng: &mut Rng, codec: Compression, base_offset: i64) -> Bytes {
    let mut builder = RecordBatchBuilder::new(1_700_000_000_000)
        .compression(codec)
        .base_offset(base_offset);
    let n = 1 + rng.below(5);
    for i in 0..n {
        let (key_len, value_len, header_len) = (rng.below(8), rng.below(64), rng.below(4));
        let key = rng.bytes(key_len as usize);
        let value = rng.bytes(value_len as usize);
        let headers = [RecordHeader::new(
            "h",
            Some(Bytes::from(rng.bytes(header_len as usize))),
        )];
        let headers: &[RecordHeader] = if i % 2 == 0 { &headers } else { &[] };
        builder.push(
            1_700_000_000_000 + i as i64,
            Some(&key),
            Some(&value),
            headers,
        );
    }
    builder.finish()
}

/// Records blobs: one batch per codec, each alone and all of them together, an
/// idempotent and a transactional batch, and a commit marker.
pub fn record_batches(seed: u64) -> Vec<Vec<u8>> {
    let mut rng = Rng::new(seed);
    let mut out = Vec::new();
    let mut all = Vec::new();
    for codec in Compression::ALL.into_iter().filter(|c| c.is_supported()) {
        let b = batch(&mut rng, codec, all.len() as i64);
        all.extend_from_slice(&b);
        out.push(b.to_vec());
    }
    out.push(all);
    let mut b = RecordBatchBuilder::new(0)
        .producer(7, 1, 0)
        .transactional(true)
        .compression(Compression::Lz4);
    b.push(0, Some(b"k"), Some(b"v"), &[]);
    out.push(b.finish().to_vec());
    let marker = crate::record::control::control_batch(
        7,
        1,
        crate::record::control::EndTxnMarker {
            commit: true,
            coordinator_epoch: 3,
        },
        0,
    );
    out.push(marker.to_vec());
    out
}

/// Appends `req` in `version` as one size-prefixed frame.
fn frame<R: Request>(out: &mut Vec<u8>, correlation_id: i32, req: &R, version: i16) {
    let f = envelope::encode_request(correlation_id, Some("fuzz"), req, version)
        .expect("a seed request encodes");
    out.extend_from_slice(&f);
}

/// Size-prefixed request frames for the broker: one random request of every type
/// and version per input, and sequences that create a topic, produce to it in
/// each codec and read it back.
pub fn broker_frames(seed: u64) -> Vec<Vec<u8>> {
    let mut out: Vec<Vec<u8>> = requests(seed)
        .into_iter()
        .map(|f| {
            let mut input = (f.len() as i32).to_be_bytes().to_vec();
            input.extend_from_slice(&f);
            input
        })
        .collect();
    let mut rng = Rng::new(seed);
    for codec in Compression::ALL.into_iter().filter(|c| c.is_supported()) {
        let mut input = Vec::new();
        frame(&mut input, 1, &ApiVersionsRequest::default(), 3);
        let create = CreateTopicsRequest {
            topics: vec![CreatableTopic {
                name: "t".into(),
                num_partitions: 2,
                replication_factor: 1,
                ..Default::default()
            }],
            ..Default::default()
        };
        frame(&mut input, 2, &create, 7);
        let produce = ProduceRequest {
            acks: 1,
            timeout_ms: 1000,
            topic_data: vec![TopicProduceData {
                name: "t".into(),
                partition_data: vec![PartitionProduceData {
                    index: 0,
                    records: Some(batch(&mut rng, codec, 0).into()),
                }],
            }],
            ..Default::default()
        };
        frame(&mut input, 3, &produce, 9);
        let fetch = FetchRequest {
            max_wait_ms: 100,
            min_bytes: 1,
            topics: vec![FetchTopic {
                topic: "t".into(),
                partitions: vec![FetchPartition {
                    partition: 0,
                    partition_max_bytes: 1 << 20,
                    ..Default::default()
                }],
                ..Default::default()
            }],
            ..Default::default()
        };
        frame(&mut input, 4, &fetch, 12);
        frame(&mut input, 5, &MetadataRequest::default(), 12);
        out.push(input);
    }
    out
}
