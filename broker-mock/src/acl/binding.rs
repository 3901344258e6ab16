//! How ACL bindings match: a pattern against a resource, a filter against a
//! binding (DescribeAcls, DeleteAcls), an entry against a principal, a host and an
//! operation (with the operations Kafka implies). Pure functions over the shared
//! vocabulary of `baton_protocol::acl`.

use baton_protocol::acl::{
    AccessControlEntry, AclBinding, AclBindingFilter, AclOperation, AclPermissionType, PatternType,
    ResourcePattern, ResourceType, WILDCARD, WILDCARD_PRINCIPAL,
};

/// Whether `pattern` covers the resource `(resource_type, name)`: the literal name,
/// the literal `*`, or a prefix of the name.
pub(crate) fn pattern_covers(
    pattern: &ResourcePattern,
    resource_type: ResourceType,
    name: &str,
) -> bool {
    if pattern.resource_type != resource_type {
        return false;
    }
    match pattern.pattern_type {
        PatternType::Literal => pattern.name == name || pattern.name == WILDCARD,
        PatternType::Prefixed => name.starts_with(pattern.name.as_str()),
        _ => false,
    }
}

/// Whether a filter selects `binding`, as Kafka's `AclBindingFilter.matches`: a
/// `Match` filter with a name selects every pattern that covers that name; `Any`
/// or a concrete pattern type with a name selects that exact name.
pub(crate) fn filter_matches(filter: &AclBindingFilter, binding: &AclBinding) -> bool {
    let p = &binding.pattern;
    let e = &binding.entry;
    if filter.resource_type != ResourceType::Any && filter.resource_type != p.resource_type {
        return false;
    }
    if !matches!(filter.pattern_type, PatternType::Any | PatternType::Match)
        && filter.pattern_type != p.pattern_type
    {
        return false;
    }
    let name_matches = match &filter.name {
        None => true,
        Some(name) if filter.pattern_type == PatternType::Match => {
            pattern_covers(p, p.resource_type, name)
        }
        Some(name) => *name == p.name,
    };
    name_matches
        && filter.principal.as_ref().is_none_or(|f| *f == e.principal)
        && filter.host.as_ref().is_none_or(|f| *f == e.host)
        && (filter.operation == AclOperation::Any || filter.operation == e.operation)
        && (filter.permission_type == AclPermissionType::Any
            || filter.permission_type == e.permission_type)
}

/// Whether `entry` names `principal` (exactly, or `User:*` for any user) and
/// `host` (exactly, or `*`).
pub(crate) fn entry_applies_to(entry: &AccessControlEntry, principal: &str, host: &str) -> bool {
    let principal_ok = entry.principal == principal
        || (entry.principal == WILDCARD_PRINCIPAL && principal.starts_with("User:"));
    principal_ok && (entry.host == WILDCARD || entry.host == host)
}

/// Whether an entry with `acl_op` and `permission` grants or refuses `op`. A deny
/// refuses only its own operation (or all, with `All`); an allow also grants the
/// operations Kafka implies: Describe by Read, Write, Delete and Alter;
/// DescribeConfigs by AlterConfigs.
pub(crate) fn operation_covered(
    acl_op: AclOperation,
    permission: AclPermissionType,
    op: AclOperation,
) -> bool {
    if acl_op == AclOperation::All || acl_op == op {
        return true;
    }
    if permission == AclPermissionType::Deny {
        return false;
    }
    match op {
        AclOperation::Describe => matches!(
            acl_op,
            AclOperation::Read | AclOperation::Write | AclOperation::Delete | AclOperation::Alter
        ),
        AclOperation::DescribeConfigs => acl_op == AclOperation::AlterConfigs,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn binding(name: &str, pattern_type: PatternType) -> AclBinding {
        AclBinding {
            pattern: ResourcePattern {
                resource_type: ResourceType::Topic,
                name: name.into(),
                pattern_type,
            },
            entry: AccessControlEntry {
                principal: "User:alice".into(),
                host: "*".into(),
                operation: AclOperation::Read,
                permission_type: AclPermissionType::Allow,
            },
        }
    }

    #[test]
    fn patterns_cover_literal_wildcard_and_prefixed_names() {
        let t = ResourceType::Topic;
        assert!(pattern_covers(
            &binding("orders", PatternType::Literal).pattern,
            t,
            "orders"
        ));
        assert!(!pattern_covers(
            &binding("orders", PatternType::Literal).pattern,
            t,
            "orders2"
        ));
        assert!(pattern_covers(
            &binding("*", PatternType::Literal).pattern,
            t,
            "x"
        ));
        assert!(pattern_covers(
            &binding("ord", PatternType::Prefixed).pattern,
            t,
            "orders"
        ));
        assert!(!pattern_covers(
            &binding("*", PatternType::Prefixed).pattern,
            t,
            "orders"
        ));
        assert!(!pattern_covers(
            &binding("orders", PatternType::Literal).pattern,
            ResourceType::Group,
            "orders"
        ));
    }

    #[test]
    fn filters_select_as_kafka_does() {
        let lit = binding("orders", PatternType::Literal);
        let pre = binding("ord", PatternType::Prefixed);
        let star = binding("*", PatternType::Literal);
        let by = |pattern_type, name: &str| AclBindingFilter {
            name: Some(name.into()),
            pattern_type,
            ..AclBindingFilter::any()
        };
        let m = by(PatternType::Match, "orders");
        assert!(filter_matches(&m, &lit) && filter_matches(&m, &pre) && filter_matches(&m, &star));
        let any = by(PatternType::Any, "orders");
        assert!(filter_matches(&any, &lit) && !filter_matches(&any, &pre));
        let p = by(PatternType::Prefixed, "ord");
        assert!(filter_matches(&p, &pre) && !filter_matches(&p, &lit));
        assert!(filter_matches(&AclBindingFilter::any(), &pre));
        let other_user = AclBindingFilter {
            principal: Some("User:bob".into()),
            ..AclBindingFilter::any()
        };
        assert!(!filter_matches(&other_user, &lit));
        let deny = AclBindingFilter {
            permission_type: AclPermissionType::Deny,
            ..AclBindingFilter::any()
        };
        assert!(!filter_matches(&deny, &lit));
    }

    #[test]
    fn implied_operations_follow_kafka() {
        use AclOperation::*;
        use AclPermissionType::*;
        for op in [Read, Write, Delete, Alter] {
            assert!(operation_covered(op, Allow, Describe));
            assert!(
                !operation_covered(op, Deny, Describe),
                "a deny implies nothing"
            );
        }
        assert!(operation_covered(AlterConfigs, Allow, DescribeConfigs));
        assert!(!operation_covered(Create, Allow, Describe));
        assert!(!operation_covered(Read, Allow, Write));
        assert!(operation_covered(All, Deny, Write));
    }

    #[test]
    fn entries_apply_to_named_or_wildcard_principals_and_hosts() {
        let mut e = binding("t", PatternType::Literal).entry;
        assert!(entry_applies_to(&e, "User:alice", "10.0.0.1"));
        assert!(!entry_applies_to(&e, "User:bob", "10.0.0.1"));
        e.principal = "User:*".into();
        e.host = "127.0.0.1".into();
        assert!(entry_applies_to(&e, "User:bob", "127.0.0.1"));
        assert!(!entry_applies_to(&e, "User:bob", "10.0.0.1"));
    }
}
