//! Authorization: ACLs with Apache Kafka's `StandardAuthorizer` semantics.
//!
//! Off unless [`BrokerConfig::authorizer`](crate::BrokerConfig::authorizer) is set.
//! The decision (`authorizer.rs`) and the matching rules (`binding.rs`) are pure
//! functions over a set of bindings: a standalone node's own (`store.rs`, held by
//! [`Authorizer`] behind a lock), or a cluster node's metadata image's (the
//! controller's ACL records). Handlers ask through `BrokerState::allowed`, with
//! the [`RequestContext`] of the connection a request came on (`context.rs`).

mod authorizer;
mod binding;
mod context;
mod store;

use std::collections::BTreeSet;
use std::sync::RwLock;

use baton_protocol::acl::{AclBinding, AclBindingFilter, AclOperation, ResourceType};

pub use authorizer::AuthorizerConfig;
pub(crate) use context::RequestContext;
pub(crate) use store::{matching, StoreError};

use authorizer::Requester;
use store::AclStore;

/// A node's authorizer: its settings and its ACLs.
#[derive(Debug)]
pub(crate) struct Authorizer {
    config: AuthorizerConfig,
    acls: RwLock<AclStore>,
}

impl Authorizer {
    /// An authorizer with no ACLs, holding at most `max_acls`.
    pub(crate) fn new(config: AuthorizerConfig, max_acls: usize) -> Authorizer {
        Authorizer {
            config,
            acls: RwLock::new(AclStore::new(max_acls)),
        }
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, AclStore> {
        self.acls.read().unwrap_or_else(|p| p.into_inner())
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, AclStore> {
        self.acls.write().unwrap_or_else(|p| p.into_inner())
    }

    /// Whether the requester of `ctx` may do `op` on `(resource_type, name)`
    /// under the bindings `acls` (`None`: this node's own).
    pub(crate) fn allowed(
        &self,
        acls: Option<&BTreeSet<AclBinding>>,
        ctx: &RequestContext,
        op: AclOperation,
        resource_type: ResourceType,
        name: &str,
    ) -> bool {
        let who = Requester {
            principal: &ctx.principal,
            host: &ctx.host,
        };
        match acls {
            Some(acls) => authorizer::allowed(&self.config, acls, who, op, resource_type, name),
            None => {
                let own = self.read();
                authorizer::allowed(&self.config, own.bindings(), who, op, resource_type, name)
            }
        }
    }

    /// Whether the requester of `ctx` may do `op` on some resource of
    /// `resource_type` (Kafka's `authorizeByResourceType`) under the bindings
    /// `acls` (`None`: this node's own).
    pub(crate) fn allowed_on_any(
        &self,
        acls: Option<&BTreeSet<AclBinding>>,
        ctx: &RequestContext,
        op: AclOperation,
        resource_type: ResourceType,
    ) -> bool {
        let who = Requester {
            principal: &ctx.principal,
            host: &ctx.host,
        };
        match acls {
            Some(acls) => authorizer::allowed_on_any(&self.config, acls, who, op, resource_type),
            None => {
                let own = self.read();
                authorizer::allowed_on_any(&self.config, own.bindings(), who, op, resource_type)
            }
        }
    }

    /// Adds a (valid) binding.
    pub(crate) fn add(&self, binding: AclBinding) -> Result<(), StoreError> {
        self.write().add(binding)
    }

    /// The bindings `filter` selects.
    pub(crate) fn describe(&self, filter: &AclBindingFilter) -> Vec<AclBinding> {
        self.read().matching(filter).cloned().collect()
    }

    /// Removes and returns the bindings `filter` selects.
    pub(crate) fn remove_matching(&self, filter: &AclBindingFilter) -> Vec<AclBinding> {
        self.write().remove_matching(filter)
    }
}
