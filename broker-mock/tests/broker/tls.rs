//! TLS listeners over TCP: a TLS client is served, a plaintext client on the TLS
//! port and TLS bytes on a plaintext port are closed, and other connections are
//! unharmed; the refusals are counted. Certificates are generated in-process (rcgen).

use std::sync::Arc;

use baton_broker::{
    Broker, BrokerConfig, BrokerHandle, ListenerSecurity, SecurityProtocol, TlsSettings,
};
use baton_protocol::messages::ApiVersionsRequest;
use baton_testkit::wire::Client;
use rustls::pki_types::{CertificateDer, ServerName};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::listeners::refusals_reach;

/// A broker with an `SSL` listener and the DER of its self-signed certificate.
async fn tls_broker() -> (BrokerHandle, CertificateDer<'static>) {
    let cert = rcgen::generate_simple_self_signed(vec!["localhost".into()]).unwrap();
    let tls = TlsSettings::from_pem(
        cert.cert.pem().as_bytes(),
        cert.signing_key.serialize_pem().as_bytes(),
    )
    .unwrap();
    let security = ListenerSecurity::new(SecurityProtocol::Ssl).with_tls(tls);
    let broker = Broker::start(BrokerConfig::in_memory().with_security(security))
        .await
        .unwrap();
    (broker, cert.cert.der().clone())
}

/// Whether an ApiVersions request over TLS gets an answer.
async fn served_over_tls(broker: &BrokerHandle, ca: &CertificateDer<'static>) -> bool {
    let mut roots = rustls::RootCertStore::empty();
    roots.add(ca.clone()).unwrap();
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_root_certificates(roots)
    .with_no_client_auth();
    let tcp = TcpStream::connect(broker.local_addr()).await.unwrap();
    let name = ServerName::try_from("localhost").unwrap();
    let Ok(mut tls) = tokio_rustls::TlsConnector::from(Arc::new(config))
        .connect(name, tcp)
        .await
    else {
        return false;
    };
    let frame = Client::encode(1, &ApiVersionsRequest::default(), 3);
    if tls.write_all(&frame).await.is_err() {
        return false;
    }
    let mut size = [0; 4];
    tls.read_exact(&mut size).await.is_ok() && i32::from_be_bytes(size) > 0
}

#[tokio::test]
async fn plaintext_client_on_a_tls_port_is_closed_and_others_are_served() {
    let (broker, ca) = tls_broker().await;
    assert!(served_over_tls(&broker, &ca).await);
    let mut plain = Client::connect(broker.local_addr()).await;
    let frame = Client::encode(1, &ApiVersionsRequest::default(), 3);
    plain.send_raw(&frame).await.unwrap();
    // The broker answers with at most a TLS alert (record type 21), then closes.
    let mut answer = Vec::new();
    let read = tokio::time::timeout(
        std::time::Duration::from_secs(10),
        plain.stream().read_to_end(&mut answer),
    )
    .await
    .expect("closed");
    assert!(
        read.is_err() || answer.is_empty() || answer[0] == 21,
        "{answer:?}"
    );
    assert!(served_over_tls(&broker, &ca).await);
    let counted = refusals_reach(&broker, "SSL", |r| r.tls_handshake == 1).await;
    assert_eq!(counted.total(), 1);
    broker.shutdown().await;
}

#[tokio::test]
async fn tls_bytes_on_a_plaintext_port_are_closed_and_others_are_served() {
    let broker = Broker::start(BrokerConfig::in_memory()).await.unwrap();
    let mut other = Client::connect(broker.local_addr()).await;
    let mut tls = Client::connect(broker.local_addr()).await;
    // The start of a TLS ClientHello: its "size prefix" is far over the maximum frame.
    tls.send_raw(&[
        0x16, 0x03, 0x01, 0x02, 0x00, 0x01, 0x00, 0x01, 0xfc, 0x03, 0x03,
    ])
    .await
    .unwrap();
    assert!(tls.recv_frame().await.is_none());
    other.send(&ApiVersionsRequest::default(), 3).await;
    assert!(other.recv_frame().await.is_some());
    refusals_reach(&broker, "PLAINTEXT", |r| r.bad_request == 1).await;
    broker.shutdown().await;
}

#[tokio::test]
async fn tls_listener_needs_a_certificate() {
    let security = ListenerSecurity::new(SecurityProtocol::SaslSsl);
    let err = Broker::start(BrokerConfig::in_memory().with_security(security))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("TLS"), "{err}");
}
