//! Several listeners on one node: each has its own security, Metadata and
//! FindCoordinator answer with the advertised endpoint of the listener the request
//! arrived on, the connection limits count every listener together, and refused
//! connections are counted per listener.

use std::time::Duration;

use baton_broker::{
    Broker, BrokerConfig, BrokerHandle, BrokerLimits, ListenerConfig, ListenerSecurity,
    RefusedConnections, SaslSettings, SecurityProtocol,
};
use baton_protocol::messages::*;
use baton_protocol::sasl::Mechanism;
use baton_testkit::wire::*;

use super::sasl::login;

/// Waits (up to 10 s) until the listener's refusal counts satisfy `check`, and
/// returns them: a connection is closed a moment before its refusal is counted
/// when the TLS layer drops it.
pub(crate) async fn refusals_reach(
    broker: &BrokerHandle,
    listener: &str,
    check: impl Fn(&RefusedConnections) -> bool,
) -> RefusedConnections {
    for _ in 0..1000 {
        let now = broker
            .refused_connections(listener)
            .expect("listener exists");
        if check(&now) {
            return now;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!(
        "refusals of {listener}: {:?}",
        broker.refused_connections(listener)
    );
}

/// A node with a PLAINTEXT listener and a SASL_PLAINTEXT one named CLIENT that
/// advertises `clients.example:19092`.
async fn two_listener_broker(limits: BrokerLimits) -> BrokerHandle {
    let sasl = SaslSettings::new([Mechanism::Plain]).with_plain_user("alice", "alice-secret");
    let client = ListenerConfig::new(
        "CLIENT",
        ListenerSecurity::new(SecurityProtocol::SaslPlaintext).with_sasl(sasl),
    )
    .with_advertised_host("clients.example")
    .with_advertised_port(19092);
    Broker::start(
        BrokerConfig::in_memory()
            .with_limits(limits)
            .with_listener(client),
    )
    .await
    .unwrap()
}

#[tokio::test]
async fn metadata_and_coordinator_name_the_listener_asked() {
    let broker = two_listener_broker(BrokerLimits::default()).await;
    let plain_addr = broker.listener_addr("PLAINTEXT").unwrap();
    assert_eq!(plain_addr, broker.local_addr());
    let client_addr = broker.listener_addr("client").expect("names ignore case");
    assert_ne!(client_addr, plain_addr);
    assert_eq!(
        broker
            .listener_addrs()
            .into_iter()
            .map(|(n, _)| n)
            .collect::<Vec<_>>(),
        ["PLAINTEXT", "CLIENT"]
    );

    let mut plain = Client::connect(plain_addr).await;
    let meta = plain.call(&MetadataRequest::default(), 12).await;
    assert_eq!(meta.brokers.len(), 1);
    assert_eq!(meta.brokers[0].host, "127.0.0.1");
    assert_eq!(meta.brokers[0].port, i32::from(plain_addr.port()));

    let mut sasl = Client::connect(client_addr).await;
    assert_eq!(
        login(&mut sasl, Mechanism::Plain, "alice", "alice-secret").await,
        None
    );
    let meta = sasl.call(&MetadataRequest::default(), 12).await;
    assert_eq!(meta.brokers[0].host, "clients.example");
    assert_eq!(meta.brokers[0].port, 19092);
    let coordinator = sasl
        .call(
            &FindCoordinatorRequest {
                key: "g".into(),
                ..Default::default()
            },
            3,
        )
        .await;
    assert_eq!(
        (coordinator.host.as_str(), coordinator.port),
        ("clients.example", 19092)
    );

    // The PLAINTEXT listener needs no login; the SASL one does.
    let mut early = Client::connect(client_addr).await;
    early.send(&MetadataRequest::default(), 12).await;
    assert!(early.recv_frame().await.is_none());
    let counted = refusals_reach(&broker, "CLIENT", |r| r.unauthenticated_request == 1).await;
    assert_eq!(counted.total(), 1);
    assert_eq!(
        broker.refused_connections("PLAINTEXT"),
        Some(RefusedConnections::default())
    );
    broker.shutdown().await;
}

#[tokio::test]
async fn connection_limits_count_every_listener() {
    let limits = BrokerLimits {
        max_connections: 2,
        ..BrokerLimits::default()
    };
    let broker = two_listener_broker(limits).await;
    let plain_addr = broker.listener_addr("PLAINTEXT").unwrap();
    let client_addr = broker.listener_addr("CLIENT").unwrap();
    let mut a = Client::connect(plain_addr).await;
    let mut b = Client::connect(client_addr).await;
    for c in [&mut a, &mut b] {
        assert!(!c
            .call(&ApiVersionsRequest::default(), 3)
            .await
            .api_keys
            .is_empty());
    }
    // Two connections are open, one per listener: a third on either is refused.
    let mut third = Client::connect(plain_addr).await;
    third.send(&ApiVersionsRequest::default(), 3).await;
    assert!(third.recv_frame().await.is_none());
    refusals_reach(&broker, "PLAINTEXT", |r| r.connection_limit == 1).await;
    let mut fourth = Client::connect(client_addr).await;
    fourth.send(&ApiVersionsRequest::default(), 3).await;
    assert!(fourth.recv_frame().await.is_none());
    refusals_reach(&broker, "CLIENT", |r| r.connection_limit == 1).await;
    // The open ones are unharmed.
    assert!(!a
        .call(&ApiVersionsRequest::default(), 3)
        .await
        .api_keys
        .is_empty());
    broker.shutdown().await;
}

#[tokio::test]
async fn listener_names_must_differ() {
    let twin = ListenerConfig::new("plaintext", ListenerSecurity::default());
    let err = Broker::start(BrokerConfig::in_memory().with_listener(twin))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("used twice"), "{err}");
    let bad = ListenerConfig::new("NO SPACES", ListenerSecurity::default());
    assert!(Broker::start(BrokerConfig::in_memory().with_listener(bad))
        .await
        .is_err());
    let unsecured = ListenerConfig::new("SECURE", ListenerSecurity::new(SecurityProtocol::SaslSsl));
    let err = Broker::start(BrokerConfig::in_memory().with_listener(unsecured))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("listener SECURE"), "{err}");
}
