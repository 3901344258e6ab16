//! `baton consume`: reads a topic's partitions directly, or as a group member that
//! commits what it printed, and prints each record in the chosen format.

use std::collections::BTreeMap;
use std::io::Write;
use std::time::Duration;

use baton_kafka::{
    Admin, Client, Consumer, ConsumerRecord, GroupConsumer, OffsetReset, OffsetSpec, StartOffset,
    TopicPartition,
};

use crate::args::{ConsumeArgs, From};
use crate::error::CliError;
use crate::format::Format;

/// How often the positions are compared with the end offsets (`--exit-at-end`).
const END_CHECK: Duration = Duration::from_millis(100);

/// Runs `baton consume`.
pub async fn run(client: &Client, args: ConsumeArgs) -> Result<(), CliError> {
    let format = Format::parse(&args.format)?;
    let partitions = partitions(client, &args.topic, &args.partition).await?;
    let ends = if args.exit_at_end {
        Some(end_offsets(client, &args.topic, &partitions).await?)
    } else {
        None
    };
    let mut out = Output::new(format, args.count);
    match &args.group {
        None => {
            let mut builder = Consumer::builder(client);
            let starts = start_offsets(client, &args.topic, &partitions, args.from).await?;
            for (p, start) in partitions.iter().zip(starts) {
                builder = builder.assign(args.topic.clone(), *p, start);
            }
            let mut consumer = builder.build().await?;
            let result = read(&mut consumer, ends.as_ref(), &mut out).await;
            out.flush()?;
            result
        }
        Some(group) => {
            let reset = match args.from {
                From::Earliest => OffsetReset::Earliest,
                From::Latest => OffsetReset::Latest,
                _ => {
                    return Err(CliError::usage(
                        "with --group, --from is only earliest or latest (where the group has no committed offset)",
                    )
                    .hint("move the group's offsets with `baton groups reset-offsets` first"))
                }
            };
            let mut consumer = GroupConsumer::builder(client, group.clone())
                .subscribe([args.topic.clone()])
                .offset_reset(reset)
                .build()
                .await?;
            let result = read(&mut consumer, ends.as_ref(), &mut out).await;
            out.flush()?;
            // Commits the positions of what was printed, and leaves the group.
            let closed = consumer.close().await;
            result?;
            Ok(closed?)
        }
    }
}

/// The partitions to read: `wanted`, or every partition of the topic.
async fn partitions(client: &Client, topic: &str, wanted: &[i32]) -> Result<Vec<i32>, CliError> {
    let meta = client.refresh_metadata().await?;
    let Some(t) = meta.topic(topic) else {
        return Err(CliError::unknown_topic(topic));
    };
    let all: Vec<i32> = t.partitions.iter().map(|p| p.partition).collect();
    if wanted.is_empty() {
        return Ok(all);
    }
    for p in wanted {
        if !all.contains(p) {
            return Err(CliError::not_found(format!(
                "topic {topic:?} has no partition {p} (it has {})",
                all.len()
            )));
        }
    }
    Ok(wanted.to_vec())
}

/// The log end offset of each partition now.
async fn end_offsets(
    client: &Client,
    topic: &str,
    partitions: &[i32],
) -> Result<BTreeMap<i32, i64>, CliError> {
    let listed = Admin::new(client)
        .list_offsets(partitions.iter().map(|p| (topic, *p, OffsetSpec::Latest)))
        .await?;
    Ok(listed
        .into_iter()
        .map(|l| (l.partition, l.offset))
        .collect())
}

/// Where each partition starts for `from`.
async fn start_offsets(
    client: &Client,
    topic: &str,
    partitions: &[i32],
    from: From,
) -> Result<Vec<StartOffset>, CliError> {
    let start = match from {
        From::Earliest => StartOffset::Earliest,
        From::Latest => StartOffset::Latest,
        From::Offset(o) => StartOffset::Offset(o),
        From::Timestamp(t) => StartOffset::Timestamp(t),
        From::Last(n) => {
            let admin = Admin::new(client);
            let earliest = admin
                .list_offsets(partitions.iter().map(|p| (topic, *p, OffsetSpec::Earliest)))
                .await?;
            let latest = admin
                .list_offsets(partitions.iter().map(|p| (topic, *p, OffsetSpec::Latest)))
                .await?;
            return Ok(earliest
                .iter()
                .zip(&latest)
                .map(|(e, l)| StartOffset::Offset(l.offset.saturating_sub(n).max(e.offset)))
                .collect());
        }
    };
    Ok(vec![start; partitions.len()])
}

/// Where printed records go, and how many more may be printed.
struct Output {
    format: Format,
    left: Option<u64>,
    stdout: std::io::BufWriter<std::io::Stdout>,
    buf: Vec<u8>,
}

impl Output {
    fn new(format: Format, count: Option<u64>) -> Output {
        Output {
            format,
            left: count,
            stdout: std::io::BufWriter::new(std::io::stdout()),
            buf: Vec::new(),
        }
    }

    /// Whether `--count` records were printed.
    fn done(&self) -> bool {
        self.left == Some(0)
    }

    /// Prints `record`. A closed stdout (`| head`) ends the run quietly.
    fn print(&mut self, record: &ConsumerRecord) -> Result<bool, CliError> {
        self.buf.clear();
        self.format.write(record, &mut self.buf);
        if let Some(left) = &mut self.left {
            *left -= 1;
        }
        match self
            .stdout
            .write_all(&self.buf)
            .and_then(|()| self.stdout.flush())
        {
            Ok(()) => Ok(true),
            Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(false),
            Err(e) => Err(e.into()),
        }
    }

    fn flush(&mut self) -> Result<(), CliError> {
        match self.stdout.flush() {
            Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(e.into()),
            _ => Ok(()),
        }
    }
}

/// Whether every partition in `positions` is at or past its end.
fn at_end(ends: &BTreeMap<i32, i64>, positions: &[(i32, Option<i64>)]) -> bool {
    positions
        .iter()
        .all(|(p, pos)| matches!((pos, ends.get(p)), (Some(pos), Some(end)) if pos >= end))
}

/// What [`read`] reads from: a consumer with assigned partitions or a group
/// member.
trait Source {
    /// Whether an empty assignment means "not assigned yet" rather than "nothing to
    /// read" (a group member waits for its assignment before it can be at the end).
    const WAITS_FOR_ASSIGNMENT: bool;
    /// The partitions read now.
    fn assignment(&self) -> Vec<TopicPartition>;
    /// The next offset to read of `partition`.
    fn position(&self, partition: &TopicPartition) -> Option<i64>;
    /// The next record.
    async fn recv(&mut self) -> Result<ConsumerRecord, CliError>;
}

impl Source for Consumer {
    const WAITS_FOR_ASSIGNMENT: bool = false;
    fn assignment(&self) -> Vec<TopicPartition> {
        Consumer::assignment(self)
    }
    fn position(&self, partition: &TopicPartition) -> Option<i64> {
        Consumer::position(self, partition)
    }
    async fn recv(&mut self) -> Result<ConsumerRecord, CliError> {
        Ok(Consumer::recv(self).await?)
    }
}

impl Source for GroupConsumer {
    const WAITS_FOR_ASSIGNMENT: bool = true;
    fn assignment(&self) -> Vec<TopicPartition> {
        GroupConsumer::assignment(self)
    }
    fn position(&self, partition: &TopicPartition) -> Option<i64> {
        GroupConsumer::position(self, partition)
    }
    async fn recv(&mut self) -> Result<ConsumerRecord, CliError> {
        Ok(GroupConsumer::recv(self).await?)
    }
}

/// Reads until the count, the end of the assigned partitions, or Ctrl-C.
async fn read<S: Source>(
    consumer: &mut S,
    ends: Option<&BTreeMap<i32, i64>>,
    out: &mut Output,
) -> Result<(), CliError> {
    let mut tick = tokio::time::interval(END_CHECK);
    let ctrl_c = tokio::signal::ctrl_c();
    tokio::pin!(ctrl_c);
    loop {
        if out.done() {
            return Ok(());
        }
        if let Some(ends) = ends {
            let assigned = consumer.assignment();
            let positions: Vec<(i32, Option<i64>)> = assigned
                .iter()
                .map(|tp| (tp.partition, consumer.position(tp)))
                .collect();
            let assigned_yet = !S::WAITS_FOR_ASSIGNMENT || !assigned.is_empty();
            if assigned_yet && at_end(ends, &positions) {
                return Ok(());
            }
        }
        tokio::select! {
            r = consumer.recv() => {
                if !out.print(&r?)? {
                    return Ok(());
                }
            }
            _ = tick.tick(), if ends.is_some() => {}
            _ = &mut ctrl_c => return Ok(()),
        }
    }
}
