//! What the application hands the producer, and what it gets back.

use std::sync::Arc;

use bytes::Bytes;

use crate::{RecordHeader, TraceContext};

/// A record to produce. The producer takes it by value and keeps its [`Bytes`] alive,
/// unchanged, until the record's outcome is final; the outcome hands it back
/// ([`RecordMetadata::into_record`], [`ProduceError::into_record`](super::ProduceError::into_record)).
///
/// ```
/// use baton_kafka::ProducerRecord;
///
/// let record = ProducerRecord::new("orders")
///     .key("customer-7")
///     .value("{\"total\": 12}")
///     .header("trace-id", "abc");
/// assert_eq!(record.partition, None);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ProducerRecord {
    /// The topic to produce to.
    pub topic: String,
    /// An explicit partition; `None` lets the producer's partitioner choose.
    pub partition: Option<i32>,
    /// The key (`None` is Kafka's null key). Keyed records go to the partition the
    /// key hashes to.
    pub key: Option<Bytes>,
    /// The value (`None` is a null value, a tombstone on compacted topics).
    pub value: Option<Bytes>,
    /// Headers, in order; duplicate keys are allowed.
    pub headers: Vec<RecordHeader>,
    /// Create time in ms since the epoch; `None` takes the time of `send`.
    pub timestamp: Option<i64>,
}

impl ProducerRecord {
    /// A record for `topic` with null key and value and no headers.
    pub fn new(topic: impl Into<String>) -> Self {
        ProducerRecord {
            topic: topic.into(),
            partition: None,
            key: None,
            value: None,
            headers: Vec::new(),
            timestamp: None,
        }
    }

    /// Sets the key.
    pub fn key(mut self, key: impl Into<Bytes>) -> Self {
        self.key = Some(key.into());
        self
    }

    /// Sets the value.
    pub fn value(mut self, value: impl Into<Bytes>) -> Self {
        self.value = Some(value.into());
        self
    }

    /// Appends a header.
    pub fn header(mut self, key: impl Into<String>, value: impl Into<Bytes>) -> Self {
        self.headers
            .push(RecordHeader::new(key, Some(value.into())));
        self
    }

    /// Appends a header with a null value.
    pub fn null_header(mut self, key: impl Into<String>) -> Self {
        self.headers.push(RecordHeader::new(key, None));
        self
    }

    /// Adds `ctx` as the record's W3C `traceparent` header, unless the record
    /// has one already (which is kept); a consumer reads it back with
    /// [`ConsumerRecord::trace_context`](crate::ConsumerRecord::trace_context).
    pub fn trace_context(mut self, ctx: &TraceContext) -> Self {
        crate::trace_context::inject(&mut self.headers, ctx);
        self
    }

    /// Sends the record to this partition, bypassing the partitioner.
    pub fn partition(mut self, partition: i32) -> Self {
        self.partition = Some(partition);
        self
    }

    /// Sets the create time (ms since the epoch).
    pub fn timestamp(mut self, timestamp_ms: i64) -> Self {
        self.timestamp = Some(timestamp_ms);
        self
    }
}

/// Where a delivered record landed. It also hands the record back: the producer
/// held the record until this outcome, and returns it here.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct RecordMetadata {
    /// The topic (shared with the producer's other records of the topic, so
    /// reporting it costs no allocation per record).
    pub topic: Arc<str>,
    /// The partition the record was written to.
    pub partition: i32,
    /// The record's offset; -1 with `acks = 0`, where the broker does not answer.
    pub offset: i64,
    /// The record's timestamp: the broker's append time if the topic uses
    /// LogAppendTime, else the create time.
    pub timestamp: i64,
    pub(crate) record: ProducerRecord,
}

impl RecordMetadata {
    /// The delivered record.
    pub fn record(&self) -> &ProducerRecord {
        &self.record
    }

    /// Takes the delivered record back (for example to reuse its buffers: once the
    /// application holds the last reference, `Bytes::try_into_mut` succeeds).
    pub fn into_record(self) -> ProducerRecord {
        self.record
    }
}
