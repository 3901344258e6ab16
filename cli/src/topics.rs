//! `baton topics` and `baton cluster`: listing, describing, creating and deleting
//! topics, and describing the cluster, on the SDK's [`Admin`].

use std::fmt::Write as _;

use base64::Engine as _;
use baton_kafka::metadata::TopicMetadata;
use baton_kafka::{
    Admin, AdminError, AlterConfigOp, Client, ConfigResource, DescribeConfigsOptions,
    NewPartitions, NewTopic, ResourceConfig,
};
use baton_protocol::{ErrorCode, Uuid};

use crate::args::{ClusterCommand, TopicsCommand};
use crate::error::CliError;

/// Runs `baton topics ...`.
pub async fn run(client: &Client, admin: &Admin, command: TopicsCommand) -> Result<(), CliError> {
    match command {
        TopicsCommand::List { internal } => {
            let meta = admin.describe_cluster().await?;
            let mut out = String::new();
            for t in meta.topics.values().filter(|t| internal || !t.is_internal) {
                let _ = writeln!(out, "{}", t.name);
            }
            print!("{out}");
            Ok(())
        }
        TopicsCommand::Describe { topics } => {
            let meta = admin.describe_cluster().await?;
            for name in &topics {
                if meta.topic(name).is_none() {
                    return Err(CliError::unknown_topic(name));
                }
            }
            let shown: Vec<&TopicMetadata> = meta
                .topics
                .values()
                .filter(|t| topics.is_empty() || topics.contains(&t.name))
                .collect();
            let configs = admin
                .describe_configs(
                    shown.iter().map(|t| ConfigResource::topic(t.name.clone())),
                    DescribeConfigsOptions::default(),
                )
                .await?;
            let mut out = String::new();
            for (t, c) in shown.iter().zip(&configs) {
                describe_topic(t, c, &mut out);
            }
            print!("{out}");
            Ok(())
        }
        TopicsCommand::Create {
            topic,
            partitions,
            replication_factor,
            configs,
            if_not_exists,
        } => {
            let mut new = NewTopic::new(
                topic.clone(),
                partitions.unwrap_or(-1),
                replication_factor.unwrap_or(-1),
            );
            for (k, v) in configs {
                new = new.config(k, v);
            }
            match admin.create_topics([new]).await {
                Ok(()) => {
                    println!("created topic {topic}");
                    Ok(())
                }
                Err(e) if if_not_exists && only(&e, ErrorCode::TopicAlreadyExists) => Ok(()),
                Err(e) if only(&e, ErrorCode::TopicAlreadyExists) => {
                    Err(CliError::failure(format!("topic {topic:?} exists already"))
                        .hint("pass --if-not-exists to accept an existing topic"))
                }
                Err(e) => Err(e.into()),
            }
        }
        TopicsCommand::Alter {
            topic,
            add_config,
            delete_config,
            partitions,
            validate_only,
        } => {
            if add_config.is_empty() && delete_config.is_empty() && partitions.is_none() {
                return Err(CliError::usage("nothing to alter")
                    .hint("pass --add-config KEY=VALUE, --delete-config KEY or --partitions N"));
            }
            let meta = admin.describe_cluster().await?;
            let Some(current) = meta.topic(&topic) else {
                return Err(CliError::unknown_topic(&topic));
            };
            let ops: Vec<AlterConfigOp> = add_config
                .into_iter()
                .map(|(k, v)| AlterConfigOp::set(k, v))
                .chain(delete_config.into_iter().map(AlterConfigOp::delete))
                .collect();
            let verb = if validate_only {
                "would alter"
            } else {
                "altered"
            };
            if !ops.is_empty() {
                admin
                    .incremental_alter_configs(
                        [(ConfigResource::topic(topic.clone()), ops)],
                        validate_only,
                    )
                    .await?;
                println!("{verb} the configs of topic {topic}");
            }
            if let Some(n) = partitions {
                let have = current.partitions.len();
                if usize::try_from(n).is_ok_and(|n| n <= have) {
                    return Err(CliError::usage(format!(
                        "topic {topic:?} has {have} partitions; --partitions must be more (partitions are never removed)"
                    )));
                }
                admin
                    .create_partitions(
                        [NewPartitions::increase_to(topic.clone(), n)],
                        validate_only,
                    )
                    .await?;
                println!("{verb} topic {topic}: {have} -> {n} partitions");
            }
            Ok(())
        }
        TopicsCommand::Delete { topics, if_exists } => {
            match admin.delete_topics(topics.iter().cloned()).await {
                Ok(()) => {}
                Err(e) if if_exists && only(&e, ErrorCode::UnknownTopicOrPartition) => {}
                Err(AdminError::Topics(ts))
                    if ts
                        .iter()
                        .all(|t| t.code == ErrorCode::UnknownTopicOrPartition) =>
                {
                    let names: Vec<&str> = ts.iter().map(|t| t.topic.as_str()).collect();
                    return Err(CliError::not_found(format!(
                        "no such topic: {}",
                        names.join(", ")
                    ))
                    .hint("pass --if-exists to accept topics that do not exist"));
                }
                Err(e) => return Err(e.into()),
            }
            // Metadata may still show a topic for a moment after its deletion.
            let _ = client.refresh_metadata().await;
            for t in &topics {
                println!("deleted topic {t}");
            }
            Ok(())
        }
    }
}

/// Whether every topic of `e` failed with `code`.
fn only(e: &AdminError, code: ErrorCode) -> bool {
    matches!(e, AdminError::Topics(ts) if ts.iter().all(|t| t.code == code))
}

/// A topic id as Kafka's tools print it (URL-safe base64, no padding).
fn topic_id(id: Uuid) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(id.0)
}

fn ids(ids: &[i32]) -> String {
    ids.iter().map(i32::to_string).collect::<Vec<_>>().join(",")
}

/// One topic in the shape of `kafka-topics.sh --describe`: its overridden
/// configs on the first line, then one line per partition.
fn describe_topic(t: &TopicMetadata, configs: &ResourceConfig, out: &mut String) {
    let rf = t.partitions.first().map_or(0, |p| p.replicas.len());
    let overrides: Vec<String> = configs
        .entries
        .iter()
        .filter(|e| !e.is_default())
        .map(|e| format!("{}={}", e.name, e.value.as_deref().unwrap_or("(sensitive)")))
        .collect();
    let _ = writeln!(
        out,
        "Topic: {}\tTopicId: {}\tPartitionCount: {}\tReplicationFactor: {}\tConfigs: {}",
        t.name,
        topic_id(t.topic_id),
        t.partitions.len(),
        rf,
        overrides.join(",")
    );
    for p in &t.partitions {
        let leader = p.leader.map_or("none".to_owned(), |l| l.to_string());
        let _ = write!(
            out,
            "\tTopic: {}\tPartition: {}\tLeader: {}\tReplicas: {}\tIsr: {}",
            t.name,
            p.partition,
            leader,
            ids(&p.replicas),
            ids(&p.isr)
        );
        if !p.offline_replicas.is_empty() {
            let _ = write!(out, "\tOffline: {}", ids(&p.offline_replicas));
        }
        if let Some(e) = p.error {
            let _ = write!(out, "\tError: {e}");
        }
        out.push('\n');
    }
}

/// Runs `baton cluster ...`.
pub async fn cluster(admin: &Admin, command: ClusterCommand) -> Result<(), CliError> {
    match command {
        ClusterCommand::Describe => {
            let c = admin.describe_cluster_info(false).await?;
            let mut out = String::new();
            let _ = writeln!(out, "Cluster: {}", c.cluster_id);
            let _ = writeln!(
                out,
                "Controller: {}",
                c.controller_id
                    .map_or("(unknown)".to_owned(), |c| c.to_string())
            );
            for b in &c.brokers {
                let _ = write!(out, "Broker: {}\t{}", b.node_id, b.addr());
                if let Some(rack) = &b.rack {
                    let _ = write!(out, "\track={rack}");
                }
                out.push('\n');
            }
            print!("{out}");
            Ok(())
        }
    }
}
