//! Run by `.ci/run`: the SDK without default features (no compression codec,
//! no TLS) builds, and asking it for `SSL` or `SASL_SSL` fails with
//! `ConnectionError::SecurityConfig` right after the TCP connect, before any
//! byte is sent. Exits non-zero, naming the problem, otherwise.

use baton_kafka::connection::{Connection, ConnectionConfig, ConnectionError};
use baton_kafka::{Compression, SecurityProtocol};
use tokio::io::AsyncReadExt;
use tokio::net::TcpListener;

#[tokio::main(flavor = "current_thread")]
async fn main() {
    for codec in [
        Compression::Gzip,
        Compression::Snappy,
        Compression::Lz4,
        Compression::Zstd,
    ] {
        assert!(!codec.is_supported(), "{codec:?} is compiled in");
    }
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("local address").to_string();
    for protocol in [SecurityProtocol::Ssl, SecurityProtocol::SaslSsl] {
        let config = ConnectionConfig {
            security_protocol: protocol,
            ..ConnectionConfig::default()
        };
        match Connection::connect(&addr, &config).await {
            Err(ConnectionError::SecurityConfig(message)) => {
                assert!(message.contains("`tls` feature"), "{protocol}: {message}");
                println!("{protocol} without the tls feature: {message}");
            }
            Err(other) => panic!("{protocol}: expected SecurityConfig, got {other:?}"),
            Ok(_) => panic!("{protocol}: connected without TLS support"),
        }
        let (mut peer, _) = listener.accept().await.expect("accept");
        let mut byte = [0u8; 1];
        let read = peer.read(&mut byte).await.expect("read");
        assert_eq!(read, 0, "{protocol}: the client sent bytes");
    }
    println!("the SDK without default features: no codecs, TLS refused with a typed error");
}
