//! A consumer group member that commits by hand: each batch of records is
//! processed first and committed after, so a crash re-delivers at most the batch
//! in progress and never skips one (at-least-once).
//!
//! ```text
//! cargo run --example group_consumer [-- --bootstrap HOST:PORT]
//! ```
//!
//! Without `--bootstrap` it starts `baton-broker` in this process. It creates a
//! topic of 3 partitions, produces 100 orders, and runs a member of the group
//! `order-totals` that adds them up, committing after every 10 records. Then a
//! second member of the same group (a restarted service) starts from the
//! committed offsets: it sees only the 5 orders produced after the first one
//! closed.

use std::time::Duration;

use baton_broker::{Broker, BrokerConfig};
use baton_kafka::{Admin, Client, GroupConsumer, GroupError, Producer, ProducerRecord};

const COMMIT_EVERY: usize = 10;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let bootstrap = std::env::args().skip_while(|a| a != "--bootstrap").nth(1);
    let broker = match bootstrap {
        Some(_) => None,
        None => Some(Broker::start(BrokerConfig::in_memory()).await?),
    };
    let bootstrap = bootstrap.unwrap_or_else(|| broker.as_ref().unwrap().bootstrap());
    let client = Client::builder([bootstrap])
        .client_id("group-consumer-example")
        .build()
        .await?;

    let topic = format!("orders-{}", std::process::id());
    Admin::new(&client).create_topic(&topic, 3, 1).await?;
    produce_orders(&client, &topic, 0..100).await?;

    let group = format!("order-totals-{}", std::process::id());
    let mut member = join(&client, &group, &topic).await?;
    let (mut total, mut uncommitted) = (0u64, 0);
    for _ in 0..100 {
        let record = member.recv().await?;
        total += amount(record.value.as_deref());
        uncommitted += 1;
        if uncommitted == COMMIT_EVERY {
            // Commits the position after the last record `recv` returned, for
            // every assigned partition, and waits for the coordinator's answer.
            member.commit().await?;
            uncommitted = 0;
        }
    }
    println!("first member: 100 orders, total {total}; committed");
    // close() commits nothing by itself under manual commits; it leaves the group.
    member.close().await?;

    produce_orders(&client, &topic, 100..105).await?;
    let mut member = join(&client, &group, &topic).await?;
    let mut resumed = Vec::new();
    while resumed.len() < 5 {
        let record = member.recv().await?;
        resumed.push(amount(record.value.as_deref()));
        member.commit().await?;
    }
    resumed.sort();
    println!("second member resumed at the committed offsets: orders {resumed:?}");
    // Nothing else is waiting: the first 100 are not delivered again.
    match tokio::time::timeout(Duration::from_secs(1), member.recv()).await {
        Err(_) => println!("and nothing was delivered twice"),
        Ok(record) => return Err(format!("unexpected record {:?}", record?.offset).into()),
    }
    member.close().await?;
    if let Some(broker) = broker {
        broker.shutdown().await;
    }
    Ok(())
}

/// A member of `group` reading `topic`, committing only when told to.
async fn join(client: &Client, group: &str, topic: &str) -> Result<GroupConsumer, GroupError> {
    GroupConsumer::builder(client, group)
        .subscribe([topic])
        .manual_commit()
        .build()
        .await
}

/// Produces one record per order number, its value the amount (the number itself).
async fn produce_orders(
    client: &Client,
    topic: &str,
    orders: std::ops::Range<u64>,
) -> Result<(), Box<dyn std::error::Error>> {
    let producer = Producer::builder(client).build();
    let mut deliveries = Vec::new();
    for order in orders {
        let record = ProducerRecord::new(topic)
            .key(format!("customer-{}", order % 7))
            .value(order.to_string());
        deliveries.push(producer.send(record).await?);
    }
    for delivery in deliveries {
        delivery.await?;
    }
    producer.close().await;
    Ok(())
}

fn amount(value: Option<&[u8]>) -> u64 {
    value
        .and_then(|v| std::str::from_utf8(v).ok())
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}
