//! A node's request handling without sockets, for the `broker_frames` fuzz target
//! in `fuzz/` and the test that replays its regressions (not a stable API).
//!
//! [`run_frames`] opens a fresh in-memory standalone node (small limits,
//! automatic topic creation on) and hands each frame to what a connection's reader
//! does with it: the listener's authentication gate, then the real dispatch of
//! `handlers` with the node's state. A reply computed later (a long-polling
//! Fetch, a JoinGroup waiting for its rebalance) is awaited on the runtime's
//! clock. A frame that closes its connection ends that connection; the next frame
//! arrives on a new one. Any panic, on the calling task or on a task or thread the
//! handlers started, fails the run.

use std::net::{IpAddr, Ipv4Addr};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Once};
use std::time::Duration;

use bytes::Bytes;
use tokio::sync::watch;

use crate::acl::RequestContext;
use crate::config::BrokerConfig;
use crate::handlers;
use crate::limits::BrokerLimits;
use crate::node_mode::NodeMode;
use crate::security::{Admission, ConnectionAuth, ScramStore};
use crate::state::{BrokerState, Endpoint};
use crate::wire::Reply;

/// How long a reply computed later is awaited. Run on a paused clock (as the fuzz
/// target and the regression test do), this costs no real time.
const LATER_REPLY_WAIT: Duration = Duration::from_secs(600);

/// Panics seen by the hook [`run_frames`] installs, in any thread.
static PANICS: AtomicUsize = AtomicUsize::new(0);

/// What became of one request frame.
#[derive(Debug)]
enum Outcome {
    /// The reply, size prefix included; `None`: the request gets no answer
    /// (Produce with `acks=0`).
    Answered(Option<Bytes>),
    /// The reply was not ready within the wait (a long rebalance, say).
    Pending,
    /// The connection was closed (the broker logs why).
    Closed,
}

/// The limits of the fuzzed node: small, so that what a request may buy shows.
fn limits() -> BrokerLimits {
    BrokerLimits {
        max_partitions: 200,
        max_topics: 20,
        max_partitions_per_request: 100,
        max_groups: 10,
        max_producers_per_partition: 10,
        max_aborted_txns_per_partition: 100,
        max_connections: 10,
        max_connections_per_ip: 10,
        max_acls: 20,
        max_transactional_ids: 10,
        max_partitions_per_transaction: 20,
        max_pending_txn_offsets: 20,
        cleaner_dedupe_buffer_bytes: 1 << 20,
        max_fetch_sessions: 5,
        max_fetch_session_partitions: 100,
    }
}

/// Runs `frames` (each after its size prefix) through a fresh node, one after the
/// other, and calls `check` with each frame and its reply (the reply frame with
/// its size prefix, or `None` for a request answered with nothing); a frame
/// answered later than the wait, or one that closed its connection, is not
/// checked.
///
/// # Panics
///
/// If a handler, or a task or thread it started, panics; if a reply computed later
/// is dropped unanswered; if `check` panics.
///
/// # Cancel safety
///
/// Not cancel safe in any useful sense: dropping it drops the node mid-request.
pub async fn run_frames(frames: Vec<Bytes>, check: impl Fn(&[u8], Option<&[u8]>)) {
    static HOOK: Once = Once::new();
    HOOK.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            PANICS.fetch_add(1, Ordering::SeqCst);
            previous(info);
        }));
    });
    let panics = PANICS.load(Ordering::SeqCst);
    let config = BrokerConfig {
        auto_create_topics: true,
        limits: limits(),
        ..BrokerConfig::in_memory()
    };
    let endpoints = config
        .listeners()
        .iter()
        .map(|l| Endpoint {
            name: l.name.clone(),
            host: "127.0.0.1".into(),
            port: 9092,
            protocol: l.security.protocol,
        })
        .collect();
    let security = config.listeners()[0].security.clone();
    let scram = Arc::new(ScramStore::default());
    let state = BrokerState::open(config, endpoints, scram.clone(), NodeMode::Standalone)
        .expect("an in-memory node opens");
    let state = Arc::new(state);
    let (stop_tx, stop) = watch::channel(false);
    let peer = IpAddr::V4(Ipv4Addr::LOCALHOST);
    let mut auth = ConnectionAuth::new(&security, scram.clone());
    for frame in frames {
        let request = frame.clone();
        let ctx = match auth.principal() {
            Some(user) => RequestContext::new(&format!("User:{user}"), peer),
            None => RequestContext::anonymous(peer),
        };
        let outcome = match auth.admit(frame) {
            Ok(Admission::Dispatch(frame)) => {
                match handlers::dispatch(&state, 0, frame, &ctx, &stop).await {
                    Ok(Reply::Now(reply)) => Outcome::Answered(reply),
                    Ok(Reply::Later(rx)) => {
                        match tokio::time::timeout(LATER_REPLY_WAIT, rx).await {
                            Ok(Ok(reply)) => Outcome::Answered(reply),
                            Ok(Err(_)) => panic!("a reply computed later was dropped unanswered"),
                            Err(_) => Outcome::Pending,
                        }
                    }
                    Err(_) => Outcome::Closed,
                }
            }
            Ok(Admission::Answer(bytes)) => Outcome::Answered(Some(bytes)),
            Ok(Admission::AnswerAndClose(bytes, _, _)) => {
                check(&request, Some(&bytes));
                Outcome::Closed
            }
            Ok(Admission::Close(..)) | Err(_) => Outcome::Closed,
        };
        match outcome {
            Outcome::Answered(reply) => check(&request, reply.as_deref()),
            Outcome::Pending => {}
            Outcome::Closed => auth = ConnectionAuth::new(&security, scram.clone()),
        }
        assert_eq!(
            PANICS.load(Ordering::SeqCst),
            panics,
            "a panic while the node handled {request:02x?}"
        );
    }
    let _ = stop_tx.send(true);
    // Let tasks that watch `stop` end before the runtime drops them.
    tokio::task::yield_now().await;
    assert_eq!(PANICS.load(Ordering::SeqCst), panics, "a panic in the node");
}
