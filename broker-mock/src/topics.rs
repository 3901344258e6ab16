//! Topics: names, ids, configs and partitions, and how they are kept in the data
//! directory.
//!
//! Each topic is a small text file `<data_dir>/<name>.topic` (`key=value` lines: `id`,
//! `partitions`, `replication_factor`, then `config.<key>` per config) plus one log
//! directory per partition, `<data_dir>/<name>-<partition>`, as in Kafka. Creating a
//! topic writes its logs first and the `.topic` file last (atomically, by rename), so
//! the file's presence is the commit point; deleting removes the file first.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use baton_protocol::record::TimestampType;
use baton_protocol::Uuid;

use crate::error::{BrokerError, LogError};
use crate::log::Log;
use crate::partition::Partition;

/// Longest legal topic name (Kafka's limit).
pub const MAX_TOPIC_NAME_LEN: usize = 249;

/// A topic's configuration overrides, validated.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TopicConfig {
    /// Config key to value, only keys that were set.
    pub entries: BTreeMap<String, String>,
}

impl TopicConfig {
    /// `message.timestamp.type`.
    pub fn timestamp_type(&self) -> TimestampType {
        match self
            .entries
            .get("message.timestamp.type")
            .map(String::as_str)
        {
            Some("LogAppendTime") => TimestampType::LogAppendTime,
            _ => TimestampType::CreateTime,
        }
    }

    /// `segment.bytes`, if set.
    pub fn segment_bytes(&self) -> Option<u64> {
        self.entries.get("segment.bytes")?.parse().ok()
    }

    /// `index.interval.bytes`, if set.
    pub fn index_interval_bytes(&self) -> Option<u32> {
        self.entries.get("index.interval.bytes")?.parse().ok()
    }

    /// `retention.ms`, if set (-1: keep forever).
    pub fn retention_ms(&self) -> Option<i64> {
        self.entries.get("retention.ms")?.trim().parse().ok()
    }

    /// `retention.bytes`, if set (-1: no size limit).
    pub fn retention_bytes(&self) -> Option<i64> {
        self.entries.get("retention.bytes")?.trim().parse().ok()
    }

    /// `max.message.bytes` (the largest record batch a producer may send), if set.
    pub fn max_message_bytes(&self) -> Option<usize> {
        self.entries.get("max.message.bytes")?.trim().parse().ok()
    }

    /// `segment.ms`, if set.
    pub fn segment_ms(&self) -> Option<i64> {
        self.entries.get("segment.ms")?.trim().parse().ok()
    }

    /// Whether `cleanup.policy` includes `delete` (the default): only then do
    /// retention and DeleteRecords delete data.
    pub fn deletes(&self) -> bool {
        self.entries
            .get("cleanup.policy")
            .is_none_or(|p| p.split(',').any(|x| x.trim() == "delete"))
    }
}

/// Checks a topic name against Kafka's rules: 1 to 249 characters of `[a-zA-Z0-9._-]`,
/// and not `.` or `..`.
pub fn validate_topic_name(name: &str) -> Result<(), String> {
    if name.is_empty() {
        return Err("topic name is empty".into());
    }
    if name == "." || name == ".." {
        return Err(format!("topic name cannot be \"{name}\""));
    }
    if name.len() > MAX_TOPIC_NAME_LEN {
        return Err(format!(
            "topic name is longer than {MAX_TOPIC_NAME_LEN} characters"
        ));
    }
    if let Some(c) = name
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-')))
    {
        return Err(format!("topic name contains illegal character {c:?}"));
    }
    Ok(())
}

fn parse_long(v: &str, min: i64) -> Result<(), String> {
    match v.trim().parse::<i64>() {
        Ok(n) if n >= min => Ok(()),
        Ok(n) => Err(format!("value {n} is below the minimum {min}")),
        Err(_) => Err(format!("{v:?} is not an integer")),
    }
}

fn parse_int(v: &str, min: i64) -> Result<(), String> {
    match v.trim().parse::<i32>() {
        Ok(n) if n as i64 >= min => Ok(()),
        Ok(n) => Err(format!("value {n} is below the minimum {min}")),
        Err(_) => Err(format!("{v:?} is not a 32-bit integer")),
    }
}

fn one_of(v: &str, allowed: &[&str]) -> Result<(), String> {
    if allowed.contains(&v) {
        Ok(())
    } else {
        Err(format!("{v:?} is not one of {allowed:?}"))
    }
}

/// Validates one topic config entry. Unknown keys are rejected, as Kafka does.
pub fn validate_config(key: &str, value: Option<&str>) -> Result<(), String> {
    let Some(v) = value else {
        return Err(format!("null value for config {key}"));
    };
    let r = match key {
        "cleanup.policy" => v
            .split(',')
            .try_for_each(|p| one_of(p.trim(), &["delete", "compact"])),
        "compression.type" => one_of(
            v,
            &["uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"],
        ),
        "message.timestamp.type" => one_of(v, &["CreateTime", "LogAppendTime"]),
        "min.insync.replicas" => parse_int(v, 1),
        "retention.ms" | "local.retention.ms" => parse_long(v, -2),
        "retention.bytes" | "local.retention.bytes" => parse_long(v, i64::MIN),
        "segment.bytes" => parse_int(v, 14),
        "segment.ms" => parse_long(v, 1),
        "segment.jitter.ms" | "segment.index.bytes" => parse_long(v, 0),
        "index.interval.bytes" | "max.message.bytes" | "flush.messages" => parse_long(v, 0),
        "flush.ms"
        | "delete.retention.ms"
        | "file.delete.delay.ms"
        | "min.compaction.lag.ms"
        | "max.compaction.lag.ms"
        | "message.timestamp.difference.max.ms"
        | "message.timestamp.before.max.ms"
        | "message.timestamp.after.max.ms" => parse_long(v, 0),
        "unclean.leader.election.enable"
        | "preallocate"
        | "message.downconversion.enable"
        | "remote.storage.enable" => one_of(v, &["true", "false"]),
        "min.cleanable.dirty.ratio" => match v.parse::<f64>() {
            Ok(x) if (0.0..=1.0).contains(&x) => Ok(()),
            _ => Err(format!("{v:?} is not a ratio between 0 and 1")),
        },
        _ => Err(format!("unknown topic config {key}")),
    };
    r.map_err(|e| format!("invalid value for {key}: {e}"))
}

/// A topic: a name, a stable id, its configuration and partitions.
#[derive(Debug)]
pub struct Topic {
    /// The topic name.
    pub name: String,
    /// The topic id, random at creation and persisted.
    pub id: Uuid,
    /// The replication factor (always 1 on a single node).
    pub replication_factor: i16,
    /// Configuration overrides.
    pub config: TopicConfig,
    /// Partitions, indexed by partition number.
    pub partitions: Vec<Arc<Partition>>,
}

impl Topic {
    /// The partition with `index`, if it exists.
    pub fn partition(&self, index: i32) -> Option<&Arc<Partition>> {
        usize::try_from(index)
            .ok()
            .and_then(|i| self.partitions.get(i))
    }
}

/// Formats a UUID as 32 lowercase hex digits.
pub fn uuid_to_hex(id: &Uuid) -> String {
    id.0.iter().map(|b| format!("{b:02x}")).collect()
}

/// Parses 32 hex digits into a UUID.
pub fn uuid_from_hex(s: &str) -> Option<Uuid> {
    if s.len() != 32 || !s.is_ascii() {
        return None;
    }
    let mut out = [0u8; 16];
    for (i, byte) in out.iter_mut().enumerate() {
        *byte = u8::from_str_radix(&s[2 * i..2 * i + 2], 16).ok()?;
    }
    Some(Uuid(out))
}

/// 64 random bits from the process's environment ([`baton_env::random_u64`]).
pub fn random_u64() -> u64 {
    baton_env::random_u64()
}

/// A fresh random topic id (never the zero UUID).
pub fn random_uuid() -> Uuid {
    loop {
        let id = Uuid::from_u64_pair(random_u64(), random_u64());
        if id != Uuid::ZERO {
            return id;
        }
    }
}

/// Where a topic's files live, and how logs are opened.
#[derive(Debug, Clone)]
pub(crate) struct Storage {
    pub data_dir: Option<PathBuf>,
    pub segment_bytes: u64,
    pub index_interval_bytes: u32,
    pub node_id: i32,
    /// Cluster replicas start without a role (see [`Partition::new_replica`]).
    pub cluster: bool,
    /// What each partition's producer state may hold (`BrokerLimits`).
    pub producer_limits: crate::producer_state::ProducerLimits,
    /// The node's counters, which its partitions add to.
    pub metrics: Arc<crate::metrics::NodeMetrics>,
}

impl Storage {
    fn meta_path(dir: &Path, name: &str) -> PathBuf {
        dir.join(format!("{name}.topic"))
    }

    /// The directory of partition `p` of topic `name` under a data directory.
    pub(crate) fn partition_dir(dir: &Path, name: &str, p: i32) -> PathBuf {
        dir.join(format!("{name}-{p}"))
    }

    /// Opens partition `p` of topic `name`; `shared_name` is the same name, shared by
    /// all the topic's partitions.
    fn open_partition(
        &self,
        name: &str,
        shared_name: &Arc<str>,
        p: i32,
        config: &TopicConfig,
        fresh: bool,
    ) -> Result<Partition, LogError> {
        let part = self.open_unmeasured(name, shared_name, p, config, fresh)?;
        part.lock().metrics = Some(self.metrics.clone());
        Ok(part)
    }

    fn open_unmeasured(
        &self,
        name: &str,
        shared_name: &Arc<str>,
        p: i32,
        config: &TopicConfig,
        fresh: bool,
    ) -> Result<Partition, LogError> {
        let mut corrupt_offset = None;
        let log = match &self.data_dir {
            None => Log::memory(),
            Some(dir) => {
                let pdir = Self::partition_dir(dir, name, p);
                if fresh && pdir.exists() {
                    fs::remove_dir_all(&pdir).map_err(|e| LogError::io(&pdir, e))?;
                }
                let (log, rec) = Log::open(
                    &pdir,
                    config.segment_bytes().unwrap_or(self.segment_bytes),
                    config
                        .index_interval_bytes()
                        .unwrap_or(self.index_interval_bytes),
                )?;
                if let Some(reason) = rec.reason {
                    tracing::warn!(
                        topic = name,
                        partition = p,
                        truncated_bytes = rec.truncated_bytes,
                        removed_segments = rec.removed_segments,
                        reason,
                        "log recovery cut a damaged tail"
                    );
                }
                corrupt_offset = rec.corrupt_offset;
                log
            }
        };
        if self.cluster {
            let part = Partition::new_replica(shared_name.clone(), p, log, self.producer_limits);
            if let Some(offset) = corrupt_offset {
                // Not a torn tail: valid data was cut. The replica must re-fetch it
                // from a healthy leader and must not lead before it has.
                part.lock().mark_recovered_corruption(offset);
            }
            Ok(part)
        } else {
            Ok(Partition::new(
                shared_name.clone(),
                p,
                self.node_id,
                log,
                self.producer_limits,
            ))
        }
    }

    /// Opens partitions `0..n` of topic `name` (sharing one copy of the name), in a
    /// vector of exactly `n`.
    fn open_partitions(
        &self,
        name: &str,
        n: i32,
        config: &TopicConfig,
        fresh: bool,
    ) -> Result<Vec<Arc<Partition>>, LogError> {
        let shared_name: Arc<str> = Arc::from(name);
        let mut parts = Vec::with_capacity(usize::try_from(n).unwrap_or(0));
        for p in 0..n {
            let part = self.open_partition(name, &shared_name, p, config, fresh)?;
            parts.push(Arc::new(part));
        }
        Ok(parts)
    }

    /// Creates a topic's logs and, on disk, its metadata file.
    pub fn create(
        &self,
        name: &str,
        id: Uuid,
        partitions: i32,
        replication_factor: i16,
        config: TopicConfig,
    ) -> Result<Topic, LogError> {
        let parts = self.open_partitions(name, partitions, &config, true)?;
        self.write_meta(name, id, partitions, replication_factor, &config)?;
        Ok(Topic {
            name: name.to_owned(),
            id,
            replication_factor,
            config,
            partitions: parts,
        })
    }

    /// Writes a topic's metadata file (on disk only), replacing it atomically.
    fn write_meta(
        &self,
        name: &str,
        id: Uuid,
        partitions: i32,
        replication_factor: i16,
        config: &TopicConfig,
    ) -> Result<(), LogError> {
        if let Some(dir) = &self.data_dir {
            let mut text = format!(
                "id={}\npartitions={partitions}\nreplication_factor={replication_factor}\n",
                uuid_to_hex(&id)
            );
            for (k, v) in &config.entries {
                text.push_str(&format!("config.{k}={v}\n"));
            }
            let path = Self::meta_path(dir, name);
            let tmp = dir.join(format!("{name}.topic.tmp"));
            write_synced(&tmp, text.as_bytes())?;
            fs::rename(&tmp, &path).map_err(|e| LogError::io(&path, e))?;
        }
        Ok(())
    }

    /// `old` with `partitions` partitions (new ones opened empty; never fewer) and
    /// `config`, its metadata file rewritten. The existing partitions are shared,
    /// so their logs and roles carry over.
    pub fn update(
        &self,
        old: &Topic,
        partitions: i32,
        config: TopicConfig,
    ) -> Result<Topic, LogError> {
        let have = old.partitions.len() as i32;
        let mut parts = old.partitions.clone();
        let shared_name: Arc<str> = Arc::from(old.name.as_str());
        for p in have..partitions {
            let part = self.open_partition(&old.name, &shared_name, p, &config, true)?;
            parts.push(Arc::new(part));
        }
        let partitions = partitions.max(have);
        self.write_meta(
            &old.name,
            old.id,
            partitions,
            old.replication_factor,
            &config,
        )?;
        Ok(Topic {
            name: old.name.clone(),
            id: old.id,
            replication_factor: old.replication_factor,
            config,
            partitions: parts,
        })
    }

    /// Deletes a topic's metadata file and data.
    pub fn delete(&self, topic: &Topic) -> Result<(), LogError> {
        if let Some(dir) = &self.data_dir {
            let path = Self::meta_path(dir, &topic.name);
            fs::remove_file(&path).map_err(|e| LogError::io(&path, e))?;
        }
        for p in &topic.partitions {
            p.delete()?;
        }
        Ok(())
    }

    /// Loads every topic persisted in the data directory.
    pub fn load_all(&self) -> Result<Vec<Topic>, BrokerError> {
        let Some(dir) = &self.data_dir else {
            return Ok(Vec::new());
        };
        fs::create_dir_all(dir).map_err(|e| LogError::io(dir, e))?;
        let mut topics = Vec::new();
        for entry in fs::read_dir(dir).map_err(|e| LogError::io(dir, e))? {
            let entry = entry.map_err(|e| LogError::io(dir, e))?;
            let path = entry.path();
            let Some(fname) = path.file_name().and_then(|f| f.to_str()) else {
                continue;
            };
            let Some(name) = fname.strip_suffix(".topic") else {
                continue;
            };
            let bad = |reason: String| BrokerError::TopicMetadata {
                path: path.clone(),
                reason,
            };
            validate_topic_name(name).map_err(bad)?;
            let text = fs::read_to_string(&path).map_err(|e| LogError::io(&path, e))?;
            let mut id = None;
            let mut partitions = None;
            let mut rf = 1i16;
            let mut config = TopicConfig::default();
            for line in text.lines().filter(|l| !l.trim().is_empty()) {
                let (k, v) = line
                    .split_once('=')
                    .ok_or_else(|| bad(format!("line without '=': {line:?}")))?;
                match k {
                    "id" => id = uuid_from_hex(v),
                    "partitions" => partitions = v.parse::<i32>().ok().filter(|n| *n > 0),
                    "replication_factor" => rf = v.parse().map_err(|_| bad("bad rf".into()))?,
                    _ => {
                        if let Some(key) = k.strip_prefix("config.") {
                            config.entries.insert(key.to_owned(), v.to_owned());
                        }
                    }
                }
            }
            let id = id.ok_or_else(|| bad("missing or bad id".into()))?;
            let n = partitions.ok_or_else(|| bad("missing or bad partitions".into()))?;
            let parts = self.open_partitions(name, n, &config, false)?;
            topics.push(Topic {
                name: name.to_owned(),
                id,
                replication_factor: rf,
                config,
                partitions: parts,
            });
        }
        Ok(topics)
    }
}

fn write_synced(path: &Path, data: &[u8]) -> Result<(), LogError> {
    use std::io::Write;
    let mut f = fs::File::create(path).map_err(|e| LogError::io(path, e))?;
    f.write_all(data)
        .and_then(|_| f.sync_all())
        .map_err(|e| LogError::io(path, e))
}

/// Reads (or creates) the cluster id kept in `<data_dir>/cluster_id`.
pub(crate) fn cluster_id(data_dir: Option<&Path>) -> Result<String, LogError> {
    let fresh = || {
        let id = random_uuid();
        uuid_to_hex(&id)
    };
    let Some(dir) = data_dir else {
        return Ok(fresh());
    };
    fs::create_dir_all(dir).map_err(|e| LogError::io(dir, e))?;
    let path = dir.join("cluster_id");
    match fs::read_to_string(&path) {
        Ok(s) if !s.trim().is_empty() => Ok(s.trim().to_owned()),
        _ => {
            let id = fresh();
            write_synced(&path, id.as_bytes())?;
            Ok(id)
        }
    }
}
