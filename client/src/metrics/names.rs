//! The metric names, with their kind, labels and meaning. Every metric also has
//! the label `client_id`.

/// Counter: records delivered (acknowledged by the leader, or written with
/// `acks=0`). Java: `producer-metrics` `record-send-total`.
pub const PRODUCER_RECORD_SEND_TOTAL: &str = "kafka.producer.record_send_total";
/// Counter: records whose delivery failed for good. Java: `record-error-total`.
pub const PRODUCER_RECORD_ERROR_TOTAL: &str = "kafka.producer.record_error_total";
/// Counter, label `error` (the Kafka error name, `NETWORK_EXCEPTION` for a broken
/// connection): records of batches sent again after a retriable failure. Java:
/// `record-retry-total` (without the error label).
pub const PRODUCER_RECORD_RETRY_TOTAL: &str = "kafka.producer.record_retry_total";
/// Counter, label `node_id`: Produce requests sent. Java: `request-total`.
pub const PRODUCER_REQUEST_TOTAL: &str = "kafka.producer.request_total";
/// Histogram (ms), label `node_id`: Produce request latency, from the request
/// being queued on the connection to its response. Java: `request-latency-avg`/`-max`.
pub const PRODUCER_REQUEST_LATENCY_MS: &str = "kafka.producer.request_latency_ms";
/// Gauge, label `node_id`: Produce requests awaiting a response. Java:
/// `requests-in-flight`.
pub const PRODUCER_REQUESTS_IN_FLIGHT: &str = "kafka.producer.requests_in_flight";
/// Histogram (bytes): encoded size of each batch sent. Java: `batch-size-avg`/`-max`.
pub const PRODUCER_BATCH_SIZE_BYTES: &str = "kafka.producer.batch_size_bytes";
/// Histogram: records per Produce request. Java: `records-per-request-avg`.
pub const PRODUCER_RECORDS_PER_REQUEST: &str = "kafka.producer.records_per_request";
/// Histogram: compressed size / uncompressed size of each batch (1 without
/// compression). Java: `compression-rate-avg`.
pub const PRODUCER_COMPRESSION_RATIO: &str = "kafka.producer.compression_ratio";
/// Gauge (bytes): buffer memory not held by undelivered records. Java:
/// `buffer-available-bytes`.
pub const PRODUCER_BUFFER_AVAILABLE_BYTES: &str = "kafka.producer.buffer_available_bytes";
/// Gauge: `send` calls waiting for buffer memory. Java: `waiting-threads`.
pub const PRODUCER_WAITING_SENDS: &str = "kafka.producer.waiting_sends";

/// Counter: records returned to the application. Java:
/// `consumer-fetch-manager-metrics` `records-consumed-total`.
pub const CONSUMER_RECORDS_CONSUMED_TOTAL: &str = "kafka.consumer.records_consumed_total";
/// Histogram (ms), label `node_id`: Fetch request latency (includes the broker's
/// long-poll wait). Java: `fetch-latency-avg`/`-max`.
pub const CONSUMER_FETCH_LATENCY_MS: &str = "kafka.consumer.fetch_latency_ms";
/// Gauge, labels `topic`, `partition`: the partition's high watermark minus the
/// consumer's fetch position, set at each fetch response. Java: `records-lag`.
pub const CONSUMER_RECORDS_LAG: &str = "kafka.consumer.records_lag";

/// Counter, label `group_id`: rebalances this member completed (a JoinGroup and
/// SyncGroup round, or a KIP-848 assignment change reconciled). Java:
/// `consumer-coordinator-metrics` `rebalance-total`.
pub const GROUP_REBALANCE_TOTAL: &str = "kafka.consumer.group.rebalance_total";
/// Histogram (ms), label `group_id`: how long each of those rebalances took.
/// Java: `rebalance-latency-avg`/`-max`.
pub const GROUP_REBALANCE_LATENCY_MS: &str = "kafka.consumer.group.rebalance_latency_ms";
/// Histogram (ms), label `group_id`: offset commit latency (retries included).
/// Java: `commit-latency-avg`/`-max`.
pub const GROUP_COMMIT_LATENCY_MS: &str = "kafka.consumer.group.commit_latency_ms";

/// Counter: connections opened (TCP, versions negotiated, authenticated). Java:
/// `connection-creation-total`.
pub const CLIENT_CONNECTION_CREATION_TOTAL: &str = "kafka.client.connection_creation_total";
/// Counter: connections closed (broken, or dropped after use). Java:
/// `connection-close-total`.
pub const CLIENT_CONNECTION_CLOSE_TOTAL: &str = "kafka.client.connection_close_total";
/// Counter: connection attempts that failed SASL authentication. Java:
/// `failed-authentication-total`.
pub const CLIENT_AUTHENTICATION_FAILURE_TOTAL: &str = "kafka.client.authentication_failure_total";
