//! One resource's IncrementalAlterConfigs changes applied to its current
//! overrides, without I/O: the same rules on a standalone node
//! (`handlers/incremental_alter_configs.rs`) and on a cluster's controller
//! (`cluster/controller_server.rs`).
//!
//! A topic's changes are checked together and apply all or none:
//! - a key named twice, an unknown operation, or a SET/APPEND/SUBTRACT without a
//!   value is INVALID_REQUEST;
//! - an unknown key, a bad value ([`validate_config`]), APPEND/SUBTRACT on a key
//!   that is not a list, an empty `cleanup.policy`, or a key this broker accepts at
//!   creation but cannot change on a live topic ([`LIVE_TOPIC_CONFIGS`] lists the
//!   ones it can) is INVALID_CONFIG, with a message naming the key and why.

use std::collections::BTreeMap;

use baton_protocol::messages::{
    AlterableConfig, CONFIG_OP_APPEND, CONFIG_OP_DELETE, CONFIG_OP_SET, CONFIG_OP_SUBTRACT,
};
use baton_protocol::ErrorCode;

use crate::topic_limits::Refusal;
use crate::topics::validate_config;

/// The topic configs a live topic honours as soon as they change: retention and
/// rolling (each maintenance pass reads them), cleaning (each cleaner pass),
/// produce-time checks (`message.timestamp.type`, `max.message.bytes`), and the
/// controller's and leaders' `min.insync.replicas` and
/// `unclean.leader.election.enable`.
pub(crate) const LIVE_TOPIC_CONFIGS: &[&str] = &[
    "cleanup.policy",
    "delete.retention.ms",
    "max.compaction.lag.ms",
    "max.message.bytes",
    "message.timestamp.type",
    "min.cleanable.dirty.ratio",
    "min.compaction.lag.ms",
    "min.insync.replicas",
    "retention.bytes",
    "retention.ms",
    "segment.ms",
    "unclean.leader.election.enable",
];

/// The cluster-wide broker defaults this broker takes dynamically (the broker
/// resource named ""): the retention and rolling defaults of topics that set
/// none, applied by the next maintenance pass.
pub(crate) const DYNAMIC_BROKER_DEFAULTS: &[&str] =
    &["log.retention.ms", "log.retention.bytes", "log.roll.ms"];

/// `current` cluster-wide broker defaults with `changes` (SET and DELETE only)
/// applied, or why they are refused (INVALID_CONFIG naming the key).
pub(crate) fn apply_broker_default_changes(
    current: &BTreeMap<String, String>,
    changes: &[AlterableConfig],
) -> Result<BTreeMap<String, String>, Refusal> {
    let mut seen = std::collections::HashSet::new();
    let mut out = current.clone();
    for c in changes {
        let key = c.name.as_str();
        if !seen.insert(key) {
            return Err(invalid_request(format!(
                "Error due to duplicate config keys: {key}"
            )));
        }
        if !DYNAMIC_BROKER_DEFAULTS.contains(&key) {
            return Err(invalid_config(format!(
                "Cannot change broker config {key} dynamically: this broker's other settings \
                 are static (set them at start-up); dynamic: {}",
                DYNAMIC_BROKER_DEFAULTS.join(", ")
            )));
        }
        match c.config_operation {
            CONFIG_OP_SET => {
                let v = c.value.clone().ok_or_else(|| {
                    invalid_request(format!("Null value not supported for: {key}"))
                })?;
                let min = match key {
                    "log.retention.ms" => -1,
                    "log.roll.ms" => 1,
                    _ => i64::MIN,
                };
                match v.trim().parse::<i64>() {
                    Ok(n) if n >= min => {}
                    Ok(n) => {
                        return Err(invalid_config(format!(
                            "invalid value for {key}: value {n} is below the minimum {min}"
                        )))
                    }
                    Err(_) => {
                        return Err(invalid_config(format!(
                            "invalid value for {key}: {v:?} is not an integer"
                        )))
                    }
                }
                out.insert(key.to_owned(), v.trim().to_owned());
            }
            CONFIG_OP_DELETE => {
                out.remove(key);
            }
            CONFIG_OP_APPEND | CONFIG_OP_SUBTRACT => {
                return Err(invalid_config(format!(
                    "Config value append/subtract is not allowed for config key: {key} \
                     (not a list)"
                )))
            }
            op => {
                return Err(invalid_request(format!(
                    "Unknown config operation {op} for {key}"
                )))
            }
        }
    }
    Ok(out)
}

/// List-valued topic configs (APPEND and SUBTRACT apply to them), with their
/// default when unset.
const LIST_CONFIGS: &[(&str, &str)] = &[("cleanup.policy", "delete")];

fn invalid_config(message: String) -> Refusal {
    (ErrorCode::InvalidConfig, message)
}

fn invalid_request(message: String) -> Refusal {
    (ErrorCode::InvalidRequest, message)
}

/// `current` topic overrides with `changes` applied, or why they are refused.
pub(crate) fn apply_topic_changes(
    current: &BTreeMap<String, String>,
    changes: &[AlterableConfig],
) -> Result<BTreeMap<String, String>, Refusal> {
    let mut seen = std::collections::HashSet::new();
    for c in changes {
        if !seen.insert(c.name.as_str()) {
            return Err(invalid_request(format!(
                "Error due to duplicate config keys: {}",
                c.name
            )));
        }
    }
    let mut out = current.clone();
    for c in changes {
        let key = c.name.as_str();
        // Unknown keys first, whatever the operation: the message says so.
        if let Err(why) = validate_config(key, Some("")) {
            if why.contains("unknown topic config") {
                return Err(invalid_config(format!("Unknown topic config name: {key}")));
            }
        }
        if !LIVE_TOPIC_CONFIGS.contains(&key) {
            return Err(invalid_config(format!(
                "{key} cannot be changed on an existing topic by this broker (it applies \
                 when a topic is created); changeable: {}",
                LIVE_TOPIC_CONFIGS.join(", ")
            )));
        }
        let list_default = LIST_CONFIGS
            .iter()
            .find(|(k, _)| *k == key)
            .map(|(_, d)| *d);
        let value = || {
            c.value
                .clone()
                .ok_or_else(|| invalid_request(format!("Null value not supported for: {key}")))
        };
        match c.config_operation {
            CONFIG_OP_SET => {
                out.insert(key.to_owned(), value()?);
            }
            CONFIG_OP_DELETE => {
                out.remove(key);
            }
            CONFIG_OP_APPEND | CONFIG_OP_SUBTRACT => {
                let Some(default) = list_default else {
                    return Err(invalid_config(format!(
                        "Config value append/subtract is not allowed for config key: {key} \
                         (not a list)"
                    )));
                };
                let arg = value()?;
                let items: Vec<String> = arg.split(',').map(|s| s.trim().to_owned()).collect();
                let mut list: Vec<String> = out
                    .get(key)
                    .map_or(default, String::as_str)
                    .split(',')
                    .map(|s| s.trim().to_owned())
                    .filter(|s| !s.is_empty())
                    .collect();
                if c.config_operation == CONFIG_OP_APPEND {
                    for item in items {
                        if !list.contains(&item) {
                            list.push(item);
                        }
                    }
                } else {
                    list.retain(|x| !items.contains(x));
                }
                if list.is_empty() {
                    return Err(invalid_config(format!(
                        "invalid value for {key}: the list may not be empty"
                    )));
                }
                out.insert(key.to_owned(), list.join(","));
            }
            op => {
                return Err(invalid_request(format!(
                    "Unknown config operation {op} for {key}"
                )))
            }
        }
        if let Some(v) = out.get(key) {
            validate_config(key, Some(v)).map_err(invalid_config)?;
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn op(name: &str, config_operation: i8, value: Option<&str>) -> AlterableConfig {
        AlterableConfig {
            name: name.into(),
            config_operation,
            value: value.map(Into::into),
        }
    }

    fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn set_delete_append_subtract() {
        let current = map(&[("retention.ms", "1000")]);
        let got = apply_topic_changes(
            &current,
            &[
                op("retention.ms", CONFIG_OP_DELETE, None),
                op("max.message.bytes", CONFIG_OP_SET, Some("2048")),
                op("cleanup.policy", CONFIG_OP_APPEND, Some("compact")),
            ],
        )
        .unwrap();
        assert_eq!(
            got,
            map(&[
                ("cleanup.policy", "delete,compact"),
                ("max.message.bytes", "2048")
            ])
        );
        let got = apply_topic_changes(
            &got,
            &[op("cleanup.policy", CONFIG_OP_SUBTRACT, Some("delete"))],
        )
        .unwrap();
        assert_eq!(got.get("cleanup.policy").unwrap(), "compact");
        // Appending what is there already changes nothing.
        let again = apply_topic_changes(
            &got,
            &[op("cleanup.policy", CONFIG_OP_APPEND, Some("compact"))],
        )
        .unwrap();
        assert_eq!(again, got);
    }

    #[test]
    fn refusals_name_the_key_and_why() {
        let none = BTreeMap::new();
        let refused =
            |changes: &[AlterableConfig]| apply_topic_changes(&none, changes).unwrap_err();

        let (code, msg) = refused(&[op("retention.ms", CONFIG_OP_SET, Some("soon"))]);
        assert_eq!(code, ErrorCode::InvalidConfig);
        assert!(
            msg.contains("retention.ms") && msg.contains("not an integer"),
            "{msg}"
        );

        let (code, msg) = refused(&[op("no.such.key", CONFIG_OP_SET, Some("1"))]);
        assert_eq!(code, ErrorCode::InvalidConfig);
        assert!(
            msg.contains("Unknown topic config name: no.such.key"),
            "{msg}"
        );

        let (code, msg) = refused(&[op("segment.bytes", CONFIG_OP_SET, Some("1048576"))]);
        assert_eq!(code, ErrorCode::InvalidConfig);
        assert!(msg.contains("segment.bytes cannot be changed"), "{msg}");

        let (code, msg) = refused(&[op("retention.ms", CONFIG_OP_APPEND, Some("5"))]);
        assert_eq!(code, ErrorCode::InvalidConfig);
        assert!(
            msg.contains("retention.ms") && msg.contains("not a list"),
            "{msg}"
        );

        let (code, _) = refused(&[op("cleanup.policy", CONFIG_OP_SUBTRACT, Some("delete"))]);
        assert_eq!(code, ErrorCode::InvalidConfig);

        let (code, msg) = refused(&[
            op("retention.ms", CONFIG_OP_SET, Some("5")),
            op("retention.ms", CONFIG_OP_DELETE, None),
        ]);
        assert_eq!(code, ErrorCode::InvalidRequest);
        assert!(msg.contains("duplicate"), "{msg}");

        let (code, _) = refused(&[op("retention.ms", CONFIG_OP_SET, None)]);
        assert_eq!(code, ErrorCode::InvalidRequest);
        let (code, _) = refused(&[op("retention.ms", 9, Some("5"))]);
        assert_eq!(code, ErrorCode::InvalidRequest);
    }

    #[test]
    fn broker_defaults_take_retention_keys_only() {
        let got = apply_broker_default_changes(
            &BTreeMap::new(),
            &[op("log.retention.ms", CONFIG_OP_SET, Some("60000"))],
        )
        .unwrap();
        assert_eq!(got, map(&[("log.retention.ms", "60000")]));
        let gone =
            apply_broker_default_changes(&got, &[op("log.retention.ms", CONFIG_OP_DELETE, None)])
                .unwrap();
        assert!(gone.is_empty());
        let (code, msg) =
            apply_broker_default_changes(&got, &[op("num.io.threads", CONFIG_OP_SET, Some("8"))])
                .unwrap_err();
        assert_eq!(code, ErrorCode::InvalidConfig);
        assert!(msg.contains("num.io.threads"), "{msg}");
        let (code, msg) =
            apply_broker_default_changes(&got, &[op("log.roll.ms", CONFIG_OP_SET, Some("0"))])
                .unwrap_err();
        assert_eq!(code, ErrorCode::InvalidConfig);
        assert!(msg.contains("log.roll.ms"), "{msg}");
    }

    #[test]
    fn a_refused_change_applies_nothing() {
        let current = map(&[("retention.ms", "1000")]);
        let err = apply_topic_changes(
            &current,
            &[
                op("retention.ms", CONFIG_OP_SET, Some("5")),
                op("max.message.bytes", CONFIG_OP_SET, Some("-3")),
            ],
        );
        assert!(err.is_err());
        assert_eq!(current, map(&[("retention.ms", "1000")]));
    }
}
