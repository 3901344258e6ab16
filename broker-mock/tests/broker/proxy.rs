//! `baton_broker::faults::proxy` in front of a standalone broker: a tap sees every
//! request, rewrites and loses responses, and lock step keeps pipelined requests
//! behind a lost response from ever reaching the broker.

use std::sync::{Arc, Mutex};

use baton_broker::faults::proxy::{
    Exchange, Proxy, ProxyOptions, Reply, RequestFrame, Tap, Verdict,
};
use baton_broker::rpc::Channel;
use baton_broker::{Broker, BrokerConfig, BrokerHandle};
use baton_protocol::envelope;
use baton_protocol::messages::ApiVersionsRequest;
use bytes::Bytes;

/// Records the correlation ids of requests; rewrites the throttle time of the
/// response to `rewrite` and loses the response to `lose`.
struct Script {
    seen: Mutex<Vec<i32>>,
    rewrite: i32,
    lose: i32,
}

impl Tap for Script {
    fn request(&self, request: &RequestFrame) -> Verdict {
        assert_eq!(request.api_key, 18);
        let (header, _) =
            envelope::decode_request::<ApiVersionsRequest>(request.frame.clone(), request.version)
                .expect("the request frame is header and body");
        assert_eq!(header.correlation_id, request.correlation_id);
        self.seen.lock().unwrap().push(request.correlation_id);
        Verdict {
            lose_response: request.correlation_id == self.lose,
            tag: Some(request.correlation_id as u64),
        }
    }

    fn response(&self, exchange: Exchange, frame: Bytes) -> Reply {
        assert_eq!(exchange.tag, Some(exchange.correlation_id as u64));
        if exchange.correlation_id != self.rewrite {
            return Reply::now(frame);
        }
        let (header, mut resp) =
            envelope::decode_response::<ApiVersionsRequest>(frame, exchange.version).unwrap();
        resp.throttle_time_ms = 77;
        let framed = envelope::encode_response::<ApiVersionsRequest>(
            header.correlation_id,
            exchange.version,
            &resp,
        )
        .unwrap();
        Reply::now(framed.slice(4..))
    }
}

async fn proxied(options: ProxyOptions, script: Arc<Script>) -> (BrokerHandle, Proxy) {
    let broker = Broker::start(BrokerConfig::in_memory()).await.unwrap();
    let proxy = Proxy::start_with(
        "127.0.0.1:0".parse().unwrap(),
        broker.local_addr(),
        options.tap(script),
    )
    .await
    .unwrap();
    (broker, proxy)
}

#[tokio::test]
async fn a_tap_sees_requests_rewrites_and_loses_responses() {
    let script = Arc::new(Script {
        seen: Mutex::default(),
        rewrite: 2,
        lose: 3,
    });
    let (broker, proxy) = proxied(ProxyOptions::default(), script.clone()).await;
    let mut c = Channel::connect(proxy.local_addr(), "tap-test")
        .await
        .unwrap();
    let req = ApiVersionsRequest::default();
    assert_eq!(c.call(&req, 3).await.unwrap().throttle_time_ms, 0);
    assert_eq!(c.call(&req, 3).await.unwrap().throttle_time_ms, 77);
    assert!(
        c.call(&req, 3).await.is_err(),
        "lost: the connection closes"
    );
    assert_eq!(*script.seen.lock().unwrap(), vec![1, 2, 3]);
    drop(proxy);
    broker.shutdown().await;
}

#[tokio::test]
async fn lock_step_keeps_requests_behind_a_lost_response_from_the_broker() {
    for lock_step in [false, true] {
        let script = Arc::new(Script {
            seen: Mutex::default(),
            rewrite: 0,
            lose: 1,
        });
        let options = if lock_step {
            ProxyOptions::default().lock_step()
        } else {
            ProxyOptions::default()
        };
        let (broker, proxy) = proxied(options, script.clone()).await;
        let mut c = Channel::connect(proxy.local_addr(), "tap-test")
            .await
            .unwrap();
        // Two requests in one write: both are in the proxy's buffer at once.
        let req = ApiVersionsRequest::default();
        let mut two = envelope::encode_request(1, Some("tap-test"), &req, 3)
            .unwrap()
            .to_vec();
        two.extend_from_slice(&envelope::encode_request(2, Some("tap-test"), &req, 3).unwrap());
        c.send_raw(&two).await.unwrap();
        assert!(c.recv_frame().await.is_err(), "lost: the connection closes");
        let seen = script.seen.lock().unwrap().clone();
        if lock_step {
            assert_eq!(seen, vec![1], "the second request waited, then was dropped");
        } else {
            assert_eq!(seen, vec![1, 2], "pipelined");
        }
        drop(proxy);
        broker.shutdown().await;
    }
}
