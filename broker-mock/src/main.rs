//! `baton-broker`: runs one Kafka-protocol broker node until SIGINT or SIGTERM.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use baton_broker::{Broker, BrokerConfig};

const USAGE: &str = "\
Usage: baton-broker [OPTIONS]

Options:
  --listen ADDR            address to listen on (default 127.0.0.1:9092)
  --data-dir DIR           keep topics and logs in DIR
  --in-memory              keep everything in memory (the default without --data-dir)
  --advertised-host HOST   host name given to clients (default: the listen IP)
  --node-id N              this node's id (default 0)
  --auto-create-topics     create unknown topics on Metadata and Produce
  --default-partitions N   partitions of auto-created topics (default 1)
  --log-level LEVEL        tracing filter, e.g. info or baton_broker=debug (RUST_LOG also works)
  -h, --help               print this help
  -V, --version            print the version
";

struct Args {
    config: BrokerConfig,
    log_level: Option<String>,
}

fn parse_args(mut args: impl Iterator<Item = String>) -> Result<Option<Args>, String> {
    let mut config = BrokerConfig {
        listen: "127.0.0.1:9092".parse().map_err(|e| format!("{e}"))?,
        ..BrokerConfig::default()
    };
    let mut log_level = None;
    let mut in_memory = false;
    fn value(flag: &str, v: Option<String>) -> Result<String, String> {
        v.ok_or_else(|| format!("{flag} needs a value"))
    }
    while let Some(arg) = args.next() {
        let (flag, inline) = match arg.split_once('=') {
            Some((f, v)) if f.starts_with("--") => (f.to_owned(), Some(v.to_owned())),
            _ => (arg.clone(), None),
        };
        let mut take = |flag: &str| match inline.clone() {
            Some(v) => Ok(v),
            None => value(flag, args.next()),
        };
        match flag.as_str() {
            "-h" | "--help" => {
                print!("{USAGE}");
                return Ok(None);
            }
            "-V" | "--version" => {
                println!("baton-broker {}", env!("CARGO_PKG_VERSION"));
                return Ok(None);
            }
            "--listen" => {
                let v = take("--listen")?;
                config.listen = v
                    .parse::<SocketAddr>()
                    .map_err(|e| format!("--listen {v:?}: {e} (expected IP:PORT)"))?;
            }
            "--data-dir" => config.data_dir = Some(PathBuf::from(take("--data-dir")?)),
            "--in-memory" => in_memory = true,
            "--advertised-host" => config.advertised_host = Some(take("--advertised-host")?),
            "--node-id" => {
                let v = take("--node-id")?;
                config.node_id =
                    v.parse().ok().filter(|n: &i32| *n >= 0).ok_or_else(|| {
                        format!("--node-id {v:?}: expected a non-negative integer")
                    })?;
            }
            "--auto-create-topics" => config.auto_create_topics = true,
            "--default-partitions" => {
                let v = take("--default-partitions")?;
                config.default_num_partitions =
                    v.parse().ok().filter(|n: &i32| *n >= 1).ok_or_else(|| {
                        format!("--default-partitions {v:?}: expected an integer >= 1")
                    })?;
            }
            "--log-level" => log_level = Some(take("--log-level")?),
            other => return Err(format!("unknown argument {other:?} (see --help)")),
        }
    }
    if in_memory && config.data_dir.is_some() {
        return Err("--in-memory and --data-dir exclude each other".into());
    }
    Ok(Some(Args { config, log_level }))
}

async fn wait_for_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = tokio::signal::ctrl_c() => {}
                    _ = term.recv() => {}
                }
            }
            Err(_) => {
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}

fn main() -> ExitCode {
    let args = match parse_args(std::env::args().skip(1)) {
        Ok(Some(a)) => a,
        Ok(None) => return ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("baton-broker: {e}");
            return ExitCode::from(2);
        }
    };
    let filter = match args.log_level {
        Some(level) => tracing_subscriber::EnvFilter::try_new(&level),
        None => Ok(tracing_subscriber::EnvFilter::try_from_default_env()
            .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"))),
    };
    let filter = match filter {
        Ok(f) => f,
        Err(e) => {
            eprintln!("baton-broker: --log-level: {e}");
            return ExitCode::from(2);
        }
    };
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("baton-broker: cannot start runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    runtime.block_on(async move {
        let broker = match Broker::start(args.config).await {
            Ok(b) => b,
            Err(e) => {
                eprintln!("baton-broker: {e}");
                return ExitCode::FAILURE;
            }
        };
        println!("baton-broker listening on {}", broker.local_addr());
        wait_for_signal().await;
        tracing::info!("signal received, shutting down");
        broker.shutdown().await;
        ExitCode::SUCCESS
    })
}
