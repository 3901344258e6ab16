//! A secured connection: `SASL_SSL` with SCRAM-SHA-512, the broker's certificate
//! verified against a CA file (host name included).
//!
//! ```text
//! cargo run --example secured [-- --bootstrap HOST:PORT --ca CA.pem --user NAME --password SECRET]
//! ```
//!
//! Without `--bootstrap` it starts `baton-broker` in this process with a
//! `SASL_SSL` listener: a test CA and a broker certificate for `127.0.0.1` are
//! generated into a temporary directory, and the SCRAM user is `carol`. The
//! client code is the same either way: it produces a record, reads it back, and
//! shows that a wrong password is a typed, non-retriable error. Needs the SDK's
//! `tls` feature (on by default).

use std::path::PathBuf;

use baton_broker::{Broker, BrokerConfig};
use baton_kafka::connection::ConnectionError;
use baton_kafka::{
    Admin, Client, ClientError, Consumer, Producer, ProducerRecord, SaslCredentials,
    SecurityProtocol, StartOffset, TlsConfig,
};
use baton_testkit::security::{Pki, SCRAM_SHA512_LOGIN};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let flag = |name: &str| std::env::args().skip_while(|a| a != name).nth(1);
    // The in-process broker and its test PKI, unless a cluster is given.
    let mut local = None;
    let (bootstrap, ca, user, password) = match flag("--bootstrap") {
        Some(bootstrap) => {
            let need = |name: &str| flag(name).ok_or(format!("{name} is needed with --bootstrap"));
            (
                bootstrap,
                PathBuf::from(need("--ca")?),
                need("--user")?,
                need("--password")?,
            )
        }
        None => {
            let pki = Pki::generate();
            let config = BrokerConfig::in_memory().with_security(pki.sasl_ssl_listener());
            let broker = Broker::start(config).await?;
            let login = SCRAM_SHA512_LOGIN;
            let found = (
                broker.bootstrap(),
                pki.ca.clone(),
                login.username.into(),
                login.password.into(),
            );
            local = Some((broker, pki));
            found
        }
    };
    println!(
        "connecting to {bootstrap} over SASL_SSL as {user}, trusting {}",
        ca.display()
    );

    // What a service needs: the protocol, the credentials, and whom to trust
    // (without `.tls(...)`, the operating system's roots).
    let secured = |credentials: SaslCredentials| -> Result<_, ConnectionError> {
        Ok(Client::builder([bootstrap.clone()])
            .client_id("secured-example")
            .security_protocol(SecurityProtocol::SaslSsl)
            .sasl(credentials)
            .tls(TlsConfig::with_ca_pem_file(&ca)?))
    };
    let client = secured(SaslCredentials::scram_sha512(user.clone(), password))?
        .build()
        .await?;

    let topic = format!("secured-{}", std::process::id());
    Admin::new(&client).create_topic(&topic, 1, 1).await?;
    let producer = Producer::builder(&client).build();
    let meta = producer
        .send(ProducerRecord::new(&topic).value("over TLS"))
        .await?
        .await?;
    producer.close().await;
    let mut consumer = Consumer::builder(&client)
        .assign(&topic, 0, StartOffset::Earliest)
        .build()
        .await?;
    let record = consumer.recv().await?;
    println!(
        "produced at offset {}, read back {:?}",
        meta.offset,
        String::from_utf8_lossy(record.value.as_deref().unwrap_or_default())
    );

    match secured(SaslCredentials::scram_sha512(user, "not the password"))?
        .build()
        .await
    {
        Err(ClientError::Connection(ConnectionError::Authentication {
            mechanism,
            message,
            ..
        })) => {
            println!("a wrong password: {mechanism} authentication failed: {message}")
        }
        Err(other) => println!("a wrong password: {other}"),
        Ok(_) => return Err("a wrong password was accepted".into()),
    }
    if let Some((broker, _pki)) = local {
        broker.shutdown().await;
    }
    Ok(())
}
