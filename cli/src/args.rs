//! The command line: every command and option with its help (clap derive). Values
//! with their own syntax (`--from`, `--acks`, `-H`) are parsed here, so a bad one
//! is a usage error (exit status 2) that names the option.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};

/// The end of `baton --help`: examples and the exit statuses.
const MAIN_AFTER_HELP: &str = "\
Examples:
  export BATON_BOOTSTRAP=127.0.0.1:9092
  baton topics create events --partitions 3
  printf 'k1:hello\\nk2:world\\n' | baton produce events --key-delimiter :
  baton consume events --from earliest --exit-at-end --format json
  baton cluster describe

Exit status:
  0  success
  1  the operation failed (records not delivered, the broker refused a change,
     `check` found violations)
  2  usage error (an unknown option, a bad value)
  3  not found (an unknown topic, partition or group)
  4  the cluster could not be reached, or refused to authenticate";

/// `baton`: a command-line Kafka client.
#[derive(Debug, Parser)]
#[command(
    name = "baton",
    version,
    about = "A command-line Kafka client: produce, consume, manage topics and groups, check a topic's history",
    after_help = MAIN_AFTER_HELP,
    propagate_version = true
)]
pub struct Cli {
    /// How to reach the cluster.
    #[command(flatten)]
    pub connection: ConnectionArgs,
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// The connection and security options every command takes (Kafka's client
/// settings of the same names).
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "Connection")]
pub struct ConnectionArgs {
    /// Bootstrap servers, HOST:PORT[,HOST:PORT...].
    #[arg(
        short,
        long,
        env = "BATON_BOOTSTRAP",
        global = true,
        value_name = "SERVERS"
    )]
    pub bootstrap: Option<String>,
    /// How connections are secured (security.protocol).
    #[arg(
        long,
        value_enum,
        ignore_case = true,
        global = true,
        value_name = "PROTOCOL"
    )]
    pub security_protocol: Option<SecurityArg>,
    /// The SASL mechanism (sasl.mechanism); needs SASL_PLAINTEXT or SASL_SSL.
    #[arg(
        long,
        value_enum,
        ignore_case = true,
        global = true,
        value_name = "MECHANISM"
    )]
    pub sasl_mechanism: Option<MechanismArg>,
    /// The SASL user name.
    #[arg(long, env = "BATON_SASL_USERNAME", global = true, value_name = "USER")]
    pub sasl_username: Option<String>,
    /// The SASL password (with OAUTHBEARER: the bearer token). Prefer the
    /// environment variable or --sasl-password-file: a command line is visible to
    /// other users of the machine. Never printed.
    #[arg(
        long,
        env = "BATON_SASL_PASSWORD",
        hide_env_values = true,
        global = true,
        value_name = "PASSWORD"
    )]
    pub sasl_password: Option<String>,
    /// Reads the SASL password from FILE (its first line).
    #[arg(
        long,
        global = true,
        value_name = "FILE",
        conflicts_with = "sasl_password"
    )]
    pub sasl_password_file: Option<PathBuf>,
    /// Trusts exactly the CAs in this PEM file (default: the system's roots).
    #[arg(long, global = true, value_name = "FILE")]
    pub ca_file: Option<PathBuf>,
    /// Presents this PEM client certificate chain (mutual TLS); needs --key-file.
    #[arg(long, global = true, value_name = "FILE", requires = "key_file")]
    pub cert_file: Option<PathBuf>,
    /// The PEM private key of --cert-file.
    #[arg(long, global = true, value_name = "FILE", requires = "cert_file")]
    pub key_file: Option<PathBuf>,
    /// How long one request, and one admin operation, may take.
    #[arg(long, global = true, value_name = "SECONDS", default_value_t = 30)]
    pub timeout: u64,
    /// The client id sent to the brokers.
    #[arg(long, global = true, value_name = "ID", default_value = "baton-cli")]
    pub client_id: String,
}

/// `--security-protocol`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum SecurityArg {
    /// No TLS, no authentication.
    #[value(name = "PLAINTEXT")]
    Plaintext,
    /// TLS.
    #[value(name = "SSL")]
    Ssl,
    /// SASL over plain TCP.
    #[value(name = "SASL_PLAINTEXT")]
    SaslPlaintext,
    /// SASL over TLS.
    #[value(name = "SASL_SSL")]
    SaslSsl,
}

/// `--sasl-mechanism`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum MechanismArg {
    /// User name and password in the clear (use over TLS).
    #[value(name = "PLAIN")]
    Plain,
    /// SCRAM with SHA-256.
    #[value(name = "SCRAM-SHA-256")]
    ScramSha256,
    /// SCRAM with SHA-512.
    #[value(name = "SCRAM-SHA-512")]
    ScramSha512,
    /// A fixed bearer token, given as the password.
    #[value(name = "OAUTHBEARER")]
    OAuthBearer,
}

/// The commands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Produces records read from stdin or a file, one per line.
    #[command(after_help = PRODUCE_HELP)]
    Produce(ProduceArgs),
    /// Consumes records and prints them.
    #[command(after_help = CONSUME_HELP)]
    Consume(ConsumeArgs),
    /// Lists, describes, creates, alters and deletes topics.
    #[command(subcommand)]
    Topics(TopicsCommand),
    /// Describes the cluster.
    #[command(subcommand)]
    Cluster(ClusterCommand),
    /// Lists, describes and deletes consumer groups; shows and resets their
    /// committed offsets and lag.
    #[command(subcommand)]
    Groups(GroupsCommand),
    /// Reads a topic written with history payloads and checks it for lost,
    /// duplicated, reordered and corrupted records.
    #[command(after_help = CHECK_HELP)]
    Check(CheckArgs),
}

const PRODUCE_HELP: &str = "\
Every record gets the -H headers. Records are sent idempotently with acks=all
unless told otherwise. The exit status is 1 if any record was not delivered; the
count of failed records and the first error are printed.

Examples:
  echo hello | baton produce events
  baton produce events --file records.txt --key-delimiter : -H source=import
  printf 'a\\0b\\0' | baton produce events --delimiter '\\0' --partition 2 --acks 1";

const CONSUME_HELP: &str = "\
Without --group, the topic's partitions (or those of --partition) are read
directly from --from. With --group, the consumer joins the group, reads the
partitions it is given from the group's committed offsets (--from earliest or
latest where none is committed) and commits what it printed.

Template fields: {topic} {partition} {offset} {timestamp} {key} {value} {headers}
(headers as k=v,k=v); \\n, \\t and \\\\ are escapes. A null key or value prints
as nothing (raw, template) or null (json). json prints one object per line:
{\"topic\",\"partition\",\"offset\",\"timestamp\",\"key\",\"value\",\"headers\":[[k,v],...]}
(bytes that are not UTF-8 are replaced by U+FFFD).

Examples:
  baton consume events --from earliest --exit-at-end
  baton consume events --from -10 --partition 0 --format json
  baton consume events --from @1764680000000 --count 5
  baton consume events --group billing --format '{offset}: {key} {value}'";

const CHECK_HELP: &str = "\
The records' values must be history payloads (`baton_broker::history::payload`:
an id, a CRC-32C and filler), written by one producer with ids growing per
partition. The topic is read from its start to the end it has when the check
starts. Ids missing between the lowest and the highest id read (or below
--expect) count as lost; a copy of an id at a second position as duplicated; a
lower id after a higher one in a partition as reordered; a payload that fails
its CRC, or an id outside --expect, as corrupted. Records that are not payloads
at all are counted as unreadable and fail the check too.

Examples:
  baton check orders
  baton check orders --expect 100000";

/// `baton produce`.
#[derive(Debug, Args)]
pub struct ProduceArgs {
    /// The topic.
    pub topic: String,
    /// Reads records from FILE instead of stdin.
    #[arg(short, long, value_name = "FILE")]
    pub file: Option<PathBuf>,
    /// The byte that ends a record (escapes: \n, \t, \0, \\).
    #[arg(short = 'D', long, value_name = "BYTE", default_value = "\\n", value_parser = parse_delimiter)]
    pub delimiter: u8,
    /// Splits each record at the first DELIM into key and value; a record without
    /// it has a null key.
    #[arg(short = 'K', long, value_name = "DELIM")]
    pub key_delimiter: Option<String>,
    /// A header on every record, KEY=VALUE (repeatable).
    #[arg(short = 'H', long = "header", value_name = "KEY=VALUE", value_parser = parse_key_value)]
    pub headers: Vec<(String, String)>,
    /// Sends every record to this partition (default: by key, or spread).
    #[arg(short, long, value_name = "N")]
    pub partition: Option<i32>,
    /// Acknowledgements: 0, 1 or all (-1).
    #[arg(long, value_name = "ACKS", default_value = "all", value_parser = parse_acks)]
    pub acks: baton_kafka::Acks,
    /// Compression codec.
    #[arg(short = 'z', long, value_enum, default_value_t = CompressionArg::None)]
    pub compression: CompressionArg,
    /// Idempotent delivery (no duplicates on retries); on by default with
    /// acks=all, off otherwise.
    #[arg(long, value_name = "BOOL", num_args = 0..=1, default_missing_value = "true")]
    pub idempotent: Option<bool>,
    /// The largest record accepted from the input.
    #[arg(long, value_name = "BYTES", default_value_t = 1024 * 1024)]
    pub max_record_bytes: usize,
}

/// `--compression`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum CompressionArg {
    /// No compression.
    None,
    /// gzip.
    Gzip,
    /// Snappy.
    Snappy,
    /// LZ4.
    Lz4,
    /// Zstandard.
    Zstd,
}

impl CompressionArg {
    /// The SDK's codec.
    pub fn codec(self) -> baton_kafka::Compression {
        match self {
            CompressionArg::None => baton_kafka::Compression::None,
            CompressionArg::Gzip => baton_kafka::Compression::Gzip,
            CompressionArg::Snappy => baton_kafka::Compression::Snappy,
            CompressionArg::Lz4 => baton_kafka::Compression::Lz4,
            CompressionArg::Zstd => baton_kafka::Compression::Zstd,
        }
    }
}

/// `baton consume`.
#[derive(Debug, Args)]
pub struct ConsumeArgs {
    /// The topic.
    pub topic: String,
    /// Where to start: earliest, latest, OFFSET, @TIMESTAMP_MS (the first record
    /// at or after it), or -N (the last N records of each partition).
    #[arg(short = 'o', long, value_name = "WHERE", default_value = "latest", value_parser = parse_from, allow_hyphen_values = true)]
    pub from: From,
    /// Reads only these partitions (repeatable, or comma-separated).
    #[arg(
        short,
        long,
        value_name = "N",
        value_delimiter = ',',
        conflicts_with = "group"
    )]
    pub partition: Vec<i32>,
    /// Consumes as a member of this group, committing what was printed.
    #[arg(short, long, value_name = "GROUP")]
    pub group: Option<String>,
    /// Stops after N records.
    #[arg(short = 'c', long, value_name = "N")]
    pub count: Option<u64>,
    /// Stops once every partition is read up to the end it had at start.
    #[arg(short = 'e', long)]
    pub exit_at_end: bool,
    /// Output: raw (the value), json, or a template such as
    /// '{partition}:{offset} {key}={value}'.
    #[arg(short = 'F', long, value_name = "FORMAT", default_value = "raw")]
    pub format: String,
}

/// `--from`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum From {
    /// The log start.
    Earliest,
    /// The log end.
    Latest,
    /// An exact offset.
    Offset(i64),
    /// The first record at or after this time (ms since the epoch).
    Timestamp(i64),
    /// The last N records of each partition.
    Last(i64),
}

/// `baton topics`.
#[derive(Debug, Subcommand)]
pub enum TopicsCommand {
    /// Lists topic names, one per line.
    List {
        /// Includes internal topics (__consumer_offsets...).
        #[arg(long)]
        internal: bool,
    },
    /// Describes topics: partitions, leaders, replicas, in-sync replicas.
    #[command(
        after_help = "Examples:\n  baton topics describe\n  baton topics describe events orders"
    )]
    Describe {
        /// The topics (default: every topic).
        topics: Vec<String>,
    },
    /// Creates a topic.
    #[command(
        after_help = "Examples:\n  baton topics create events --partitions 6 --replication-factor 3\n  baton topics create compacted -p 1 -c cleanup.policy=compact -c min.compaction.lag.ms=0"
    )]
    Create {
        /// The topic.
        topic: String,
        /// Number of partitions (default: the broker's num.partitions).
        #[arg(short, long, value_name = "N")]
        partitions: Option<i32>,
        /// Replication factor (default: the broker's default.replication.factor).
        #[arg(short, long, value_name = "N")]
        replication_factor: Option<i16>,
        /// A topic config, KEY=VALUE (repeatable).
        #[arg(short, long = "config", value_name = "KEY=VALUE", value_parser = parse_key_value)]
        configs: Vec<(String, String)>,
        /// Succeeds if the topic exists already.
        #[arg(long)]
        if_not_exists: bool,
    },
    /// Alters a topic: sets or removes configs (IncrementalAlterConfigs), or adds
    /// partitions.
    #[command(
        after_help = "Examples:\n  baton topics alter events --add-config retention.ms=86400000\n  baton topics alter events --delete-config retention.ms\n  baton topics alter events --partitions 12"
    )]
    Alter {
        /// The topic.
        topic: String,
        /// Sets a config, KEY=VALUE (repeatable).
        #[arg(long, value_name = "KEY=VALUE", value_parser = parse_key_value)]
        add_config: Vec<(String, String)>,
        /// Removes a config's override, so its default applies (repeatable).
        #[arg(long, value_name = "KEY")]
        delete_config: Vec<String>,
        /// Raises the partition count to N.
        #[arg(short, long, value_name = "N")]
        partitions: Option<i32>,
        /// Asks the broker to check the changes without applying them.
        #[arg(long)]
        validate_only: bool,
    },
    /// Deletes topics.
    #[command(
        after_help = "Examples:\n  baton topics delete events\n  baton topics delete old-1 old-2 --if-exists"
    )]
    Delete {
        /// The topics.
        #[arg(required = true)]
        topics: Vec<String>,
        /// Succeeds for topics that do not exist.
        #[arg(long)]
        if_exists: bool,
    },
}

/// `baton cluster`.
#[derive(Debug, Subcommand)]
pub enum ClusterCommand {
    /// Prints the cluster id, the controller and the brokers.
    Describe,
}

/// `baton groups`.
#[derive(Debug, Subcommand)]
pub enum GroupsCommand {
    /// Lists groups: id, type and state, tab-separated, one per line.
    #[command(
        after_help = "Examples:\n  baton groups list\n  baton groups list --state Empty | cut -f1"
    )]
    List {
        /// Only groups in this state (Empty, Stable, ...; repeatable).
        #[arg(long, value_name = "STATE")]
        state: Vec<String>,
        /// Only groups of this type (classic or consumer; repeatable).
        #[arg(long = "type", value_name = "TYPE")]
        group_type: Vec<String>,
    },
    /// Describes groups: state, protocol, coordinator, members and assignments.
    Describe {
        /// The groups.
        #[arg(required = true)]
        groups: Vec<String>,
    },
    /// Deletes groups (they must have no members).
    Delete {
        /// The groups.
        #[arg(required = true)]
        groups: Vec<String>,
    },
    /// Prints a group's committed offsets: topic, partition, offset.
    Offsets {
        /// The group.
        group: String,
    },
    /// Prints how far a group is behind: committed offset, log end and lag per
    /// partition.
    Lag {
        /// The group.
        group: String,
    },
    /// Moves a group's committed offsets (the group must have no members). Prints
    /// the plan; --execute commits it.
    #[command(after_help = RESET_HELP)]
    ResetOffsets(ResetArgs),
    /// Deletes a group's committed offsets of topics or partitions
    /// (OffsetDelete); refused for a topic the group's members subscribe to.
    #[command(after_help = DELETE_OFFSETS_HELP)]
    DeleteOffsets {
        /// The group.
        group: String,
        /// The offsets to delete: TOPIC (every partition the group has an offset
        /// for) or TOPIC:P,P (repeatable).
        #[arg(long, value_name = "TOPIC[:P,P]", required = true)]
        topic: Vec<String>,
    },
}

const DELETE_OFFSETS_HELP: &str = "\
The group's offsets of the topics named are deleted, as
kafka-consumer-groups.sh --delete-offsets does: a consumer of the group then
starts there from its offset reset policy. The coordinator refuses a topic that
a running member of the group subscribes to (exit status 1): stop the group's
consumers, or let them unsubscribe, first. A topic that was deleted can be named
too, to drop the offsets left behind.

Examples:
  baton groups delete-offsets billing --topic events
  baton groups delete-offsets billing --topic events:0,1 --topic old-events";

const RESET_HELP: &str = "\
Without --execute nothing changes: the new offsets are printed (a dry run), as
kafka-consumer-groups.sh does. Targets are kept within each partition's log
start and end offsets.

Examples:
  baton groups reset-offsets billing --all-topics --to-earliest
  baton groups reset-offsets billing --topic events --to-datetime 2026-12-01T00:00:00Z --execute
  baton groups reset-offsets billing --topic events:0,1 --shift-by -100 --execute";

/// `baton groups reset-offsets`.
#[derive(Debug, Args)]
#[command(group(clap::ArgGroup::new("target").required(true).args([
    "to_earliest", "to_latest", "to_datetime", "to_timestamp", "shift_by", "to_offset"
])))]
#[command(group(clap::ArgGroup::new("scope").required(true).args(["topic", "all_topics"])))]
pub struct ResetArgs {
    /// The group.
    pub group: String,
    /// The partitions to move: TOPIC (all its partitions) or TOPIC:P,P
    /// (repeatable).
    #[arg(long, value_name = "TOPIC[:P,P]")]
    pub topic: Vec<String>,
    /// Every partition the group has a committed offset for.
    #[arg(long)]
    pub all_topics: bool,
    /// To each partition's log start.
    #[arg(long)]
    pub to_earliest: bool,
    /// To each partition's log end.
    #[arg(long)]
    pub to_latest: bool,
    /// To the first record at or after this time: YYYY-MM-DDTHH:MM:SS[.sss] with
    /// Z or ±HH:MM (UTC when neither is given).
    #[arg(long, value_name = "DATETIME", value_parser = crate::time::parse_datetime)]
    pub to_datetime: Option<i64>,
    /// To the first record at or after this time (ms since the epoch).
    #[arg(long, value_name = "MS")]
    pub to_timestamp: Option<i64>,
    /// By N offsets from the committed one (negative: back).
    #[arg(long, value_name = "N", allow_hyphen_values = true)]
    pub shift_by: Option<i64>,
    /// To this offset.
    #[arg(long, value_name = "OFFSET")]
    pub to_offset: Option<i64>,
    /// Commits the new offsets (without it: a dry run).
    #[arg(long)]
    pub execute: bool,
    /// Only prints the plan (the default; for scripts that say so).
    #[arg(long, conflicts_with = "execute")]
    pub dry_run: bool,
}

/// `baton check`.
#[derive(Debug, Args)]
pub struct CheckArgs {
    /// The topic.
    pub topic: String,
    /// The records carry ids 0..N: missing ones are lost, others corrupted
    /// (default: every id between the lowest and the highest read).
    #[arg(long, value_name = "N")]
    pub expect: Option<u64>,
}

/// `KEY=VALUE`.
fn parse_key_value(s: &str) -> Result<(String, String), String> {
    match s.split_once('=') {
        Some((k, v)) if !k.is_empty() => Ok((k.to_owned(), v.to_owned())),
        _ => Err(format!("expected KEY=VALUE, got {s:?}")),
    }
}

/// A delimiter byte, with escapes for the usual invisible ones.
fn parse_delimiter(s: &str) -> Result<u8, String> {
    match s {
        "\\n" => Ok(b'\n'),
        "\\t" => Ok(b'\t'),
        "\\0" => Ok(0),
        "\\\\" => Ok(b'\\'),
        _ if s.len() == 1 => Ok(s.as_bytes()[0]),
        _ => Err(format!(
            "expected one byte (or \\n, \\t, \\0, \\\\), got {s:?}"
        )),
    }
}

fn parse_acks(s: &str) -> Result<baton_kafka::Acks, String> {
    match s.to_ascii_lowercase().as_str() {
        "0" => Ok(baton_kafka::Acks::None),
        "1" => Ok(baton_kafka::Acks::Leader),
        "all" | "-1" => Ok(baton_kafka::Acks::All),
        _ => Err(format!("expected 0, 1 or all, got {s:?}")),
    }
}

/// `--from`: earliest, latest, OFFSET, @TIMESTAMP_MS, -N.
pub fn parse_from(s: &str) -> Result<From, String> {
    let bad = || format!("expected earliest, latest, an offset, @TIMESTAMP_MS or -N, got {s:?}");
    match s {
        "earliest" | "beginning" => Ok(From::Earliest),
        "latest" | "end" => Ok(From::Latest),
        _ => {
            if let Some(ts) = s.strip_prefix('@') {
                let ts: i64 = ts.parse().map_err(|_| bad())?;
                return if ts >= 0 {
                    Ok(From::Timestamp(ts))
                } else {
                    Err(bad())
                };
            }
            if let Some(n) = s.strip_prefix('-') {
                let n: i64 = n.parse().map_err(|_| bad())?;
                return if n >= 1 {
                    Ok(From::Last(n))
                } else {
                    Err(bad())
                };
            }
            let offset: i64 = s.parse().map_err(|_| bad())?;
            Ok(From::Offset(offset))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn from_takes_every_form_and_refuses_others() {
        assert_eq!(parse_from("earliest"), Ok(From::Earliest));
        assert_eq!(parse_from("latest"), Ok(From::Latest));
        assert_eq!(parse_from("42"), Ok(From::Offset(42)));
        assert_eq!(
            parse_from("@1700000000000"),
            Ok(From::Timestamp(1_700_000_000_000))
        );
        assert_eq!(parse_from("-5"), Ok(From::Last(5)));
        for bad in ["", "-0", "@", "@x", "@-1", "soon", "1.5"] {
            assert!(parse_from(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn the_command_line_is_consistent() {
        use clap::CommandFactory;
        Cli::command().debug_assert();
    }

    #[test]
    fn delimiters_and_headers_parse() {
        assert_eq!(parse_delimiter("\\n"), Ok(b'\n'));
        assert_eq!(parse_delimiter("|"), Ok(b'|'));
        assert!(parse_delimiter("ab").is_err());
        assert_eq!(
            parse_key_value("a=b=c"),
            Ok(("a".to_owned(), "b=c".to_owned()))
        );
        assert!(parse_key_value("=x").is_err());
    }
}
