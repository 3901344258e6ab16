//! Item "security" (issue 16): produce and consume over `SASL_SSL` with
//! SCRAM-SHA-512 against `PLAINTEXT`, for Baton and librdkafka, in the same run.
//!
//! Two broker processes run side by side, both this binary re-started in its
//! `serve-broker` mode ([`serve`]): the same in-memory `baton_broker::Broker`
//! with default settings, one with a `PLAINTEXT` listener and one with a
//! `SASL_SSL` listener (an rcgen certificate for `127.0.0.1`, the users of
//! `baton_testkit::security`). Each client produces to and consumes from both,
//! interleaved run by run with the order rotating, so a noisy moment hurts all
//! alike. TLS is TLS 1.3 with rustls on the broker and on Baton's side,
//! OpenSSL on librdkafka's.

use std::process::Command;
use std::time::Duration;

use baton_broker::{Broker, BrokerConfig};
use baton_testkit::security::{ClientSecurity, Pki, SCRAM_SHA512_LOGIN};

use crate::clients::{self, Endpoint};
use crate::measure::{BrokerProc, Sample, Table};
use crate::{blocking, log_sample, settings, Options};

/// The row names: client and protocol.
fn row(client: &str, secure: bool) -> String {
    format!("{client} {}", if secure { "SASL_SSL" } else { "PLAINTEXT" })
}

/// Starts this binary as a broker on a free port (`serve-broker`), with a
/// `SASL_SSL` listener from `pki` if given.
fn start_broker(pki: Option<&Pki>) -> Result<BrokerProc, String> {
    let exe = std::env::current_exe().map_err(|e| format!("current exe: {e}"))?;
    let port = crate::measure::free_port();
    let addr: std::net::SocketAddr = ([127, 0, 0, 1], port).into();
    let mut cmd = Command::new(exe);
    cmd.args(["serve-broker", "--listen", &addr.to_string()]);
    let name = match pki {
        Some(pki) => {
            cmd.arg("--sasl-ssl")
                .arg(&pki.broker_cert)
                .arg(&pki.broker_key);
            "baton-broker SASL_SSL"
        }
        None => "baton-broker PLAINTEXT",
    };
    BrokerProc::spawn(name, cmd, addr)
}

/// The `serve-broker` mode: `--listen ADDR [--sasl-ssl CERT KEY]`; runs until
/// killed.
pub fn serve(args: &[String]) -> Result<(), String> {
    let mut listen = None;
    let mut tls = None;
    let mut args = args.iter();
    while let Some(a) = args.next() {
        match a.as_str() {
            "--listen" => {
                let addr = args.next().ok_or("--listen needs an address")?;
                listen = Some(addr.parse().map_err(|e| format!("--listen: {e}"))?);
            }
            "--sasl-ssl" => {
                let cert = args.next().ok_or("--sasl-ssl needs CERT KEY")?;
                let key = args.next().ok_or("--sasl-ssl needs CERT KEY")?;
                tls = Some((cert.clone(), key.clone()));
            }
            other => return Err(format!("serve-broker: unknown argument {other:?}")),
        }
    }
    let mut config = BrokerConfig::in_memory();
    config.listen = listen.ok_or("serve-broker needs --listen")?;
    if let Some((cert, key)) = tls {
        let tls = baton_broker::TlsSettings::from_pem_files(&cert, &key)
            .map_err(|e| format!("broker certificate: {e}"))?;
        config = config.with_security(
            baton_broker::ListenerSecurity::new(baton_broker::SecurityProtocol::SaslSsl)
                .with_tls(tls)
                .with_sasl(baton_testkit::security::sasl_settings()),
        );
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("runtime: {e}"))?;
    rt.block_on(async move {
        let broker = Broker::start(config)
            .await
            .map_err(|e| format!("broker: {e}"))?;
        std::future::pending::<()>().await;
        drop(broker);
        Ok(())
    })
}

/// Runs the item: `o.runs` produce runs of `o.records` records (acks=1) and
/// consume runs of `o.consume_records` pre-produced records per client and
/// protocol; prints the tables and the ratios issue 16 asks for.
pub async fn run(o: &Options) -> Result<(), String> {
    let pki = Pki::generate();
    let plain = start_broker(None)?;
    let secure_broker = start_broker(Some(&pki))?;
    let endpoints = [
        (false, Endpoint::from(&plain.bootstrap())),
        (
            true,
            Endpoint {
                bootstrap: secure_broker.bootstrap(),
                security: Some(ClientSecurity::sasl_ssl(&pki, SCRAM_SHA512_LOGIN)),
            },
        ),
    ];
    let broker_of = |secure: bool| if secure { &secure_broker } else { &plain };
    let clients = ["baton", "librdkafka"];
    println!(
        "\n## Security: SASL_SSL (SCRAM-SHA-512) vs PLAINTEXT, baton-broker in memory; produce {} records of 100 bytes per run (acks=1, linger 5 ms, batch 1 MiB), consume {} pre-produced records per run",
        o.records, o.consume_records
    );
    for (secure, at) in &endpoints {
        create_topic(at, "consume").await?;
        let s = clients::baton_produce(at, "consume", o.consume_records, 100, settings(1)).await?;
        log_sample(&format!("pre-produce {}", row("baton", *secure)), &s);
    }
    // One untimed produce per client and protocol: the first run in a fresh
    // process pays for cold memory.
    let mut jobs = Vec::new();
    for c in clients {
        for (secure, at) in &endpoints {
            jobs.push((c, *secure, at.clone()));
        }
    }
    for (c, secure, at) in &jobs {
        let topic = format!("security-warmup-{c}");
        create_topic(at, &topic).await?;
        let s = produce(c, at, &topic, o.records).await?;
        log_sample(&format!("{} warm-up (not counted)", row(c, *secure)), &s);
        delete_topic(at, &topic).await;
    }
    let (mut prod, mut cons) = (Table::default(), Table::default());
    // The same samples with the broker's CPU over their span instead of the client's.
    let (mut broker_prod, mut broker_cons) = (Table::default(), Table::default());
    for run in 0..o.runs {
        let mut order = jobs.clone();
        let n = order.len();
        order.rotate_left(run % n);
        for (c, secure, at) in &order {
            let name = row(c, *secure);
            let topic = format!("security-{c}-{run}");
            create_topic(at, &topic).await?;
            let broker = broker_of(*secure);
            let cpu0 = broker.cpu();
            let s = produce(c, at, &topic, o.records).await?;
            let broker_cpu = (broker.cpu() - cpu0).as_secs_f64();
            log_sample(&format!("produce {name} run {}", run + 1), &s);
            prod.push(&name, s);
            broker_prod.push(
                &name,
                Sample {
                    cpu_secs: broker_cpu,
                    ..s
                },
            );
            delete_topic(at, &topic).await;
            let cpu0 = broker.cpu();
            let s = consume(c, at, o.consume_records).await?;
            let broker_cpu = (broker.cpu() - cpu0).as_secs_f64();
            log_sample(&format!("consume {name} run {}", run + 1), &s);
            cons.push(&name, s);
            broker_cons.push(
                &name,
                Sample {
                    cpu_secs: broker_cpu,
                    ..s
                },
            );
        }
    }
    let base = row("baton", false);
    prod.print("Security: produce", &base, "client");
    cons.print("Security: consume", &base, "client");
    println!();
    println!("Broker CPU µs/record (median; /proc/<pid>/stat, 10 ms ticks):");
    println!();
    println!("| client | produce | consume |");
    println!("|---|---:|---:|");
    for name in prod.names() {
        println!(
            "| {name} | {:.3} | {:.3} |",
            broker_prod.cpu_us(&name),
            broker_cons.cpu_us(&name)
        );
    }
    println!();
    for (what, t) in [("produce", &prod), ("consume", &cons)] {
        let cost = |c: &str| 1.0 - t.rate(&row(c, true)) / t.rate(&row(c, false));
        println!(
            "{what}: TLS+SCRAM costs Baton {:.1}% of its PLAINTEXT records/s (librdkafka {:.1}%); over SASL_SSL Baton makes {:.2}x librdkafka's records/s",
            100.0 * cost("baton"),
            100.0 * cost("librdkafka"),
            t.rate(&row("baton", true)) / t.rate(&row("librdkafka", true))
        );
    }
    Ok(())
}

/// Creates a 1-partition topic through Baton's admin client.
async fn create_topic(at: &Endpoint, topic: &str) -> Result<(), String> {
    let client = at.baton().await?;
    baton_kafka::Admin::new(&client)
        .create_topic(topic, 1, 1)
        .await
        .map_err(|e| format!("create {topic}: {e}"))?;
    // The topic's leader is known to every later client right away; give the
    // broker's metadata a moment as the other items do.
    tokio::time::sleep(Duration::from_millis(100)).await;
    Ok(())
}

/// Deletes a produce run's topic (the brokers keep their logs in memory).
async fn delete_topic(at: &Endpoint, topic: &str) {
    let deleted = match at.baton().await {
        Ok(client) => baton_kafka::Admin::new(&client)
            .delete_topics([topic])
            .await
            .map_err(|e| e.to_string()),
        Err(e) => Err(e),
    };
    if let Err(e) = deleted {
        eprintln!("  (delete {topic}: {e})");
    }
}

async fn produce(client: &str, at: &Endpoint, topic: &str, n: u64) -> Result<Sample, String> {
    match client {
        "baton" => clients::baton_produce(at, topic, n, 100, settings(1)).await,
        _ => {
            let (at, topic) = (at.clone(), topic.to_owned());
            blocking(move || clients::rdkafka_produce(&at, &topic, n, 100, settings(1))).await
        }
    }
}

async fn consume(client: &str, at: &Endpoint, n: u64) -> Result<Sample, String> {
    match client {
        "baton" => clients::baton_consume(at, "consume", n).await,
        _ => {
            let at = at.clone();
            blocking(move || clients::rdkafka_consume(&at, "consume", n, true)).await
        }
    }
}
