//! `baton-broker`: runs a single Kafka-protocol broker (the default), or one role of a
//! replicated cluster (`controller`, `node`), or a whole cluster in one process
//! (`cluster`), until SIGINT or SIGTERM.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use baton_broker::cluster::{Cluster, ControllerOptions, ControllerServer, Node, NodeOptions};
use baton_broker::{properties, Broker, BrokerConfig, BrokerLimits};

const CLUSTER_USAGE: &str = "\
Usage:
  baton-broker controller [--listen ADDR] [--data-dir DIR] [--session-timeout-ms N]
                          [--default-partitions N] [--default-replication-factor N]
                          [LIMITS]
  baton-broker node --id N --controller ADDR [--listen ADDR] [--data-dir DIR]
                    [--advertised-host HOST] [--min-insync-replicas N]
                    [--replica-lag-time-max-ms N] [--rack RACK]
                    [--replica-selector CLASS] [TXN-LIMITS]
  baton-broker cluster [--brokers N] [--data-dir DIR] [--listen-ip IP] [--base-port PORT]
                       [--advertised-host HOST] [--min-insync-replicas N]
                       [--session-timeout-ms N] [--racks R1,R2,...]
                       [--replica-selector CLASS] [LIMITS] [TXN-LIMITS]

  controller  the cluster's controller: its metadata log lives in DIR/metadata.log
              (in memory without --data-dir); listens on ADDR (default 127.0.0.1:9093)
  node        a broker node with id N that registers with the controller at ADDR;
              SIGTERM/SIGINT runs a controlled shutdown (leaderships move away
              first); SIGKILL is a crash. Default listen address 127.0.0.1:9092.
  cluster     a controller and N nodes (default 3) in this process, data in
              DIR/controller and DIR/node-<i>; nodes listen on BASE-PORT + i - 1 and the
              controller on BASE-PORT + N (default 0: free ports). Prints the
              bootstrap servers.
  --rack RACK / --racks R1,R2,...  the node's rack / node i's rack (broker.rack)
  --replica-selector CLASS  org.apache.kafka.common.replica.RackAwareReplicaSelector
              sends consumers with a rack to an in-sync follower of their rack
              (KIP-392); default: the leader only
LIMITS (controller, cluster; checked by the controller, as on a single broker):
  --max-partitions N  --max-topics N  --max-partitions-per-request N
TXN-LIMITS (node, cluster; checked by each node, as on a single broker):
  --max-aborted-txns-per-partition N  --max-transactional-ids N
  --max-partitions-per-transaction N  --max-pending-txn-offsets N
All modes take --log-level LEVEL.
";

const USAGE: &str = "\
Usage: baton-broker [OPTIONS]
       baton-broker controller|node|cluster [OPTIONS]   (replicated cluster; see
                                                     `baton-broker cluster --help`)

Options:
  --config FILE            a Kafka server.properties file (Apache Kafka's property
                           names: listeners, advertised.listeners,
                           listener.security.protocol.map, sasl.enabled.mechanisms,
                           ssl.keystore.* / ssl.truststore.* (PEM), ssl.client.auth,
                           listener.name.<l>.plain.sasl.jaas.config, scram.users,
                           log.dirs, node.id, num.partitions, ...; see the
                           baton_broker::properties docs); flags override it
  --listen ADDR            address of the first listener (default 127.0.0.1:9092)
  --data-dir DIR           keep topics and logs in DIR
  --in-memory              keep everything in memory (the default without --data-dir)
  --advertised-host HOST   host name given to clients (default: the listen IP)
  --node-id N              this node's id (default 0)
  --auto-create-topics     create unknown topics on Metadata and Produce
  --default-partitions N   partitions of auto-created topics (default 1)
  --max-partitions N       most partitions of all topics (default 100000)
  --max-topics N           most topics (default 10000)
  --max-partitions-per-request N
                           most partitions one CreateTopics creates (default 10000)
  --max-aborted-txns-per-partition N
                           most aborted transactions indexed per partition
                           (default 100000; the oldest are dropped)
  --max-transactional-ids N
                           most transactional ids a coordinator holds (default 10000)
  --max-partitions-per-transaction N
                           most partitions in one transaction (default 10000)
  --max-pending-txn-offsets N
                           most transactional offsets pending at a group
                           coordinator (default 100000)
  --log-level LEVEL        tracing filter, e.g. info or baton_broker=debug (RUST_LOG also works)
  -h, --help               print this help
  -V, --version            print the version
";

struct Args {
    config: BrokerConfig,
    log_level: Option<String>,
}

/// The configuration in a `--config` properties file, over `base`.
fn config_file(path: &str, base: BrokerConfig) -> Result<BrokerConfig, String> {
    let text = std::fs::read(path).map_err(|e| format!("--config {path}: {e}"))?;
    if text.len() > properties::MAX_PROPERTIES_BYTES {
        return Err(format!(
            "--config {path}: larger than {} bytes",
            properties::MAX_PROPERTIES_BYTES
        ));
    }
    let text = String::from_utf8(text).map_err(|_| format!("--config {path}: not UTF-8"))?;
    let props = properties::parse(&text).map_err(|e| format!("--config {path}: {e}"))?;
    properties::broker_config(&props, base, &mut |p| std::fs::read(p))
        .map_err(|e| format!("--config {path}: {e}"))
}

fn parse_args(mut args: impl Iterator<Item = String>) -> Result<Option<Args>, String> {
    let mut config = BrokerConfig {
        listen: "127.0.0.1:9092".parse().map_err(|e| format!("{e}"))?,
        ..BrokerConfig::default()
    };
    // The file first, wherever `--config` stands: the other flags override it.
    let mut rest = Vec::new();
    let mut file = None;
    while let Some(arg) = args.next() {
        if arg == "--config" {
            file = Some(value("--config", args.next())?);
        } else if let Some(path) = arg.strip_prefix("--config=") {
            file = Some(path.to_owned());
        } else {
            rest.push(arg);
        }
    }
    if let Some(path) = &file {
        config = config_file(path, config)?;
    }
    let file_data_dir = config.data_dir.is_some() && file.is_some();
    let mut cli_data_dir = false;
    let mut args = rest.into_iter();
    let mut log_level = None;
    let mut in_memory = false;
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
            "--data-dir" => {
                config.data_dir = Some(PathBuf::from(take("--data-dir")?));
                cli_data_dir = true;
            }
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
            "--max-partitions" => {
                config.limits.max_partitions = limit("--max-partitions", &take(&flag)?)?
            }
            "--max-topics" => config.limits.max_topics = limit("--max-topics", &take(&flag)?)?,
            "--max-partitions-per-request" => {
                config.limits.max_partitions_per_request =
                    limit("--max-partitions-per-request", &take(&flag)?)?
            }
            f if TXN_LIMIT_FLAGS.contains(&f) => {
                *txn_limit(&mut config.limits, f) = limit(f, &take(f)?)?
            }
            "--log-level" => log_level = Some(take("--log-level")?),
            other => return Err(format!("unknown argument {other:?} (see --help)")),
        }
    }
    if in_memory && cli_data_dir {
        return Err("--in-memory and --data-dir exclude each other".into());
    }
    if in_memory && file_data_dir {
        // The flag overrides the file's log.dirs.
        config.data_dir = None;
    }
    Ok(Some(Args { config, log_level }))
}

fn value(flag: &str, v: Option<String>) -> Result<String, String> {
    v.ok_or_else(|| format!("{flag} needs a value"))
}

/// A limit flag's value: an integer >= 1.
fn limit(flag: &str, v: &str) -> Result<usize, String> {
    v.parse()
        .ok()
        .filter(|n: &usize| *n >= 1)
        .ok_or_else(|| format!("{flag} {v:?}: expected an integer >= 1"))
}

/// The flags of the limits each node checks for transactions (`BrokerLimits`).
const TXN_LIMIT_FLAGS: [&str; 4] = [
    "--max-aborted-txns-per-partition",
    "--max-transactional-ids",
    "--max-partitions-per-transaction",
    "--max-pending-txn-offsets",
];

/// The field of `limits` that the flag `flag` (one of [`TXN_LIMIT_FLAGS`]) sets.
fn txn_limit<'a>(limits: &'a mut BrokerLimits, flag: &str) -> &'a mut usize {
    match flag {
        "--max-aborted-txns-per-partition" => &mut limits.max_aborted_txns_per_partition,
        "--max-transactional-ids" => &mut limits.max_transactional_ids,
        "--max-partitions-per-transaction" => &mut limits.max_partitions_per_transaction,
        _ => &mut limits.max_pending_txn_offsets,
    }
}

/// Applies the cluster modes' [`TXN_LIMIT_FLAGS`] to `limits`.
fn apply_txn_limits(flags: &Flags, limits: &mut BrokerLimits) -> Result<(), String> {
    for flag in TXN_LIMIT_FLAGS {
        if let Some(v) = flags.get(flag) {
            *txn_limit(limits, flag) = limit(flag, v)?;
        }
    }
    Ok(())
}

/// `--replica-selector CLASS` (Kafka's `replica.selector.class`).
fn replica_selector(flags: &Flags) -> Result<baton_broker::ReplicaSelector, String> {
    match flags.get("--replica-selector") {
        None => Ok(baton_broker::ReplicaSelector::LeaderOnly),
        Some(c) => baton_broker::ReplicaSelector::from_class_name(c).ok_or_else(|| {
            format!(
                "--replica-selector {c}: only {} (or empty, for the leader only)",
                baton_broker::replica_selector::RACK_AWARE_CLASS
            )
        }),
    }
}

/// The topic and partition limits of the cluster modes' flags, over the defaults.
fn cluster_limits(flags: &Flags) -> Result<BrokerLimits, String> {
    let mut limits = BrokerLimits::default();
    for (flag, field) in [
        ("--max-partitions", &mut limits.max_partitions),
        ("--max-topics", &mut limits.max_topics),
        (
            "--max-partitions-per-request",
            &mut limits.max_partitions_per_request,
        ),
    ] {
        if let Some(v) = flags.get(flag) {
            *field = limit(flag, v)?;
        }
    }
    Ok(limits)
}

/// Prints a line announcing where the process listens. Whoever started the process
/// may stop reading its stdout once it has the address it wanted (a test reading
/// the first line, `| head -1`): the write then fails with a broken pipe, and the
/// process keeps serving instead of panicking as `println!` would.
fn announce(line: std::fmt::Arguments<'_>) {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    if let Err(e) = out
        .write_fmt(line)
        .and_then(|()| out.write_all(b"\n"))
        .and_then(|()| out.flush())
    {
        tracing::info!(error = %e, "stdout is closed; the address is not announced");
    }
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

/// Flags of the cluster modes, parsed loosely into `--key value` pairs.
struct Flags {
    pairs: Vec<(String, Option<String>)>,
}

impl Flags {
    fn parse(args: impl Iterator<Item = String>, switches: &[&str]) -> Result<Flags, String> {
        let mut pairs = Vec::new();
        let mut args = args.peekable();
        while let Some(arg) = args.next() {
            if !arg.starts_with("--") && arg != "-h" {
                return Err(format!("unexpected argument {arg:?} (see --help)"));
            }
            if let Some((k, v)) = arg.split_once('=') {
                pairs.push((k.to_owned(), Some(v.to_owned())));
            } else if switches.contains(&arg.as_str()) || arg == "-h" || arg == "--help" {
                pairs.push((arg, None));
            } else {
                let v = args.next().ok_or_else(|| format!("{arg} needs a value"))?;
                pairs.push((arg, Some(v)));
            }
        }
        Ok(Flags { pairs })
    }

    fn has(&self, k: &str) -> bool {
        self.pairs.iter().any(|(key, _)| key == k)
    }

    fn get(&self, k: &str) -> Option<&str> {
        self.pairs
            .iter()
            .rev()
            .find(|(key, _)| key == k)
            .and_then(|(_, v)| v.as_deref())
    }

    fn parse_or<T: std::str::FromStr>(&self, k: &str, default: T) -> Result<T, String> {
        match self.get(k) {
            None => Ok(default),
            Some(v) => v.parse().map_err(|_| format!("{k} {v:?}: invalid value")),
        }
    }

    fn check_known(&self, known: &[&str]) -> Result<(), String> {
        for (k, _) in &self.pairs {
            if !known.contains(&k.as_str()) && k != "--log-level" && k != "-h" && k != "--help" {
                return Err(format!("unknown argument {k:?} (see --help)"));
            }
        }
        Ok(())
    }
}

fn init_logging(level: Option<&str>) -> Result<(), String> {
    let filter = match level {
        Some(level) => tracing_subscriber::EnvFilter::try_new(level),
        None => Ok(tracing_subscriber::EnvFilter::try_from_default_env()
            .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"))),
    }
    .map_err(|e| format!("--log-level: {e}"))?;
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
    Ok(())
}

fn runtime() -> Result<tokio::runtime::Runtime, String> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start runtime: {e}"))
}

fn run_cluster_mode(mode: &str, args: impl Iterator<Item = String>) -> Result<(), String> {
    let flags = Flags::parse(args, &[])?;
    if flags.has("--help") || flags.has("-h") {
        print!("{CLUSTER_USAGE}");
        return Ok(());
    }
    let addr = |k: &str, default: &str| -> Result<SocketAddr, String> {
        let v = flags.get(k).unwrap_or(default);
        v.parse()
            .map_err(|e| format!("{k} {v:?}: {e} (expected IP:PORT)"))
    };
    match mode {
        "controller" => {
            flags.check_known(&[
                "--listen",
                "--data-dir",
                "--session-timeout-ms",
                "--default-partitions",
                "--default-replication-factor",
                "--max-partitions",
                "--max-topics",
                "--max-partitions-per-request",
            ])?;
            let mut opts = ControllerOptions {
                listen: addr("--listen", "127.0.0.1:9093")?,
                data_dir: flags.get("--data-dir").map(PathBuf::from),
                default_num_partitions: flags.parse_or("--default-partitions", 1)?,
                default_replication_factor: flags.parse_or("--default-replication-factor", 3)?,
                limits: cluster_limits(&flags)?,
                ..ControllerOptions::default()
            };
            opts.config.session_timeout_ms =
                flags.parse_or("--session-timeout-ms", opts.config.session_timeout_ms)?;
            init_logging(flags.get("--log-level"))?;
            runtime()?.block_on(async move {
                let c = ControllerServer::start(opts)
                    .await
                    .map_err(|e| e.to_string())?;
                announce(format_args!(
                    "baton-broker controller listening on {}",
                    c.local_addr()
                ));
                wait_for_signal().await;
                tracing::info!("signal received, stopping the controller");
                c.shutdown().await;
                Ok(())
            })
        }
        "node" => {
            flags.check_known(&[
                "--id",
                "--controller",
                "--listen",
                "--data-dir",
                "--advertised-host",
                "--min-insync-replicas",
                "--replica-lag-time-max-ms",
                "--cluster-id",
                "--rack",
                "--replica-selector",
                TXN_LIMIT_FLAGS[0],
                TXN_LIMIT_FLAGS[1],
                TXN_LIMIT_FLAGS[2],
                TXN_LIMIT_FLAGS[3],
            ])?;
            let id: i32 = flags
                .get("--id")
                .ok_or("--id is required")?
                .parse()
                .ok()
                .filter(|n| *n >= 0)
                .ok_or("--id: expected a non-negative integer")?;
            let controller = flags
                .get("--controller")
                .ok_or("--controller is required")?
                .parse::<SocketAddr>()
                .map_err(|e| format!("--controller: {e} (expected IP:PORT)"))?;
            let mut opts = NodeOptions::new(id, controller);
            opts.broker.listen = addr("--listen", "127.0.0.1:9092")?;
            opts.broker.data_dir = flags.get("--data-dir").map(PathBuf::from);
            opts.broker.advertised_host = flags.get("--advertised-host").map(str::to_owned);
            opts.default_min_insync_replicas = flags.parse_or("--min-insync-replicas", 1)?;
            opts.replica_lag_time_max_ms =
                flags.parse_or("--replica-lag-time-max-ms", opts.replica_lag_time_max_ms)?;
            apply_txn_limits(&flags, &mut opts.broker.limits)?;
            opts.broker.rack = flags
                .get("--rack")
                .filter(|r| !r.is_empty())
                .map(str::to_owned);
            opts.broker.replica_selector = replica_selector(&flags)?;
            if let Some(c) = flags.get("--cluster-id") {
                opts.cluster_id = c.to_owned();
            }
            init_logging(flags.get("--log-level"))?;
            runtime()?.block_on(async move {
                let node = Node::start(opts).await.map_err(|e| e.to_string())?;
                announce(format_args!(
                    "baton-broker node {id} listening on {}",
                    node.local_addr()
                ));
                wait_for_signal().await;
                tracing::info!("signal received, controlled shutdown");
                node.stop().await;
                Ok(())
            })
        }
        "cluster" => {
            flags.check_known(&[
                "--brokers",
                "--data-dir",
                "--listen-ip",
                "--base-port",
                "--advertised-host",
                "--min-insync-replicas",
                "--session-timeout-ms",
                "--max-partitions",
                "--max-topics",
                "--max-partitions-per-request",
                "--racks",
                "--replica-selector",
                TXN_LIMIT_FLAGS[0],
                TXN_LIMIT_FLAGS[1],
                TXN_LIMIT_FLAGS[2],
                TXN_LIMIT_FLAGS[3],
            ])?;
            let mut b = Cluster::builder()
                .brokers(flags.parse_or("--brokers", 3usize)?)
                .listen_ip(flags.parse_or("--listen-ip", std::net::IpAddr::from([127, 0, 0, 1]))?)
                .base_port(flags.parse_or("--base-port", 0u16)?)
                .default_min_insync_replicas(flags.parse_or("--min-insync-replicas", 1usize)?)
                .session_timeout(Duration::from_millis(
                    flags.parse_or("--session-timeout-ms", 6_000u64)?,
                ));
            let mut limits = cluster_limits(&flags)?;
            apply_txn_limits(&flags, &mut limits)?;
            b = b.limits(limits);
            b = b.replica_selector(replica_selector(&flags)?);
            if let Some(racks) = flags.get("--racks") {
                for (i, r) in racks.split(',').map(str::trim).enumerate() {
                    if !r.is_empty() {
                        b = b.rack(i as i32 + 1, r);
                    }
                }
            }
            if let Some(d) = flags.get("--data-dir") {
                b = b.data_dir(d);
            }
            if let Some(h) = flags.get("--advertised-host") {
                b = b.advertised_host(h);
            }
            init_logging(flags.get("--log-level"))?;
            runtime()?.block_on(async move {
                let cluster = b.start().await.map_err(|e| e.to_string())?;
                announce(format_args!(
                    "baton-broker cluster bootstrap: {}",
                    cluster.bootstrap()
                ));
                announce(format_args!(
                    "baton-broker cluster controller: {}",
                    cluster.controller_addr()
                ));
                wait_for_signal().await;
                tracing::info!("signal received, stopping the cluster");
                cluster.shutdown().await;
                Ok(())
            })
        }
        _ => Err(format!("unknown mode {mode}")),
    }
}

fn main() -> ExitCode {
    let mut argv = std::env::args().skip(1).peekable();
    if let Some(mode) = argv
        .peek()
        .filter(|m| matches!(m.as_str(), "controller" | "node" | "cluster"))
        .cloned()
    {
        argv.next();
        return match run_cluster_mode(&mode, argv) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("baton-broker {mode}: {e}");
                ExitCode::from(2)
            }
        };
    }
    let args = match parse_args(argv) {
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
        announce(format_args!(
            "baton-broker listening on {}",
            broker.local_addr()
        ));
        for (name, addr) in broker.listener_addrs() {
            announce(format_args!("baton-broker listener {name} on {addr}"));
        }
        wait_for_signal().await;
        tracing::info!("signal received, shutting down");
        broker.shutdown().await;
        ExitCode::SUCCESS
    })
}
