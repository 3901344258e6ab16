//! Delivery handles and typed cancellation.
//!
//! Every way of giving up on a record has an outcome the type system names:
//!
//! | how the application gives up | what happens to the record |
//! |---|---|
//! | drops the [`DeliveryFuture`] | nothing changes: the producer still delivers it (or fails it for good), then drops the record and releases its buffers; the outcome is not observed |
//! | `tokio::time::timeout(d, &mut delivery)` or `select!` on `&mut delivery`, then [`DeliveryFuture::cancel`] | a [`CancelOutcome`]: [`NeverSent`](CancelOutcome::NeverSent) hands the record back, [`InFlight`](CancelOutcome::InFlight) keeps tracking it, or the final result |
//! | [`DeliveryFuture::until_cancelled`] with a [`CancellationToken`] | the same [`CancelOutcome`], when the token fires first |
//! | [`Producer::send_with_cancel`](super::Producer::send_with_cancel) with a token that fires before the record is accepted | [`ProduceError::Cancelled`] with the record: never accepted |
//!
//! A record is *never sent* while its batch is still in the accumulator (not yet
//! taken by the sender, never on the wire); cancelling then removes it, and it is
//! guaranteed never to be written. Once its batch has been taken for sending, the
//! outcome is unknown until the broker answers: the producer keeps the record,
//! keeps retrying it with its original sequence number (so idempotence still
//! deduplicates), and the [`InFlight`] handle resolves to the final result.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Weak};
use std::task::{Context, Poll};

use tokio::sync::oneshot;
use tokio::sync::oneshot::error::TryRecvError;
use tokio_util::sync::CancellationToken;

use super::{ProduceError, ProducerRecord, RecordMetadata, Shared};

type Outcome = Result<RecordMetadata, ProduceError>;
type OutcomeRx = oneshot::Receiver<Outcome>;

fn closed() -> ProduceError {
    ProduceError::Closed { record: None }
}

/// Resolves to a sent record's outcome: where it landed, or why it failed. Both hand
/// the record back.
///
/// `DeliveryFuture` is [`Unpin`], so it can be polled through `&mut` and still be
/// cancelled afterwards:
///
/// ```no_run
/// # async fn demo(producer: &baton::Producer) -> Result<(), Box<dyn std::error::Error>> {
/// use std::time::Duration;
/// use baton::{CancelOutcome, ProducerRecord};
///
/// let mut delivery = producer.send(ProducerRecord::new("events").value("hi")).await?;
/// match tokio::time::timeout(Duration::from_secs(2), &mut delivery).await {
///     Ok(result) => println!("final: {:?}", result.map(|m| m.offset)),
///     Err(_elapsed) => match delivery.cancel() {
///         // Guaranteed never written: safe to send again (or to reuse its buffers).
///         CancelOutcome::NeverSent(record) => drop(record),
///         // Outcome unknown: do not resend; the producer is still on it.
///         CancelOutcome::InFlight(in_flight) => println!("later: {:?}", in_flight.await.is_ok()),
///         CancelOutcome::Delivered(meta) => println!("landed at {}", meta.offset),
///         CancelOutcome::Failed(e) => println!("failed: {e}"),
///     },
/// }
/// # Ok(()) }
/// ```
///
/// # Cancel safety
///
/// Dropping a `DeliveryFuture` (or a future polling it, such as a
/// `tokio::time::timeout` or a losing `select!` branch) does not cancel the
/// delivery: the producer still sends the record, retries it until the delivery
/// timeout, and when the outcome is final drops the record (releasing its `Bytes`)
/// instead of handing it back. To give up on the record itself, call
/// [`DeliveryFuture::cancel`].
#[derive(Debug)]
pub struct DeliveryFuture {
    rx: OutcomeRx,
    shared: Weak<Shared>,
    topic: Arc<str>,
    partition: i32,
    record_id: u64,
}

/// What [`DeliveryFuture::cancel`] (or [`DeliveryFuture::until_cancelled`]) did.
#[derive(Debug)]
#[must_use = "a cancelled record is either handed back, still in flight or final"]
pub enum CancelOutcome {
    /// The record was removed from the producer before it reached the wire: it is
    /// guaranteed never to be written. Here it is, untouched; the producer holds no
    /// reference to its buffers any more.
    NeverSent(ProducerRecord),
    /// The record's batch was already taken for sending (it may be on the wire, in a
    /// retry, or written with its acknowledgement still on the way). The outcome is
    /// unknown: the producer keeps tracking the record, with its sequence number,
    /// until the outcome is final, and holds its buffers until then. Await the
    /// handle for that final result (or drop it to stop observing).
    InFlight(InFlight),
    /// The record was delivered before the cancellation.
    Delivered(RecordMetadata),
    /// The record had failed for good before the cancellation.
    Failed(ProduceError),
}

/// A record whose cancellation came too late to stop it: resolves to its final
/// outcome, exactly as its [`DeliveryFuture`] would have.
///
/// # Cancel safety
///
/// Dropping it stops observing only; the producer still delivers the record (or
/// fails it for good) and then releases it.
#[derive(Debug)]
pub struct InFlight {
    rx: OutcomeRx,
}

impl Future for InFlight {
    type Output = Result<RecordMetadata, ProduceError>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        Pin::new(&mut self.rx)
            .poll(cx)
            .map(|r| r.unwrap_or_else(|_| Err(closed())))
    }
}

impl DeliveryFuture {
    pub(crate) fn new(
        rx: OutcomeRx,
        shared: &Arc<Shared>,
        topic: Arc<str>,
        partition: i32,
        record_id: u64,
    ) -> Self {
        DeliveryFuture {
            rx,
            shared: Arc::downgrade(shared),
            topic,
            partition,
            record_id,
        }
    }

    /// The topic the record goes to.
    pub fn topic(&self) -> &str {
        &self.topic
    }

    /// The partition the record was assigned to.
    pub fn partition(&self) -> i32 {
        self.partition
    }

    /// Gives up on the record: removes it from the producer if it has not been
    /// taken for sending yet ([`CancelOutcome::NeverSent`]), or reports that it is
    /// in flight, delivered or failed. Never blocks on I/O.
    ///
    /// Called on a `DeliveryFuture` that already returned its outcome (polled to
    /// completion through `&mut`), it reports [`CancelOutcome::Failed`] with
    /// [`ProduceError::Closed`]: the outcome was handed out once, already.
    pub fn cancel(mut self) -> CancelOutcome {
        if let Some(outcome) = self.take_final() {
            return outcome;
        }
        if let Some(shared) = self.shared.upgrade() {
            let removed = shared
                .lock()
                .remove_unsent(&self.topic, self.partition, self.record_id);
            if let Some(pending) = removed {
                // Dropping the rest of `pending` releases its buffer memory.
                return CancelOutcome::NeverSent(pending.record);
            }
        }
        self.take_final()
            .unwrap_or(CancelOutcome::InFlight(InFlight { rx: self.rx }))
    }

    /// Waits for the record's outcome or for `token` to be cancelled, whichever
    /// comes first. If the token wins, the record is cancelled as by
    /// [`DeliveryFuture::cancel`]; if the outcome wins, it is returned as
    /// [`CancelOutcome::Delivered`] or [`CancelOutcome::Failed`].
    ///
    /// # Cancel safety
    ///
    /// Dropping this future drops the `DeliveryFuture` it owns, which does not
    /// cancel the record (see [`DeliveryFuture`]).
    pub async fn until_cancelled(mut self, token: &CancellationToken) -> CancelOutcome {
        tokio::select! {
            biased;
            result = &mut self.rx => match result {
                Ok(Ok(meta)) => CancelOutcome::Delivered(meta),
                Ok(Err(e)) => CancelOutcome::Failed(e),
                Err(_) => CancelOutcome::Failed(closed()),
            },
            () = token.cancelled() => self.cancel(),
        }
    }

    /// The outcome, if it is already final.
    fn take_final(&mut self) -> Option<CancelOutcome> {
        match self.rx.try_recv() {
            Ok(Ok(meta)) => Some(CancelOutcome::Delivered(meta)),
            Ok(Err(e)) => Some(CancelOutcome::Failed(e)),
            Err(TryRecvError::Empty) => None,
            Err(TryRecvError::Closed) => Some(CancelOutcome::Failed(closed())),
        }
    }
}

impl Future for DeliveryFuture {
    type Output = Result<RecordMetadata, ProduceError>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        Pin::new(&mut self.rx)
            .poll(cx)
            .map(|r| r.unwrap_or_else(|_| Err(closed())))
    }
}
