//! How to test a service of your own against the in-process broker: a file to
//! copy into your crate's `tests/` (with `baton-broker` and `tokio` as
//! dev-dependencies). It uses nothing but the SDK, the broker and tokio.
//!
//! The service: it reads orders (key: customer, value: amount) as a member of a
//! consumer group, publishes each customer's running total to another topic,
//! and commits after the totals are delivered (at least once). It stops when
//! its `CancellationToken` fires. The test starts a broker on `127.0.0.1:0`,
//! runs the service in a task, feeds it orders, reads its output back with a
//! plain consumer (with a deadline, never a fixed sleep), and stops it.

use std::collections::HashMap;
use std::time::Duration;

use baton_broker::{Broker, BrokerConfig};
use baton_kafka::{
    Admin, CancellationToken, Client, Consumer, GroupConsumer, Producer, ProducerRecord,
    StartOffset,
};

/// The service under test, as it would live in your crate.
async fn running_totals(
    client: Client,
    orders: String,
    totals: String,
    stop: CancellationToken,
) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    let mut consumer = GroupConsumer::builder(&client, "running-totals")
        .subscribe([orders])
        .manual_commit()
        .build()
        .await?;
    let producer = Producer::builder(&client).build();
    let mut sums: HashMap<String, u64> = HashMap::new();
    loop {
        let order = tokio::select! {
            () = stop.cancelled() => break,
            order = consumer.recv() => order?,
        };
        let customer =
            String::from_utf8_lossy(order.key.as_deref().unwrap_or_default()).into_owned();
        let amount: u64 =
            std::str::from_utf8(order.value.as_deref().unwrap_or_default())?.parse()?;
        let sum = sums.entry(customer.clone()).or_default();
        *sum += amount;
        let total = ProducerRecord::new(totals.clone())
            .key(customer)
            .value(sum.to_string());
        producer.send(total).await?.await?;
        consumer.commit().await?;
    }
    producer.close().await;
    consumer.close().await?;
    Ok(())
}

#[tokio::test]
async fn the_service_publishes_running_totals() {
    let broker = Broker::start(BrokerConfig::in_memory()).await.unwrap();
    let client = Client::builder([broker.bootstrap()]).build().await.unwrap();
    let admin = Admin::new(&client);
    admin.create_topic("orders", 1, 1).await.unwrap();
    admin.create_topic("totals", 1, 1).await.unwrap();

    let stop = CancellationToken::new();
    let service = tokio::spawn(running_totals(
        client.clone(),
        "orders".into(),
        "totals".into(),
        stop.clone(),
    ));

    let producer = Producer::builder(&client).build();
    for (customer, amount) in [("ann", 5), ("bob", 7), ("ann", 10), ("ann", 1), ("bob", 3)] {
        let order = ProducerRecord::new("orders")
            .key(customer)
            .value(amount.to_string());
        producer.send(order).await.unwrap().await.unwrap();
    }
    producer.close().await;

    let mut totals = Consumer::builder(&client)
        .assign("totals", 0, StartOffset::Earliest)
        .build()
        .await
        .unwrap();
    let mut seen = Vec::new();
    while seen.len() < 5 {
        let record = tokio::time::timeout(Duration::from_secs(60), totals.recv())
            .await
            .expect("the service publishes a total for every order")
            .unwrap();
        let key = String::from_utf8(record.key.unwrap().to_vec()).unwrap();
        let value = String::from_utf8(record.value.unwrap().to_vec()).unwrap();
        seen.push((key, value));
    }
    let expected = [
        ("ann", "5"),
        ("bob", "7"),
        ("ann", "15"),
        ("ann", "16"),
        ("bob", "10"),
    ];
    let expected: Vec<_> = expected
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    assert_eq!(seen, expected);

    stop.cancel();
    service.await.unwrap().expect("the service stops cleanly");
    broker.shutdown().await;
}
