//! The authorization decision, with Apache Kafka's `StandardAuthorizer` semantics,
//! as pure functions over a set of bindings:
//!
//! - super users (`super.users`) are always allowed;
//! - a matching deny wins over every allow;
//! - an ACL matches a resource by its literal name, the literal `*`, or a prefix;
//!   a principal by name or `User:*`; a host by address or `*`;
//! - an allow also grants the implied operations (Describe by Read, Write, Delete
//!   and Alter; DescribeConfigs by AlterConfigs), and `All` covers everything;
//! - when no ACL at all covers the resource, `allow.everyone.if.no.acl.found`
//!   decides (false by default).
//!
//! [`allowed_on_any`] is Kafka's `authorizeByResourceType` (KIP-679), with which
//! InitProducerId lets Write on any topic stand for IdempotentWrite on the cluster.

use std::collections::BTreeSet;

use baton_protocol::acl::{
    AclBinding, AclOperation, AclPermissionType, PatternType, ResourceType, WILDCARD,
};

use super::binding::{entry_applies_to, operation_covered, pattern_covers};

/// The bindings of `acls` on resources of `resource_type`.
fn of_type(
    acls: &BTreeSet<AclBinding>,
    resource_type: ResourceType,
) -> impl Iterator<Item = &AclBinding> + '_ {
    acls.iter()
        .filter(move |b| b.pattern.resource_type == resource_type)
}

/// Turns authorization on for a broker (Kafka's `authorizer.class.name` set to
/// the StandardAuthorizer). Without it every request is allowed, and the ACL APIs
/// answer SECURITY_DISABLED.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AuthorizerConfig {
    /// Principals always allowed, such as `User:admin` (Kafka's `super.users`,
    /// there separated by `;`).
    pub super_users: Vec<String>,
    /// Whether a resource no ACL covers is open to everyone (Kafka's
    /// `allow.everyone.if.no.acl.found`, false by default).
    pub allow_everyone_if_no_acl_found: bool,
}

/// Who asks, from where.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Requester<'a> {
    /// `User:<name>`.
    pub principal: &'a str,
    /// The client's address as text.
    pub host: &'a str,
}

/// Whether `who` may do `op` on the resource `(resource_type, name)`.
pub(crate) fn allowed(
    config: &AuthorizerConfig,
    acls: &BTreeSet<AclBinding>,
    who: Requester<'_>,
    op: AclOperation,
    resource_type: ResourceType,
    name: &str,
) -> bool {
    if config.super_users.iter().any(|s| s == who.principal) {
        return true;
    }
    let mut any_acl = false;
    let mut allow = false;
    for b in of_type(acls, resource_type) {
        if !pattern_covers(&b.pattern, resource_type, name) {
            continue;
        }
        any_acl = true;
        let e = &b.entry;
        if !entry_applies_to(e, who.principal, who.host)
            || !operation_covered(e.operation, e.permission_type, op)
        {
            continue;
        }
        match e.permission_type {
            AclPermissionType::Deny => return false,
            AclPermissionType::Allow => allow = true,
            _ => {}
        }
    }
    if !any_acl {
        return config.allow_everyone_if_no_acl_found;
    }
    allow
}

/// Whether `who` may do `op` on at least one resource of `resource_type`: an
/// allow on some pattern that no deny of the same principal covers whole (a deny
/// on `*`, on the same literal name, or on a prefix of the allowed name).
pub(crate) fn allowed_on_any(
    config: &AuthorizerConfig,
    acls: &BTreeSet<AclBinding>,
    who: Requester<'_>,
    op: AclOperation,
    resource_type: ResourceType,
) -> bool {
    if config.super_users.iter().any(|s| s == who.principal) {
        return true;
    }
    let applies = |permission: AclPermissionType| {
        of_type(acls, resource_type).filter(move |b| {
            b.entry.permission_type == permission
                && entry_applies_to(&b.entry, who.principal, who.host)
                && operation_covered(b.entry.operation, permission, op)
        })
    };
    let denies: Vec<_> = applies(AclPermissionType::Deny).collect();
    let denied_whole = |name: &str, pattern_type: PatternType| {
        denies.iter().any(|d| {
            let p = &d.pattern;
            (p.pattern_type == PatternType::Literal && p.name == WILDCARD)
                || (p.pattern_type == PatternType::Prefixed && name.starts_with(p.name.as_str()))
                || (p.pattern_type == pattern_type && p.name == name)
        })
    };
    if applies(AclPermissionType::Allow)
        .any(|a| !denied_whole(&a.pattern.name, a.pattern.pattern_type))
    {
        return true;
    }
    config.allow_everyone_if_no_acl_found && of_type(acls, resource_type).next().is_none()
}

#[cfg(test)]
mod tests {
    use super::*;
    use baton_protocol::acl::{AccessControlEntry, ResourcePattern};

    const ALICE: Requester<'static> = Requester {
        principal: "User:alice",
        host: "127.0.0.1",
    };

    fn acl(
        resource_type: ResourceType,
        name: &str,
        pattern_type: PatternType,
        principal: &str,
        op: AclOperation,
        permission_type: AclPermissionType,
    ) -> AclBinding {
        AclBinding {
            pattern: ResourcePattern {
                resource_type,
                name: name.into(),
                pattern_type,
            },
            entry: AccessControlEntry {
                principal: principal.into(),
                host: "*".into(),
                operation: op,
                permission_type,
            },
        }
    }

    fn store(acls: Vec<AclBinding>) -> BTreeSet<AclBinding> {
        acls.into_iter().collect()
    }

    use AclOperation::*;
    use AclPermissionType::{Allow, Deny};
    use PatternType::{Literal, Prefixed};
    use ResourceType::{Cluster, Group, Topic};

    #[test]
    fn decision_table() {
        let cfg = AuthorizerConfig::default();
        // (acls, op, resource name, expected)
        let cases: Vec<(Vec<AclBinding>, AclOperation, &str, bool)> = vec![
            // No ACL covers the resource: denied by default.
            (vec![], Read, "t", false),
            // A literal allow.
            (
                vec![acl(Topic, "t", Literal, "User:alice", Read, Allow)],
                Read,
                "t",
                true,
            ),
            // Another topic's ACL does not apply, and covers nothing here.
            (
                vec![acl(Topic, "u", Literal, "User:alice", Read, Allow)],
                Read,
                "t",
                false,
            ),
            // The literal wildcard, and User:*.
            (
                vec![acl(Topic, "*", Literal, "User:*", Write, Allow)],
                Write,
                "t",
                true,
            ),
            // A prefix.
            (
                vec![acl(Topic, "ord", Prefixed, "User:alice", Read, Allow)],
                Read,
                "orders",
                true,
            ),
            (
                vec![acl(Topic, "ord", Prefixed, "User:alice", Read, Allow)],
                Read,
                "or",
                false,
            ),
            // Deny wins, whichever pattern carries it.
            (
                vec![
                    acl(Topic, "*", Literal, "User:alice", Read, Allow),
                    acl(Topic, "secret", Prefixed, "User:alice", Read, Deny),
                ],
                Read,
                "secret-1",
                false,
            ),
            (
                vec![
                    acl(Topic, "t", Literal, "User:alice", All, Allow),
                    acl(Topic, "t", Literal, "User:*", Write, Deny),
                ],
                Write,
                "t",
                false,
            ),
            // A deny of Write does not deny Read.
            (
                vec![
                    acl(Topic, "t", Literal, "User:alice", All, Allow),
                    acl(Topic, "t", Literal, "User:alice", Write, Deny),
                ],
                Read,
                "t",
                true,
            ),
            // Implied operations.
            (
                vec![acl(Topic, "t", Literal, "User:alice", Write, Allow)],
                Describe,
                "t",
                true,
            ),
            (
                vec![acl(Topic, "t", Literal, "User:alice", Delete, Allow)],
                Describe,
                "t",
                true,
            ),
            (
                vec![acl(Topic, "t", Literal, "User:alice", Alter, Allow)],
                Describe,
                "t",
                true,
            ),
            (
                vec![acl(Topic, "t", Literal, "User:alice", AlterConfigs, Allow)],
                DescribeConfigs,
                "t",
                true,
            ),
            (
                vec![acl(Topic, "t", Literal, "User:alice", Describe, Allow)],
                Read,
                "t",
                false,
            ),
            (
                vec![acl(Topic, "t", Literal, "User:alice", Create, Allow)],
                Describe,
                "t",
                false,
            ),
            // A deny of Read does not deny Describe (only All does).
            (
                vec![
                    acl(Topic, "t", Literal, "User:alice", Describe, Allow),
                    acl(Topic, "t", Literal, "User:alice", Read, Deny),
                ],
                Describe,
                "t",
                true,
            ),
            // Someone else's ACL covers the resource, so no fallback: denied.
            (
                vec![acl(Topic, "t", Literal, "User:bob", Read, Allow)],
                Read,
                "t",
                false,
            ),
            // A group ACL does not apply to a topic of the same name.
            (
                vec![acl(Group, "t", Literal, "User:alice", Read, Allow)],
                Read,
                "t",
                false,
            ),
        ];
        for (i, (acls, op, name, expected)) in cases.into_iter().enumerate() {
            let s = store(acls);
            assert_eq!(
                allowed(&cfg, &s, ALICE, op, Topic, name),
                expected,
                "case {i}"
            );
        }
    }

    #[test]
    fn hosts_must_match() {
        let mut b = acl(Topic, "t", Literal, "User:alice", Read, Allow);
        b.entry.host = "10.0.0.1".into();
        let s = store(vec![b]);
        let cfg = AuthorizerConfig::default();
        assert!(!allowed(&cfg, &s, ALICE, Read, Topic, "t"));
        let remote = Requester {
            host: "10.0.0.1",
            ..ALICE
        };
        assert!(allowed(&cfg, &s, remote, Read, Topic, "t"));
    }

    #[test]
    fn super_users_and_the_no_acl_fallback() {
        let deny = store(vec![acl(Topic, "t", Literal, "User:*", All, Deny)]);
        let cfg = AuthorizerConfig {
            super_users: vec!["User:alice".into()],
            allow_everyone_if_no_acl_found: false,
        };
        assert!(allowed(&cfg, &deny, ALICE, Write, Topic, "t"));
        let bob = Requester {
            principal: "User:bob",
            ..ALICE
        };
        assert!(!allowed(&cfg, &deny, bob, Write, Topic, "t"));
        let open = AuthorizerConfig {
            super_users: vec![],
            allow_everyone_if_no_acl_found: true,
        };
        assert!(
            allowed(&open, &deny, bob, Write, Topic, "u"),
            "no ACL covers u"
        );
        assert!(
            !allowed(&open, &deny, bob, Write, Topic, "t"),
            "an ACL covers t"
        );
    }

    #[test]
    fn write_on_any_topic_stands_for_idempotent_write() {
        let cfg = AuthorizerConfig::default();
        let s = store(vec![acl(Topic, "t", Literal, "User:alice", Write, Allow)]);
        assert!(allowed_on_any(&cfg, &s, ALICE, Write, Topic));
        assert!(!allowed_on_any(&cfg, &s, ALICE, Read, Topic));
        let s = store(vec![
            acl(Topic, "t", Literal, "User:alice", Write, Allow),
            acl(Topic, "*", Literal, "User:alice", Write, Deny),
        ]);
        assert!(!allowed_on_any(&cfg, &s, ALICE, Write, Topic));
        let s = store(vec![
            acl(Topic, "orders", Prefixed, "User:alice", Write, Allow),
            acl(Topic, "ord", Prefixed, "User:alice", Write, Deny),
        ]);
        assert!(!allowed_on_any(&cfg, &s, ALICE, Write, Topic));
        let s = store(vec![acl(
            Cluster,
            "kafka-cluster",
            Literal,
            "User:alice",
            IdempotentWrite,
            Allow,
        )]);
        assert!(allowed(
            &cfg,
            &s,
            ALICE,
            IdempotentWrite,
            Cluster,
            "kafka-cluster"
        ));
    }
}
