//! `baton groups`: listing, describing and deleting consumer groups, their
//! committed offsets and lag, resetting those offsets (a dry run unless
//! `--execute`) and deleting them per topic, on the SDK's group [`Admin`] calls.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use baton_kafka::{
    Admin, AdminError, Client, GroupOffsetReset, GroupState, GroupType, ListGroupsFilter,
    TopicPartition,
};
use baton_protocol::ErrorCode;

use crate::args::{GroupsCommand, ResetArgs};
use crate::error::CliError;

/// Runs `baton groups ...`.
pub async fn run(client: &Client, admin: &Admin, command: GroupsCommand) -> Result<(), CliError> {
    match command {
        GroupsCommand::List { state, group_type } => {
            let filter = ListGroupsFilter::all()
                .states(state.iter().map(|s| GroupState::parse(s)))
                .types(group_type.iter().map(|t| GroupType::parse(t)));
            let mut out = String::new();
            for g in admin.list_groups(&filter).await? {
                let kind = g.group_type.as_ref().map_or("-", GroupType::name);
                let state = g.state.as_ref().map_or("-", GroupState::name);
                let _ = writeln!(out, "{}\t{kind}\t{state}", g.group_id);
            }
            print!("{out}");
            Ok(())
        }
        GroupsCommand::Describe { groups } => describe(admin, &groups).await,
        GroupsCommand::Delete { groups } => match admin.delete_groups(groups.iter().cloned()).await
        {
            Ok(()) => {
                for g in &groups {
                    println!("deleted group {g}");
                }
                Ok(())
            }
            Err(e) => Err(group_error(e)),
        },
        GroupsCommand::Offsets { group } => {
            let offsets = admin
                .group_offsets(group.clone())
                .await
                .map_err(group_error)?;
            if offsets.is_empty() {
                return Err(no_offsets(&group));
            }
            let mut out = String::from("TOPIC\tPARTITION\tOFFSET\n");
            for (tp, o) in offsets {
                let _ = writeln!(out, "{}\t{}\t{}", tp.topic, tp.partition, o.offset);
            }
            print!("{out}");
            Ok(())
        }
        GroupsCommand::Lag { group } => {
            let lag = admin
                .consumer_group_lag(group.clone())
                .await
                .map_err(group_error)?;
            if lag.is_empty() {
                return Err(no_offsets(&group));
            }
            let mut out = String::from("TOPIC\tPARTITION\tCOMMITTED\tLOG-END\tLAG\n");
            for l in &lag {
                let _ = writeln!(
                    out,
                    "{}\t{}\t{}\t{}\t{}",
                    l.partition.topic, l.partition.partition, l.committed, l.log_end, l.lag
                );
            }
            let total: i64 = lag.iter().map(|l| l.lag).sum();
            let _ = writeln!(out, "total lag: {total}");
            print!("{out}");
            Ok(())
        }
        GroupsCommand::ResetOffsets(args) => reset(client, admin, args).await,
        GroupsCommand::DeleteOffsets { group, topic } => {
            delete_offsets(admin, &group, &topic).await
        }
    }
}

/// `groups delete-offsets`: a topic without partitions stands for the partitions
/// the group has offsets for (so that a deleted topic's can go too).
async fn delete_offsets(admin: &Admin, group: &str, specs: &[String]) -> Result<(), CliError> {
    let committed: Vec<TopicPartition> = admin
        .group_offsets(group.to_owned())
        .await
        .map_err(group_error)?
        .into_keys()
        .collect();
    if committed.is_empty() {
        return Err(no_offsets(group));
    }
    let mut partitions = Vec::new();
    for spec in specs {
        let (topic, wanted) = parse_topic_spec(spec)?;
        let of_topic = committed.iter().filter(|tp| &*tp.topic == topic);
        let chosen: Vec<TopicPartition> = match wanted {
            Some(ps) => ps
                .into_iter()
                .map(|p| TopicPartition::new(topic, p))
                .collect(),
            None => of_topic.cloned().collect(),
        };
        if chosen.is_empty() {
            return Err(CliError::not_found(format!(
                "group {group:?} has no committed offsets of topic {topic:?}"
            ))
            .hint(format!("`baton groups offsets {group}` shows them")));
        }
        partitions.extend(chosen);
    }
    partitions.sort();
    partitions.dedup();
    admin
        .delete_consumer_group_offsets(group.to_owned(), partitions.clone())
        .await
        .map_err(|e| delete_offsets_error(group, e))?;
    println!(
        "deleted the committed offsets of group {group} for {}",
        self::partitions(&partitions)
    );
    Ok(())
}

/// An error of `groups delete-offsets`: partitions refused because the group's
/// members subscribe to their topics are said so.
fn delete_offsets_error(group: &str, e: AdminError) -> CliError {
    let AdminError::GroupOffsets(failures) = &e else {
        return group_error(e);
    };
    let mut subscribed: Vec<&str> = failures
        .iter()
        .filter(|f| f.code == ErrorCode::GroupSubscribedToTopic)
        .map(|f| &*f.partition.topic)
        .collect();
    subscribed.dedup();
    if subscribed.is_empty() {
        return CliError::from(e);
    }
    let others = failures
        .iter()
        .filter(|f| f.code != ErrorCode::GroupSubscribedToTopic)
        .count();
    let mut message = format!(
        "the members of group {group:?} still subscribe to topic(s) {}: their offsets were not deleted",
        subscribed.join(", ")
    );
    if others > 0 {
        message.push_str(&format!(" (and: {e})"));
    }
    CliError::failure(message).hint(
        "stop the group's consumers (or let them unsubscribe from the topic) first; \
         `baton groups describe` shows the members",
    )
}

/// `TOPIC` or `TOPIC:P,P`.
fn parse_topic_spec(spec: &str) -> Result<(&str, Option<Vec<i32>>), CliError> {
    match spec.split_once(':') {
        Some((t, ps)) => {
            let ps: Result<Vec<i32>, _> = ps.split(',').map(str::parse).collect();
            let ps = ps.map_err(|_| {
                CliError::usage(format!(
                    "--topic {spec:?}: expected TOPIC or TOPIC:P,P (partition numbers)"
                ))
            })?;
            Ok((t, Some(ps)))
        }
        None => Ok((spec, None)),
    }
}

/// A group without committed offsets: nothing to show.
fn no_offsets(group: &str) -> CliError {
    CliError::not_found(format!("group {group:?} has no committed offsets"))
        .hint("`baton groups list` shows the groups")
}

/// An admin error of a group call, with what to do for the usual refusals.
fn group_error(e: AdminError) -> CliError {
    let codes: Vec<ErrorCode> = match &e {
        AdminError::Groups(fs) => fs.iter().map(|f| f.code).collect(),
        _ => Vec::new(),
    };
    let err = CliError::from(e);
    if !codes.is_empty() && codes.iter().all(|c| *c == ErrorCode::GroupIdNotFound) {
        CliError::not_found(err.message).hint("`baton groups list` shows the groups")
    } else if codes.contains(&ErrorCode::NonEmptyGroup) {
        err.hint("stop the group's consumers first: a group with members cannot be deleted")
    } else {
        err
    }
}

async fn describe(admin: &Admin, groups: &[String]) -> Result<(), CliError> {
    let described = admin
        .describe_groups(groups.iter().cloned())
        .await
        .map_err(group_error)?;
    let mut out = String::new();
    let mut missing = Vec::new();
    for g in &described {
        if g.state == GroupState::Dead {
            missing.push(g.group_id.clone());
            continue;
        }
        let _ = write!(
            out,
            "Group: {}\tType: {}\tState: {}\tCoordinator: {}",
            g.group_id, g.group_type, g.state, g.coordinator
        );
        if !g.assignor.is_empty() {
            let _ = write!(out, "\tAssignor: {}", g.assignor);
        }
        if let Some(e) = g.group_epoch {
            let _ = write!(out, "\tEpoch: {e}");
        }
        let _ = writeln!(out, "\tMembers: {}", g.members.len());
        for m in &g.members {
            let _ = write!(
                out,
                "\tMember: {}\tClient: {}\tHost: {}",
                m.member_id, m.client_id, m.host
            );
            if let Some(i) = &m.instance_id {
                let _ = write!(out, "\tInstance: {i}");
            }
            let _ = writeln!(out, "\tAssignment: {}", partitions(&m.assignment));
        }
    }
    print!("{out}");
    if missing.is_empty() {
        Ok(())
    } else {
        Err(
            CliError::not_found(format!("no such group: {}", missing.join(", ")))
                .hint("`baton groups list` shows the groups"),
        )
    }
}

/// `t/0,t/1,u/0`.
fn partitions(tps: &[TopicPartition]) -> String {
    tps.iter()
        .map(|tp| format!("{}/{}", tp.topic, tp.partition))
        .collect::<Vec<_>>()
        .join(",")
}

/// The partitions of `--topic TOPIC[:P,P]` arguments.
fn topic_partitions(client: &Client, specs: &[String]) -> Result<Vec<TopicPartition>, CliError> {
    let meta = client.metadata();
    let mut out = Vec::new();
    for spec in specs {
        let (topic, wanted) = parse_topic_spec(spec)?;
        let Some(t) = meta.topic(topic) else {
            return Err(CliError::unknown_topic(topic));
        };
        let all: Vec<i32> = t.partitions.iter().map(|p| p.partition).collect();
        for p in wanted.unwrap_or_else(|| all.clone()) {
            if !all.contains(&p) {
                return Err(CliError::not_found(format!(
                    "topic {topic:?} has no partition {p}"
                )));
            }
            out.push(TopicPartition::new(topic, p));
        }
    }
    Ok(out)
}

async fn reset(client: &Client, admin: &Admin, args: ResetArgs) -> Result<(), CliError> {
    let to = match (
        args.to_earliest,
        args.to_latest,
        args.to_datetime.or(args.to_timestamp),
        args.shift_by,
        args.to_offset,
    ) {
        (true, ..) => GroupOffsetReset::Earliest,
        (_, true, ..) => GroupOffsetReset::Latest,
        (_, _, Some(t), ..) => GroupOffsetReset::Timestamp(t),
        (_, _, _, Some(n), _) => GroupOffsetReset::ShiftBy(n),
        (.., Some(o)) => GroupOffsetReset::Offset(o),
        _ => {
            return Err(CliError::usage(
                "say where to: --to-earliest, --to-latest, ...",
            ))
        }
    };
    client.refresh_metadata().await?;
    let partitions = topic_partitions(client, &args.topic)?;
    let plan: BTreeMap<TopicPartition, i64> = if args.execute {
        admin
            .reset_consumer_group_offsets(args.group.clone(), partitions, to)
            .await
    } else {
        admin
            .plan_consumer_group_offsets_reset(args.group.clone(), partitions, to)
            .await
    }
    .map_err(group_error)?;
    if plan.is_empty() {
        return Err(no_offsets(&args.group).hint(
            "with --all-topics only partitions with committed offsets move; name them with --topic",
        ));
    }
    let mut out = String::from("TOPIC\tPARTITION\tNEW-OFFSET\n");
    for (tp, o) in &plan {
        let _ = writeln!(out, "{}\t{}\t{o}", tp.topic, tp.partition);
    }
    if args.execute {
        let _ = writeln!(
            out,
            "committed {} offset(s) of group {}",
            plan.len(),
            args.group
        );
    } else {
        let _ = writeln!(out, "dry run: nothing changed; pass --execute to commit");
    }
    print!("{out}");
    Ok(())
}
