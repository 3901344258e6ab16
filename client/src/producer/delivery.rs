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
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::task::{Context, Poll, Waker};

use tokio_util::sync::CancellationToken;
use tracing::Span;

use super::pending::{Pending, RecordPool};
use super::{ProduceError, ProducerRecord, RecordMetadata, Shared};

type Outcome = Result<RecordMetadata, ProduceError>;

fn closed() -> ProduceError {
    ProduceError::Closed { record: None }
}

/// The outcomes of one batch's records, shared by the batch and the records'
/// [`DeliveryFuture`]s: the sender settles the batch once, and each future takes
/// its own record's outcome by slot (the record's index of arrival in the batch).
///
/// Invariants: a record's outcome is handed out at most once; the outcome of a
/// slot whose handle is gone is dropped (with its record) as soon as it is settled
/// or, if it already was, as soon as the handle goes.
pub(crate) struct Completion {
    shared: Weak<Shared>,
    /// Where the records' vector goes when the completion is dropped.
    pool: Arc<RecordPool>,
    topic: Arc<str>,
    partition: i32,
    batch_id: u64,
    state: Mutex<CompletionState>,
}

#[derive(Default)]
struct CompletionState {
    /// `None` until the batch is settled.
    settled: Option<Settled>,
    /// Slots whose handle was dropped before the batch was settled.
    abandoned: Vec<u32>,
    /// Wakers of futures waiting for the batch, by slot.
    wakers: Vec<Option<Waker>>,
    /// Per-record spans (`ProducerBuilder::record_spans`) by slot, ended when the
    /// batch is settled; empty when the producer makes none.
    spans: Vec<(u32, Span)>,
}

/// How a batch was settled.
enum Settled {
    /// Every record was written from `base_offset` (-1: unknown) on, in order; each
    /// record's [`RecordMetadata`] is made when it is handed out.
    Delivered {
        base_offset: i64,
        /// The broker's append time, -1 for create time.
        log_append_time: i64,
        /// The records, in slot order (slots of records taken out before the batch
        /// was sent are missing); `taken` once handed out or dropped.
        records: Vec<Pending>,
    },
    /// Each slot's outcome (`None`: handed out, dropped, or no record).
    Outcomes(Vec<Option<Outcome>>),
}

/// A record that was handed out (or dropped) already.
fn placeholder() -> ProducerRecord {
    ProducerRecord::new(String::new())
}

impl Settled {
    /// What a record span of `slot` records: the record's offset, or why it
    /// failed. Looks without taking.
    fn peek(&self, slot: u32) -> Result<i64, String> {
        match self {
            Settled::Outcomes(outcomes) => match outcomes.get(slot as usize) {
                Some(Some(Ok(meta))) => Ok(meta.offset),
                Some(Some(Err(e))) => Err(e.to_string()),
                _ => Err(closed().to_string()),
            },
            Settled::Delivered {
                base_offset,
                records,
                ..
            } => match records.binary_search_by_key(&slot, |p| p.slot) {
                Ok(i) if *base_offset >= 0 => Ok(base_offset + i as i64),
                Ok(_) => Ok(-1),
                Err(_) => Err(closed().to_string()),
            },
        }
    }

    /// Takes the outcome of `slot` out (`None` if there is none any more).
    fn take(&mut self, topic: &Arc<str>, partition: i32, slot: u32) -> Option<Outcome> {
        match self {
            Settled::Outcomes(outcomes) => outcomes.get_mut(slot as usize)?.take(),
            Settled::Delivered {
                base_offset,
                log_append_time,
                records,
            } => {
                // Slots are increasing; without cancellations, slot == index.
                let i = match records.get(slot as usize) {
                    Some(p) if p.slot == slot => slot as usize,
                    _ => records.binary_search_by_key(&slot, |p| p.slot).ok()?,
                };
                let p = &mut records[i];
                if p.taken {
                    return None;
                }
                p.taken = true;
                let record = std::mem::replace(&mut p.record, placeholder());
                Some(Ok(RecordMetadata {
                    topic: topic.clone(),
                    partition,
                    offset: if *base_offset >= 0 {
                        *base_offset + i as i64
                    } else {
                        -1
                    },
                    timestamp: if *log_append_time >= 0 {
                        *log_append_time
                    } else {
                        p.timestamp
                    },
                    record,
                }))
            }
        }
    }
}

impl Completion {
    pub(crate) fn new(
        shared: Weak<Shared>,
        pool: Arc<RecordPool>,
        topic: Arc<str>,
        partition: i32,
        batch_id: u64,
    ) -> Self {
        Completion {
            shared,
            pool,
            topic,
            partition,
            batch_id,
            state: Mutex::new(CompletionState::default()),
        }
    }

    fn lock(&self) -> MutexGuard<'_, CompletionState> {
        self.state.lock().expect("completion lock poisoned")
    }

    /// Publishes the batch's outcome and wakes the waiting futures; the records of
    /// abandoned slots are dropped. A second settlement is ignored.
    fn settle(&self, settled: Settled) {
        let (wakers, dropped, spans) = {
            let mut guard = self.lock();
            let st = &mut *guard;
            if st.settled.is_some() {
                return;
            }
            let settled = st.settled.insert(settled);
            let spans: Vec<_> = std::mem::take(&mut st.spans)
                .into_iter()
                .map(|(slot, span)| (span, settled.peek(slot)))
                .collect();
            let mut dropped = Vec::new();
            for slot in std::mem::take(&mut st.abandoned) {
                dropped.extend(settled.take(&self.topic, self.partition, slot));
            }
            (std::mem::take(&mut st.wakers), dropped, spans)
        };
        drop(dropped);
        for (span, outcome) in spans {
            end_span(&span, outcome);
        }
        for w in wakers.into_iter().flatten() {
            w.wake();
        }
    }

    /// Settles the batch as delivered: its records were written from
    /// `base_offset` (-1: unknown) on, with the broker's `log_append_time` (-1:
    /// create time).
    pub(crate) fn deliver(&self, records: Vec<Pending>, base_offset: i64, log_append_time: i64) {
        if let Some(shared) = self.shared.upgrade() {
            shared.meter.delivered(records.len());
        }
        self.settle(Settled::Delivered {
            base_offset,
            log_append_time,
            records,
        });
    }

    /// Settles the batch with each slot's outcome (`None` for slots that have no
    /// record any more).
    pub(crate) fn settle_each(&self, outcomes: Vec<Option<Outcome>>) {
        if let Some(shared) = self.shared.upgrade() {
            let failed = outcomes
                .iter()
                .filter(|o| matches!(o, Some(Err(_))))
                .count();
            let delivered = outcomes.iter().filter(|o| matches!(o, Some(Ok(_)))).count();
            shared.meter.delivered(delivered);
            shared.meter.failed(failed);
        }
        self.settle(Settled::Outcomes(outcomes));
    }

    /// Keeps `span`, the record span of `slot`, until the batch is settled (or
    /// ends it now if it is).
    fn add_span(&self, slot: u32, span: Span) {
        span.record("partition", self.partition);
        let mut st = self.lock();
        let outcome = match &st.settled {
            Some(settled) => settled.peek(slot),
            None => return st.spans.push((slot, span)),
        };
        drop(st);
        end_span(&span, outcome);
    }

    /// Ends the record span of `slot`, if there is one, with `error`.
    fn end_span_early(&self, slot: u32, error: &str) {
        let span = {
            let mut st = self.lock();
            let i = st.spans.iter().position(|(s, _)| *s == slot);
            i.map(|i| st.spans.swap_remove(i).1)
        };
        if let Some(span) = span {
            end_span(&span, Err(error.to_string()));
        }
    }

    /// Whether the batch is settled.
    pub(crate) fn is_settled(&self) -> bool {
        self.lock().settled.is_some()
    }

    /// The outcome of `slot` if the batch is settled (`Err(Closed)` if it was
    /// handed out already or never existed).
    fn take(&self, slot: u32) -> Option<Outcome> {
        let mut st = self.lock();
        let settled = st.settled.as_mut()?;
        Some(
            settled
                .take(&self.topic, self.partition, slot)
                .unwrap_or_else(|| Err(closed())),
        )
    }

    fn poll_slot(&self, slot: u32, cx: &mut Context<'_>) -> Poll<Outcome> {
        let mut st = self.lock();
        if let Some(settled) = st.settled.as_mut() {
            return Poll::Ready(
                settled
                    .take(&self.topic, self.partition, slot)
                    .unwrap_or_else(|| Err(closed())),
            );
        }
        let i = slot as usize;
        if st.wakers.len() <= i {
            st.wakers.resize_with(i + 1, || None);
        }
        match &mut st.wakers[i] {
            Some(w) if w.will_wake(cx.waker()) => {}
            w => *w = Some(cx.waker().clone()),
        }
        Poll::Pending
    }

    /// The handle of `slot` is gone: its outcome is dropped now, or at settlement.
    fn abandon(&self, slot: u32) {
        let dropped = {
            let mut st = self.lock();
            if let Some(w) = st.wakers.get_mut(slot as usize) {
                *w = None;
            }
            let st = &mut *st;
            match st.settled.as_mut() {
                Some(settled) => settled.take(&self.topic, self.partition, slot),
                None => {
                    st.abandoned.push(slot);
                    None
                }
            }
        };
        // The record (if any) is released here, outside the lock.
        drop(dropped);
    }
}

impl Drop for Completion {
    fn drop(&mut self) {
        let st = self.state.get_mut().unwrap_or_else(|e| e.into_inner());
        if let Some(Settled::Delivered { records, .. }) = st.settled.take() {
            self.pool.give(records);
        }
    }
}

/// Records a record's outcome on its span (which closes when dropped).
fn end_span(span: &Span, outcome: Result<i64, String>) {
    match outcome {
        Ok(offset) => span.record("offset", offset),
        Err(error) => span.record("error", error.as_str()),
    };
}

impl std::fmt::Debug for Completion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Completion")
            .field("topic", &self.topic)
            .field("partition", &self.partition)
            .field("batch_id", &self.batch_id)
            .finish_non_exhaustive()
    }
}

/// One record's claim on its batch's [`Completion`]; dropping it abandons the
/// record's outcome unless it was handed out.
#[derive(Debug)]
struct Slot {
    completion: Arc<Completion>,
    slot: u32,
    /// The outcome was handed out.
    done: bool,
}

impl Slot {
    fn poll(&mut self, cx: &mut Context<'_>) -> Poll<Outcome> {
        let r = self.completion.poll_slot(self.slot, cx);
        self.done |= r.is_ready();
        r
    }

    fn take(&mut self) -> Option<Outcome> {
        let r = self.completion.take(self.slot);
        self.done |= r.is_some();
        r
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        if !self.done {
            self.completion.abandon(self.slot);
        }
    }
}

/// Resolves to a sent record's outcome: where it landed, or why it failed. Both hand
/// the record back.
///
/// `DeliveryFuture` is [`Unpin`], so it can be polled through `&mut` and still be
/// cancelled afterwards:
///
/// ```no_run
/// # async fn demo(producer: &baton_kafka::Producer) -> Result<(), Box<dyn std::error::Error>> {
/// use std::time::Duration;
/// use baton_kafka::{CancelOutcome, ProducerRecord};
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
    slot: Slot,
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
    slot: Slot,
}

impl Future for InFlight {
    type Output = Result<RecordMetadata, ProduceError>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        self.slot.poll(cx)
    }
}

impl DeliveryFuture {
    pub(crate) fn new(completion: Arc<Completion>, slot: u32) -> Self {
        DeliveryFuture {
            slot: Slot {
                completion,
                slot,
                done: false,
            },
        }
    }

    /// The topic the record goes to.
    pub fn topic(&self) -> &str {
        &self.slot.completion.topic
    }

    /// The partition the record was assigned to.
    pub fn partition(&self) -> i32 {
        self.slot.completion.partition
    }

    /// Hands the record's span (`ProducerBuilder::record_spans`) to its batch,
    /// which ends it with the outcome.
    pub(crate) fn attach_span(&self, span: Span) {
        self.slot.completion.add_span(self.slot.slot, span);
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
        let c = &self.slot.completion;
        if let Some(shared) = c.shared.upgrade() {
            let removed =
                shared
                    .lock()
                    .remove_unsent(&c.topic, c.partition, c.batch_id, self.slot.slot);
            if let Some(record) = removed {
                // Nothing of the record is left in its batch to settle.
                self.slot.done = true;
                c.end_span_early(self.slot.slot, "cancelled before it was sent");
                return CancelOutcome::NeverSent(record);
            }
        }
        self.take_final()
            .unwrap_or(CancelOutcome::InFlight(InFlight { slot: self.slot }))
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
            result = &mut self => match result {
                Ok(meta) => CancelOutcome::Delivered(meta),
                Err(e) => CancelOutcome::Failed(e),
            },
            () = token.cancelled() => self.cancel(),
        }
    }

    /// The outcome, if it is already final.
    fn take_final(&mut self) -> Option<CancelOutcome> {
        self.slot.take().map(|r| match r {
            Ok(meta) => CancelOutcome::Delivered(meta),
            Err(e) => CancelOutcome::Failed(e),
        })
    }
}

impl Future for DeliveryFuture {
    type Output = Result<RecordMetadata, ProduceError>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        self.slot.poll(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn send_sync_unpin<T: Send + Sync + Unpin>() {}

    /// The handles can move between tasks and be polled through `&mut`.
    #[test]
    fn handles_are_send_sync_and_unpin() {
        send_sync_unpin::<DeliveryFuture>();
        send_sync_unpin::<InFlight>();
        send_sync_unpin::<CancelOutcome>();
        send_sync_unpin::<RecordMetadata>();
    }

    /// The futures of `send` can be spawned.
    #[allow(dead_code)]
    fn send_futures_are_send(p: &super::super::Producer, token: &CancellationToken) {
        fn send<T: Send>(_: &T) {}
        send(&p.send(ProducerRecord::new("t")));
        send(&p.send_with_cancel(ProducerRecord::new("t"), token));
    }
}
