//! The ACL set of a standalone node: at most `max_acls` distinct bindings (Kafka
//! has no ceiling), selected by filters for DescribeAcls and DeleteAcls. (A
//! cluster node's set is its metadata image's, `ControllerState::acls`.)

use std::collections::BTreeSet;

use baton_protocol::acl::{AclBinding, AclBindingFilter};

use super::binding::filter_matches;

/// Why a binding was not added.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum StoreError {
    /// The store holds `max_acls` bindings already.
    #[error("the broker holds its limit of {0} ACLs (max_acls)")]
    Full(usize),
    /// Writing the changed set to the data directory failed; nothing changed.
    #[error("storing the ACLs failed: {0}")]
    Persist(String),
}

/// A set of distinct bindings. Invariant: `bindings.len() <= max`.
#[derive(Debug, Clone)]
pub(crate) struct AclStore {
    bindings: BTreeSet<AclBinding>,
    max: usize,
}

impl AclStore {
    /// An empty store holding at most `max` bindings.
    pub(crate) fn new(max: usize) -> AclStore {
        AclStore {
            bindings: BTreeSet::new(),
            max,
        }
    }

    /// Adds `binding`; adding one already present is a success that changes
    /// nothing, as in Kafka.
    pub(crate) fn add(&mut self, binding: AclBinding) -> Result<(), StoreError> {
        if self.bindings.contains(&binding) {
            return Ok(());
        }
        if self.bindings.len() >= self.max {
            return Err(StoreError::Full(self.max));
        }
        self.bindings.insert(binding);
        assert!(self.bindings.len() <= self.max);
        Ok(())
    }

    /// The bindings `filter` selects, in a stable order.
    pub(crate) fn matching<'a>(
        &'a self,
        filter: &'a AclBindingFilter,
    ) -> impl Iterator<Item = &'a AclBinding> + 'a {
        matching(&self.bindings, filter)
    }

    /// Removes and returns the bindings `filter` selects.
    pub(crate) fn remove_matching(&mut self, filter: &AclBindingFilter) -> Vec<AclBinding> {
        let gone: Vec<AclBinding> = self.matching(filter).cloned().collect();
        for b in &gone {
            self.bindings.remove(b);
        }
        gone
    }

    /// All bindings.
    pub(crate) fn bindings(&self) -> &BTreeSet<AclBinding> {
        &self.bindings
    }
}

/// The bindings of `set` that `filter` selects, in the set's order.
pub(crate) fn matching<'a>(
    set: &'a BTreeSet<AclBinding>,
    filter: &'a AclBindingFilter,
) -> impl Iterator<Item = &'a AclBinding> + 'a {
    set.iter().filter(move |b| filter_matches(filter, b))
}

#[cfg(test)]
mod tests {
    use super::*;
    use baton_protocol::acl::{
        AccessControlEntry, AclOperation, AclPermissionType, PatternType, ResourcePattern,
        ResourceType,
    };

    fn topic_read(name: &str, user: &str) -> AclBinding {
        AclBinding {
            pattern: ResourcePattern {
                resource_type: ResourceType::Topic,
                name: name.into(),
                pattern_type: PatternType::Literal,
            },
            entry: AccessControlEntry {
                principal: format!("User:{user}"),
                host: "*".into(),
                operation: AclOperation::Read,
                permission_type: AclPermissionType::Allow,
            },
        }
    }

    #[test]
    fn duplicates_are_kept_once_and_the_limit_holds() {
        let mut s = AclStore::new(2);
        s.add(topic_read("a", "x")).unwrap();
        s.add(topic_read("a", "x")).unwrap();
        assert_eq!(s.matching(&AclBindingFilter::any()).count(), 1);
        s.add(topic_read("b", "x")).unwrap();
        assert_eq!(s.add(topic_read("c", "x")), Err(StoreError::Full(2)));
        s.add(topic_read("a", "x")).unwrap();
        assert_eq!(s.matching(&AclBindingFilter::any()).count(), 2);
    }

    #[test]
    fn filters_select_and_remove() {
        let mut s = AclStore::new(10);
        for b in [
            topic_read("a", "x"),
            topic_read("b", "x"),
            topic_read("a", "y"),
        ] {
            s.add(b).unwrap();
        }
        let by_user = AclBindingFilter {
            principal: Some("User:x".into()),
            ..AclBindingFilter::any()
        };
        assert_eq!(s.matching(&by_user).count(), 2);
        let gone = s.remove_matching(&by_user);
        assert_eq!(gone.len(), 2);
        let left: Vec<_> = s.matching(&AclBindingFilter::any()).cloned().collect();
        assert_eq!(left, vec![topic_read("a", "y")]);
    }
}
