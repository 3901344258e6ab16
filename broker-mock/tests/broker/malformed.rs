//! Hostile input closes only the offending connection; the broker keeps serving and
//! keeps what it accepted.

use std::time::Duration;

use baton_broker::{Broker, BrokerConfig};
use baton_protocol::messages::*;
use baton_testkit::wire::*;
use tokio::io::AsyncWriteExt;

/// One hostile frame (or a fragment of one).
fn hostile_frame(rng: &mut Rng) -> Vec<u8> {
    let api_key = match rng.below(3) {
        0 => rng.below(70) as i16,
        1 => [0i16, 1, 2, 3, 18, 19, 20][rng.below(7) as usize],
        _ => rng.next_u64() as i16,
    };
    let version = match rng.below(3) {
        0 => rng.below(16) as i16,
        _ => rng.next_u64() as i16,
    };
    let body_len = rng.below(200) as usize;
    let mut body = Vec::new();
    body.extend_from_slice(&api_key.to_be_bytes());
    body.extend_from_slice(&version.to_be_bytes());
    body.extend_from_slice(&(rng.next_u64() as i32).to_be_bytes());
    // Sometimes a plausible client id, then random bytes (lying lengths included).
    if rng.below(2) == 0 {
        body.extend_from_slice(&[0, 4, b't', b'e', b's', b't']);
    }
    body.extend_from_slice(&rng.bytes(body_len));
    let size: i32 = match rng.below(6) {
        0 => i32::MAX,                                         // oversized
        1 => -(rng.below(1000) as i32) - 1,                    // negative
        2 => body.len() as i32 + rng.below(50) as i32 + 1,     // claims more than sent
        3 => (body.len() as i32 - rng.below(8) as i32).max(0), // claims less
        _ => body.len() as i32,
    };
    let mut frame = size.to_be_bytes().to_vec();
    frame.extend_from_slice(&body);
    frame
}

#[tokio::test]
async fn hostile_input_closes_only_its_connection() {
    let seed = seed();
    let broker = Broker::start(BrokerConfig::in_memory().with_max_frame_bytes(1 << 20))
        .await
        .unwrap();
    let addr = broker.local_addr();

    let mut c = Client::connect(addr).await;
    let topic = topic_name("survivor");
    create_topic(&mut c, &topic, 1).await;
    let resp = c
        .call(&produce_req(&topic, 0, -1, records(1, &["before"])), 9)
        .await;
    assert_eq!(resp.responses[0].partition_responses[0].error_code, 0);

    // The 8-byte Metadata body claiming 0x7fffffff topics.
    let mut frame = Vec::new();
    let body: &[u8] = &[0, 3, 0, 1, 0, 0, 0, 7, 0xff, 0xff, 0x7f, 0xff, 0xff, 0xff];
    frame.extend_from_slice(&(body.len() as i32).to_be_bytes());
    frame.extend_from_slice(body);
    let mut evil = Client::connect(addr).await;
    evil.send_raw(&frame).await.unwrap();
    assert!(
        evil.recv_frame().await.is_none(),
        "connection closed without a response"
    );

    // 1,000 random frames, several per connection.
    let mut rng = Rng::new(seed);
    let mut sent = 0;
    while sent < 1000 {
        let mut conn = tokio::net::TcpStream::connect(addr).await.unwrap();
        let per = 1 + rng.below(8);
        for _ in 0..per {
            let frame = hostile_frame(&mut rng);
            sent += 1;
            if conn.write_all(&frame).await.is_err() {
                break; // the broker already closed this one
            }
        }
        if rng.below(4) == 0 {
            // Sometimes wait for the broker's verdict; either way, then drop.
            let mut sink = Vec::new();
            let _ = tokio::time::timeout(
                Duration::from_millis(50),
                tokio::io::AsyncReadExt::read_to_end(&mut conn, &mut sink),
            )
            .await;
        }
    }

    // A fresh connection still gets full service and the data is intact.
    let mut c = Client::connect(addr).await;
    let v = c.call(&ApiVersionsRequest::default(), 3).await;
    assert_eq!(v.error_code, 0, "seed {seed}");
    let m = c
        .call(
            &MetadataRequest {
                topics: None,
                ..Default::default()
            },
            12,
        )
        .await;
    assert!(
        m.topics
            .iter()
            .any(|t| t.name.as_deref() == Some(topic.as_str())),
        "seed {seed}"
    );
    let resp = c
        .call(&produce_req(&topic, 0, -1, records(2, &["after"])), 9)
        .await;
    assert_eq!(
        resp.responses[0].partition_responses[0].error_code, 0,
        "seed {seed}"
    );
    let resp = c.call(&fetch_req(&topic, 0, 0, 0, 0), 12).await;
    assert_eq!(
        values(&resp.responses[0].partitions[0].records),
        ["before", "after"],
        "seed {seed}"
    );
    broker.shutdown().await;
}
