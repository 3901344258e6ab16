//! Typed cancellation: every way a service gives up on work, and the outcome
//! Baton reports for each.
//!
//! ```text
//! cargo run --example cancellation [-- --bootstrap HOST:PORT]
//! ```
//!
//! Without `--bootstrap` it starts `baton-broker` in this process. Three parts:
//!
//! 1. A timeout around a delivery, then `DeliveryFuture::cancel`: a record still
//!    queued comes back (`CancelOutcome::NeverSent`, never on the wire, its buffer
//!    free for a pool).
//! 2. A copy pipeline (consume `input`, produce to `output`) stopped by a
//!    `CancellationToken` in a `select!`: `Consumer::recv` is cancel safe, so no
//!    record is lost at the stop; each delivery still open is settled by
//!    `DeliveryFuture::until_cancelled` as delivered, never sent, in flight (the
//!    producer keeps delivering it; awaiting the handle gives the final result)
//!    or failed.
//! 3. `send_with_cancel` with a token that already fired hands the record back
//!    (`ProduceError::Cancelled`), and `flush_timeout` reports how many records
//!    were still pending (`FlushTimeout`).

use std::time::Duration;

use baton_broker::{Broker, BrokerConfig};
use baton_kafka::{
    Admin, CancelOutcome, CancellationToken, Client, Consumer, ProduceError, Producer,
    ProducerRecord, StartOffset, TopicPartition,
};
use bytes::BytesMut;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let bootstrap = std::env::args().skip_while(|a| a != "--bootstrap").nth(1);
    let broker = match bootstrap {
        Some(_) => None,
        None => Some(Broker::start(BrokerConfig::in_memory()).await?),
    };
    let bootstrap = bootstrap.unwrap_or_else(|| broker.as_ref().unwrap().bootstrap());
    let client = Client::builder([bootstrap])
        .client_id("cancellation-example")
        .build()
        .await?;
    let (input, output) = (
        format!("input-{}", std::process::id()),
        format!("output-{}", std::process::id()),
    );
    let admin = Admin::new(&client);
    admin.create_topic(&input, 1, 1).await?;
    admin.create_topic(&output, 1, 1).await?;

    // 1. A timeout, then cancel. This producer lingers for an hour, so the record
    // is certainly still queued when the timeout fires.
    let lingering = Producer::builder(&client)
        .linger(Duration::from_secs(3600))
        .build();
    let value = BytesMut::from(&b"from the pool"[..]).freeze();
    let mut delivery = lingering
        .send(ProducerRecord::new(&output).value(value))
        .await?;
    if tokio::time::timeout(Duration::from_millis(100), &mut delivery)
        .await
        .is_err()
    {
        match delivery.cancel() {
            CancelOutcome::NeverSent(record) => {
                let buffer = record.value.expect("the value we sent").try_into_mut();
                println!(
                    "1. timed out, never sent: record back, buffer reusable: {}",
                    buffer.is_ok()
                );
            }
            other => println!("1. timed out, then: {other:?}"),
        }
    }
    lingering.close().await;

    // 2. A pipeline stopped by a token.
    let producer = Producer::builder(&client).build();
    for i in 0..1_000 {
        producer
            .send(ProducerRecord::new(&input).value(format!("record {i}")))
            .await?;
    }
    producer.flush().await;
    let token = CancellationToken::new();
    let stopper = token.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(200)).await;
        stopper.cancel(); // As a shutdown signal handler would.
    });
    let mut consumer = Consumer::builder(&client)
        .assign(&input, 0, StartOffset::Earliest)
        .build()
        .await?;
    let mut open = Vec::new();
    let mut copied = 0;
    loop {
        let record = tokio::select! {
            biased;
            () = token.cancelled() => break,
            record = consumer.recv() => record?,
        };
        let copy = ProducerRecord::new(&output).value(record.value.unwrap_or_default());
        match producer.send_with_cancel(copy, &token).await {
            Ok(delivery) => open.push(delivery),
            // The token fired while `send` waited for buffer memory: never sent.
            Err(ProduceError::Cancelled { .. }) => break,
            Err(e) => return Err(e.into()),
        }
        copied += 1;
        // Give the stop a chance to land mid-stream.
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    let (mut delivered, mut never_sent, mut in_flight, mut failed) = (0, 0, 0, 0);
    let mut delivered_later = 0;
    for delivery in open {
        match delivery.until_cancelled(&token).await {
            CancelOutcome::Delivered(_) => delivered += 1,
            CancelOutcome::NeverSent(_) => never_sent += 1,
            CancelOutcome::InFlight(handle) => {
                in_flight += 1;
                // Still tracked: its final outcome arrives here.
                if handle.await.is_ok() {
                    delivered_later += 1;
                }
            }
            CancelOutcome::Failed(_) => failed += 1,
        }
    }
    println!(
        "2. stopped after copying {copied} records (resume at offset {:?}): \
         {delivered} delivered, {never_sent} never sent, {in_flight} in flight \
         ({delivered_later} of them delivered later), {failed} failed",
        consumer.position(&TopicPartition::new(input.clone(), 0))
    );

    // 3. A token that already fired, and a flush deadline.
    match producer
        .send_with_cancel(ProducerRecord::new(&output).value("late"), &token)
        .await
    {
        Err(ProduceError::Cancelled { record }) => {
            println!(
                "3. cancelled before it was accepted: {:?} handed back",
                record.value
            )
        }
        other => println!("3. {other:?}"),
    }
    match producer.flush_timeout(Duration::from_secs(10)).await {
        Ok(()) => println!("   flushed within the deadline"),
        Err(timeout) => println!(
            "   {} records still pending after {:?}",
            timeout.pending, timeout.timeout
        ),
    }
    producer.close().await;
    if let Some(broker) = broker {
        broker.shutdown().await;
    }
    Ok(())
}
