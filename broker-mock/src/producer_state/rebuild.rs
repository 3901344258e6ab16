//! Rebuilding a partition's producer state from its log.

use baton_protocol::record::RecordBatch;

use super::table::{ProducerLimits, ProducerStateTable};
use crate::error::LogError;
use crate::log::Log;

/// How many bytes of batches one read of the scan asks for.
const SCAN_CHUNK_BYTES: usize = 1 << 20;

/// Why the producer state could not be rebuilt.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RebuildError {
    /// The log could not be read.
    #[error("reading the log to rebuild producer state: {0}")]
    Log(#[from] LogError),
    /// A stored batch at `offset` has a damaged header.
    #[error("stored batch at offset {offset} cannot be parsed")]
    Corrupt {
        /// The offset the scan had reached.
        offset: i64,
    },
}

/// Scans every stored batch header from the log start to the log end, in offset
/// order, and applies it to a fresh table with `limits`: the state (producers, open
/// transactions, aborted-transactions index) the live table would have if it had
/// seen every append of the log as it stands now, with the high watermark at
/// `high_watermark` (completed transactions whose marker is at or past it stay
/// unstable; only those are kept). Control batches are decoded (one small record
/// each) for their transaction markers.
///
/// Reads the whole log (bodies included, a bounded chunk at a time) but parses only
/// headers; CRCs are not checked here (the log checks them when it opens and the
/// partition before serving). On `Err` the caller decides: the state covers an
/// unknown prefix of the log and must not be used to accept retries.
pub fn rebuild(
    log: &Log,
    limits: ProducerLimits,
    high_watermark: i64,
) -> Result<ProducerStateTable, RebuildError> {
    let mut table = ProducerStateTable::with_limits(limits);
    table.on_high_watermark(high_watermark);
    let end = log.log_end_offset();
    let mut at = log.log_start_offset();
    while at < end {
        let chunk = log.read(at, SCAN_CHUNK_BYTES)?;
        if chunk.is_empty() {
            break;
        }
        for bytes in chunk {
            let batch =
                RecordBatch::parse(bytes).map_err(|_| RebuildError::Corrupt { offset: at })?;
            let next = batch.next_offset();
            if next <= at {
                // Offsets must grow; a batch that does not move the scan is damage.
                return Err(RebuildError::Corrupt { offset: at });
            }
            table.record_stored(&batch);
            at = next;
        }
    }
    Ok(table)
}

/// [`rebuild`] for a partition that must open anyway: on failure the error is
/// logged and the state is empty. Safe in the sense that an empty state never lets
/// a retry of a batch past sequence 0 through: such a retry, and the producer's next
/// batch, are `OUT_OF_ORDER_SEQUENCE_NUMBER` (a producer the partition does not know
/// must start at sequence 0); only a retried first batch could be stored twice.
/// Open transactions are lost with it, so the last stable offset follows the high
/// watermark.
pub fn rebuild_or_empty(
    log: &Log,
    limits: ProducerLimits,
    high_watermark: i64,
) -> ProducerStateTable {
    match rebuild(log, limits, high_watermark) {
        Ok(table) => table,
        Err(e) => {
            tracing::error!(error = %e, "producer state not rebuilt; starting empty");
            let mut table = ProducerStateTable::with_limits(limits);
            table.on_high_watermark(high_watermark);
            table
        }
    }
}
