//! `baton-broker`: runs a single Kafka-protocol broker (the default), or one role of a
//! replicated cluster (`controller`, `node`), or a whole cluster in one process
//! (`cluster`), until SIGINT or SIGTERM. The command line is clap's (derive); a
//! `--config` file of Kafka properties is read first and the flags override it.

use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};

use baton_broker::cluster::{Cluster, ControllerOptions, ControllerServer, Node, NodeOptions};
use baton_broker::{properties, Broker, BrokerConfig, BrokerLimits, ReplicaSelector};

/// The single broker's command line, and the cluster modes as subcommands.
#[derive(Debug, Parser)]
#[command(
    name = "baton-broker",
    version,
    about = "Baton's Kafka-protocol broker: one node (the default), or a replicated \
             cluster's controller, node, or all of it in one process",
    args_conflicts_with_subcommands = true,
    after_help = "Examples:
  baton-broker --listen 127.0.0.1:9092 --data-dir /tmp/baton
  baton-broker --config server.properties --listen 0.0.0.0:9092
  baton-broker cluster --brokers 3 --data-dir /tmp/baton-cluster

Exit status: 0 after SIGINT/SIGTERM, 1 if the broker cannot start, 2 for bad
arguments or a bad --config file."
)]
struct Cli {
    #[command(subcommand)]
    mode: Option<Mode>,
    #[command(flatten)]
    single: SingleArgs,
}

/// The replicated cluster's roles.
#[derive(Debug, Subcommand)]
enum Mode {
    /// The cluster's controller: its metadata log lives in DIR/metadata.log (in
    /// memory without --data-dir).
    Controller(ControllerArgs),
    /// A broker node that registers with the controller; SIGTERM/SIGINT runs a
    /// controlled shutdown (leaderships move away first), SIGKILL is a crash.
    Node(NodeArgs),
    /// A controller and N nodes in this process, data in DIR/controller and
    /// DIR/node-<i>; nodes listen on BASE-PORT + i - 1 and the controller on
    /// BASE-PORT + N (0: free ports). Prints the bootstrap servers.
    Cluster(ClusterArgs),
}

/// A single broker that leads every partition.
#[derive(Debug, Args)]
struct SingleArgs {
    /// A Kafka server.properties file (Apache Kafka's property names: listeners,
    /// advertised.listeners, listener.security.protocol.map,
    /// sasl.enabled.mechanisms, ssl.keystore.* / ssl.truststore.* (PEM),
    /// ssl.client.auth, listener.name.<l>.plain.sasl.jaas.config, scram.users,
    /// log.dirs, node.id, num.partitions, ...; see the baton_broker::properties
    /// docs); the flags override it.
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// Address of the first listener [default: 127.0.0.1:9092].
    #[arg(long, value_name = "ADDR")]
    listen: Option<SocketAddr>,
    /// Keeps topics and logs in DIR.
    #[arg(long, value_name = "DIR", conflicts_with = "in_memory")]
    data_dir: Option<PathBuf>,
    /// Keeps everything in memory (the default without --data-dir; overrides the
    /// file's log.dirs).
    #[arg(long)]
    in_memory: bool,
    /// Host name given to clients (default: the listen IP).
    #[arg(long, value_name = "HOST")]
    advertised_host: Option<String>,
    /// This node's id [default: 0].
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(i32).range(0..))]
    node_id: Option<i32>,
    /// Creates unknown topics on Metadata and Produce.
    #[arg(long)]
    auto_create_topics: bool,
    /// Partitions of auto-created topics [default: 1].
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(i32).range(1..))]
    default_partitions: Option<i32>,
    #[command(flatten)]
    limits: TopicLimitArgs,
    #[command(flatten)]
    txn_limits: TxnLimitArgs,
    #[command(flatten)]
    log: LogArgs,
}

/// The topic and partition limits (checked by a single broker, or by the
/// cluster's controller).
#[derive(Debug, Args)]
struct TopicLimitArgs {
    /// Most partitions of all topics [default: 100000].
    #[arg(long, value_name = "N", value_parser = limit)]
    max_partitions: Option<usize>,
    /// Most topics [default: 10000].
    #[arg(long, value_name = "N", value_parser = limit)]
    max_topics: Option<usize>,
    /// Most partitions one CreateTopics creates [default: 10000].
    #[arg(long, value_name = "N", value_parser = limit)]
    max_partitions_per_request: Option<usize>,
}

/// The transaction limits each node checks.
#[derive(Debug, Args)]
struct TxnLimitArgs {
    /// Most aborted transactions indexed per partition (the oldest are dropped)
    /// [default: 100000].
    #[arg(long, value_name = "N", value_parser = limit)]
    max_aborted_txns_per_partition: Option<usize>,
    /// Most transactional ids a coordinator holds [default: 10000].
    #[arg(long, value_name = "N", value_parser = limit)]
    max_transactional_ids: Option<usize>,
    /// Most partitions in one transaction [default: 10000].
    #[arg(long, value_name = "N", value_parser = limit)]
    max_partitions_per_transaction: Option<usize>,
    /// Most transactional offsets pending at a group coordinator [default: 100000].
    #[arg(long, value_name = "N", value_parser = limit)]
    max_pending_txn_offsets: Option<usize>,
}

/// Logging and metrics, in every mode.
#[derive(Debug, Args)]
struct LogArgs {
    /// Tracing filter, e.g. info or baton_broker=debug (RUST_LOG also works).
    #[arg(long, value_name = "LEVEL")]
    log_level: Option<String>,
    /// Serves Prometheus metrics (GET /metrics) on ADDR; off by default. In the
    /// cluster mode node i serves on PORT + i - 1 and the controller on PORT + N
    /// (0: free ports).
    #[arg(long, value_name = "ADDR")]
    metrics_listen: Option<SocketAddr>,
}

/// The line announcing a metrics endpoint.
fn metrics_line(who: &str, addr: Option<SocketAddr>) -> Option<String> {
    addr.map(|a| format!("{who} metrics on http://{a}/metrics"))
}

/// `baton-broker controller`.
#[derive(Debug, Args)]
struct ControllerArgs {
    /// The controller's listen address.
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:9093")]
    listen: SocketAddr,
    /// Keeps the metadata log in DIR/metadata.log.
    #[arg(long, value_name = "DIR")]
    data_dir: Option<PathBuf>,
    /// How long a node may go without a heartbeat before it is fenced
    /// [default: 9000].
    #[arg(long, value_name = "MS")]
    session_timeout_ms: Option<u64>,
    /// Partitions of topics created without a count.
    #[arg(long, value_name = "N", default_value_t = 1)]
    default_partitions: i32,
    /// Replication factor of topics created without one.
    #[arg(long, value_name = "N", default_value_t = 3)]
    default_replication_factor: i16,
    #[command(flatten)]
    limits: TopicLimitArgs,
    #[command(flatten)]
    log: LogArgs,
}

/// `baton-broker node`.
#[derive(Debug, Args)]
struct NodeArgs {
    /// This node's id.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(i32).range(0..))]
    id: i32,
    /// The controller's address.
    #[arg(long, value_name = "ADDR")]
    controller: SocketAddr,
    /// The node's listen address.
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:9092")]
    listen: SocketAddr,
    /// Keeps topics and logs in DIR.
    #[arg(long, value_name = "DIR")]
    data_dir: Option<PathBuf>,
    /// Host name given to clients (default: the listen IP).
    #[arg(long, value_name = "HOST")]
    advertised_host: Option<String>,
    /// min.insync.replicas of topics that set none.
    #[arg(long, value_name = "N", default_value_t = 1)]
    min_insync_replicas: usize,
    /// How long a follower may lag before it leaves the ISR
    /// (replica.lag.time.max.ms) [default: 10000].
    #[arg(long, value_name = "MS")]
    replica_lag_time_max_ms: Option<u64>,
    /// The cluster id the node reports.
    #[arg(long, value_name = "ID")]
    cluster_id: Option<String>,
    /// The node's rack (broker.rack).
    #[arg(long, value_name = "RACK")]
    rack: Option<String>,
    #[command(flatten)]
    selector: SelectorArgs,
    #[command(flatten)]
    txn_limits: TxnLimitArgs,
    #[command(flatten)]
    log: LogArgs,
}

/// `baton-broker cluster`.
#[derive(Debug, Args)]
struct ClusterArgs {
    /// Number of broker nodes.
    #[arg(long, value_name = "N", default_value_t = 3)]
    brokers: usize,
    /// Keeps the controller's and each node's data under DIR.
    #[arg(long, value_name = "DIR")]
    data_dir: Option<PathBuf>,
    /// The IP every node and the controller listen on.
    #[arg(long, value_name = "IP", default_value = "127.0.0.1")]
    listen_ip: IpAddr,
    /// Node i listens on BASE-PORT + i - 1, the controller on BASE-PORT + N
    /// (0: free ports).
    #[arg(long, value_name = "PORT", default_value_t = 0)]
    base_port: u16,
    /// Host name given to clients (default: the listen IP).
    #[arg(long, value_name = "HOST")]
    advertised_host: Option<String>,
    /// min.insync.replicas of topics that set none.
    #[arg(long, value_name = "N", default_value_t = 1)]
    min_insync_replicas: usize,
    /// How long a node may go without a heartbeat before it is fenced.
    #[arg(long, value_name = "MS", default_value_t = 6_000)]
    session_timeout_ms: u64,
    /// Node i's rack (broker.rack), in node order: R1,R2,...
    #[arg(long, value_name = "R1,R2,...")]
    racks: Option<String>,
    #[command(flatten)]
    selector: SelectorArgs,
    #[command(flatten)]
    limits: TopicLimitArgs,
    #[command(flatten)]
    txn_limits: TxnLimitArgs,
    #[command(flatten)]
    log: LogArgs,
}

/// `--replica-selector` (Kafka's `replica.selector.class`).
#[derive(Debug, Args)]
struct SelectorArgs {
    /// org.apache.kafka.common.replica.RackAwareReplicaSelector sends consumers
    /// with a rack to an in-sync follower of their rack (KIP-392); default (or
    /// empty): the leader only.
    #[arg(long, value_name = "CLASS", value_parser = replica_selector)]
    replica_selector: Option<ReplicaSelector>,
}

/// A limit: an integer >= 1.
fn limit(v: &str) -> Result<usize, String> {
    v.parse()
        .ok()
        .filter(|n: &usize| *n >= 1)
        .ok_or_else(|| "expected an integer >= 1".to_owned())
}

fn replica_selector(c: &str) -> Result<ReplicaSelector, String> {
    ReplicaSelector::from_class_name(c).ok_or_else(|| {
        format!(
            "only {} (or empty, for the leader only)",
            baton_broker::replica_selector::RACK_AWARE_CLASS
        )
    })
}

impl TopicLimitArgs {
    /// Sets the limits given on `limits`.
    fn apply(&self, limits: &mut BrokerLimits) {
        for (flag, field) in [
            (self.max_partitions, &mut limits.max_partitions),
            (self.max_topics, &mut limits.max_topics),
            (
                self.max_partitions_per_request,
                &mut limits.max_partitions_per_request,
            ),
        ] {
            if let Some(v) = flag {
                *field = v;
            }
        }
    }
}

impl TxnLimitArgs {
    /// Sets the limits given on `limits`.
    fn apply(&self, limits: &mut BrokerLimits) {
        for (flag, field) in [
            (
                self.max_aborted_txns_per_partition,
                &mut limits.max_aborted_txns_per_partition,
            ),
            (
                self.max_transactional_ids,
                &mut limits.max_transactional_ids,
            ),
            (
                self.max_partitions_per_transaction,
                &mut limits.max_partitions_per_transaction,
            ),
            (
                self.max_pending_txn_offsets,
                &mut limits.max_pending_txn_offsets,
            ),
        ] {
            if let Some(v) = flag {
                *field = v;
            }
        }
    }
}

impl SelectorArgs {
    fn selector(&self) -> ReplicaSelector {
        self.replica_selector.unwrap_or(ReplicaSelector::LeaderOnly)
    }
}

/// The configuration in a `--config` properties file, over `base`.
fn config_file(path: &std::path::Path, base: BrokerConfig) -> Result<BrokerConfig, String> {
    let shown = path.display();
    let text = std::fs::read(path).map_err(|e| format!("--config {shown}: {e}"))?;
    if text.len() > properties::MAX_PROPERTIES_BYTES {
        return Err(format!(
            "--config {shown}: larger than {} bytes",
            properties::MAX_PROPERTIES_BYTES
        ));
    }
    let text = String::from_utf8(text).map_err(|_| format!("--config {shown}: not UTF-8"))?;
    let props = properties::parse(&text).map_err(|e| format!("--config {shown}: {e}"))?;
    properties::broker_config(&props, base, &mut |p| std::fs::read(p))
        .map_err(|e| format!("--config {shown}: {e}"))
}

/// The single broker's configuration: defaults, then the `--config` file, then
/// the flags.
fn single_config(args: &SingleArgs) -> Result<BrokerConfig, String> {
    let mut config = BrokerConfig {
        listen: SocketAddr::from(([127, 0, 0, 1], 9092)),
        ..BrokerConfig::default()
    };
    if let Some(path) = &args.config {
        config = config_file(path, config)?;
    }
    if let Some(listen) = args.listen {
        config.listen = listen;
    }
    if let Some(dir) = &args.data_dir {
        config.data_dir = Some(dir.clone());
    }
    if args.in_memory {
        config.data_dir = None;
    }
    if let Some(host) = &args.advertised_host {
        config.advertised_host = Some(host.clone());
    }
    if let Some(id) = args.node_id {
        config.node_id = id;
    }
    if args.auto_create_topics {
        config.auto_create_topics = true;
    }
    if let Some(n) = args.default_partitions {
        config.default_num_partitions = n;
    }
    args.limits.apply(&mut config.limits);
    args.txn_limits.apply(&mut config.limits);
    if let Some(addr) = args.log.metrics_listen {
        config.metrics_listen = Some(addr);
    }
    Ok(config)
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

/// Why the process stops early.
enum Failure {
    /// Bad arguments or configuration (exit status 2).
    Usage(String),
    /// The broker could not start (exit status 1).
    Start(String),
}

fn run_controller(a: ControllerArgs) -> Result<(), Failure> {
    let mut opts = ControllerOptions {
        listen: a.listen,
        data_dir: a.data_dir,
        default_num_partitions: a.default_partitions,
        default_replication_factor: a.default_replication_factor,
        metrics_listen: a.log.metrics_listen,
        ..ControllerOptions::default()
    };
    a.limits.apply(&mut opts.limits);
    if let Some(ms) = a.session_timeout_ms {
        opts.config.session_timeout_ms = ms;
    }
    serve(
        &a.log,
        || ControllerServer::start(opts),
        |c| {
            let mut lines = vec![format!(
                "baton-broker controller listening on {}",
                c.local_addr()
            )];
            lines.extend(metrics_line("baton-broker controller", c.metrics_addr()));
            lines
        },
        "signal received, stopping the controller",
        |c| c.shutdown(),
    )
}

fn run_node(a: NodeArgs) -> Result<(), Failure> {
    let id = a.id;
    let mut opts = NodeOptions::new(id, a.controller);
    opts.broker.listen = a.listen;
    opts.broker.data_dir = a.data_dir;
    opts.broker.advertised_host = a.advertised_host;
    opts.broker.metrics_listen = a.log.metrics_listen;
    opts.default_min_insync_replicas = a.min_insync_replicas;
    if let Some(ms) = a.replica_lag_time_max_ms {
        opts.replica_lag_time_max_ms = ms;
    }
    a.txn_limits.apply(&mut opts.broker.limits);
    opts.broker.rack = a.rack.filter(|r| !r.is_empty());
    opts.broker.replica_selector = a.selector.selector();
    if let Some(c) = a.cluster_id {
        opts.cluster_id = c;
    }
    serve(
        &a.log,
        || Node::start(opts),
        |node| {
            let mut lines = vec![format!(
                "baton-broker node {id} listening on {}",
                node.local_addr()
            )];
            lines.extend(metrics_line(
                &format!("baton-broker node {id}"),
                node.metrics_addr(),
            ));
            lines
        },
        "signal received, controlled shutdown",
        |node| node.stop(),
    )
}

fn run_cluster(a: ClusterArgs) -> Result<(), Failure> {
    let mut b = Cluster::builder()
        .brokers(a.brokers)
        .listen_ip(a.listen_ip)
        .base_port(a.base_port)
        .default_min_insync_replicas(a.min_insync_replicas)
        .session_timeout(Duration::from_millis(a.session_timeout_ms));
    let mut limits = BrokerLimits::default();
    a.limits.apply(&mut limits);
    a.txn_limits.apply(&mut limits);
    b = b.limits(limits).replica_selector(a.selector.selector());
    if let Some(racks) = &a.racks {
        for (i, r) in racks.split(',').map(str::trim).enumerate() {
            if !r.is_empty() {
                b = b.rack(i as i32 + 1, r);
            }
        }
    }
    if let Some(d) = &a.data_dir {
        b = b.data_dir(d);
    }
    if let Some(h) = &a.advertised_host {
        b = b.advertised_host(h);
    }
    if let Some(m) = a.log.metrics_listen {
        b = b.metrics_listen(m);
    }
    serve(
        &a.log,
        || b.start(),
        |cluster| {
            let mut lines = vec![
                format!("baton-broker cluster bootstrap: {}", cluster.bootstrap()),
                format!(
                    "baton-broker cluster controller: {}",
                    cluster.controller_addr()
                ),
            ];
            for (id, addr) in cluster.metrics_addrs() {
                lines.extend(metrics_line(
                    &format!("baton-broker cluster node {id}"),
                    Some(addr),
                ));
            }
            let controller = cluster.controller_metrics_addr();
            lines.extend(metrics_line("baton-broker cluster controller", controller));
            lines
        },
        "signal received, stopping the cluster",
        |cluster| cluster.shutdown(),
    )
}

fn run_single(a: SingleArgs) -> Result<(), Failure> {
    let config = single_config(&a).map_err(Failure::Usage)?;
    serve(
        &a.log,
        || Broker::start(config),
        |broker| {
            let mut lines = vec![format!("baton-broker listening on {}", broker.local_addr())];
            for (name, addr) in broker.listener_addrs() {
                lines.push(format!("baton-broker listener {name} on {addr}"));
            }
            lines.extend(metrics_line("baton-broker", broker.metrics_addr()));
            lines
        },
        "signal received, shutting down",
        |broker| broker.shutdown(),
    )
}

/// Initialises logging, then on a multi-threaded runtime starts a server with
/// `start` (its error means the broker could not start), prints the
/// `announcement` lines, waits for a stop signal, logs `stopping` and stops the
/// server with `stop`.
fn serve<S, E, Started, Stopped>(
    log: &LogArgs,
    start: impl FnOnce() -> Started,
    announcement: impl FnOnce(&S) -> Vec<String>,
    stopping: &str,
    stop: impl FnOnce(S) -> Stopped,
) -> Result<(), Failure>
where
    E: std::fmt::Display,
    Started: std::future::Future<Output = Result<S, E>>,
    Stopped: std::future::Future<Output = ()>,
{
    init_logging(log.log_level.as_deref()).map_err(Failure::Usage)?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| Failure::Start(format!("cannot start runtime: {e}")))?;
    runtime.block_on(async move {
        let server = start().await.map_err(|e| Failure::Start(e.to_string()))?;
        for line in announcement(&server) {
            announce(format_args!("{line}"));
        }
        wait_for_signal().await;
        tracing::info!("{stopping}");
        stop(server).await;
        Ok(())
    })
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let _ = e.print();
            return if e.use_stderr() {
                ExitCode::from(2)
            } else {
                ExitCode::SUCCESS
            };
        }
    };
    let (name, result) = match cli.mode {
        None => ("baton-broker", run_single(cli.single)),
        Some(Mode::Controller(a)) => ("baton-broker controller", run_controller(a)),
        Some(Mode::Node(a)) => ("baton-broker node", run_node(a)),
        Some(Mode::Cluster(a)) => ("baton-broker cluster", run_cluster(a)),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(Failure::Usage(e)) => {
            eprintln!("{name}: {e}");
            ExitCode::from(2)
        }
        Err(Failure::Start(e)) => {
            eprintln!("{name}: {e}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn single(args: &[&str]) -> SingleArgs {
        let cli = Cli::try_parse_from(std::iter::once("baton-broker").chain(args.iter().copied()))
            .expect("parses");
        assert!(cli.mode.is_none());
        cli.single
    }

    #[test]
    fn the_command_line_is_consistent() {
        use clap::CommandFactory;
        Cli::command().debug_assert();
    }

    #[test]
    fn flags_override_the_config_file() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("server.properties");
        std::fs::write(
            &file,
            format!(
                "listeners=PLAINTEXT://127.0.0.1:0\nnum.partitions=4\nnode.id=7\nlog.dirs={}\n",
                dir.path().display()
            ),
        )
        .unwrap();
        let path = file.to_str().unwrap();
        let c = single_config(&single(&["--config", path])).unwrap();
        assert_eq!(
            (c.default_num_partitions, c.node_id),
            (4, 7),
            "the file alone"
        );
        assert_eq!(c.data_dir.as_deref(), Some(dir.path()));
        let c = single_config(&single(&[
            "--node-id",
            "3",
            "--config",
            path,
            "--default-partitions",
            "2",
            "--in-memory",
            "--listen",
            "127.0.0.1:19092",
        ]))
        .unwrap();
        assert_eq!((c.default_num_partitions, c.node_id), (2, 3));
        assert_eq!(c.data_dir, None, "--in-memory overrides log.dirs");
        assert_eq!(c.listen, SocketAddr::from(([127, 0, 0, 1], 19092)));
    }

    #[test]
    fn bad_values_and_mixed_modes_are_refused() {
        for args in [
            &["--in-memory", "--data-dir", "/tmp/x"][..],
            &["--max-topics", "0"],
            &["--node-id", "-1"],
            &["--default-partitions", "0"],
            &["--listen", "localhost"],
            &["cluster", "--listen", "127.0.0.1:1"],
            &["--listen", "127.0.0.1:1", "cluster"],
            &["node", "--id", "1"],
            &["controller", "--max-transactional-ids", "1"],
            &["cluster", "--replica-selector", "com.example.Nearest"],
        ] {
            let parsed =
                Cli::try_parse_from(std::iter::once("baton-broker").chain(args.iter().copied()));
            assert!(parsed.is_err(), "{args:?} parsed");
        }
    }
}
