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
mod persist;
mod store;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::RwLock;

use baton_protocol::acl::{AclBinding, AclBindingFilter, AclOperation, ResourceType};

pub use authorizer::AuthorizerConfig;
pub(crate) use context::RequestContext;
pub(crate) use store::{matching, StoreError};

use authorizer::Requester;
use store::AclStore;

use crate::error::BrokerError;

/// A node's authorizer: its settings and its ACLs.
#[derive(Debug)]
pub(crate) struct Authorizer {
    config: AuthorizerConfig,
    acls: RwLock<AclStore>,
    /// Where the ACLs are kept (`persist.rs`), if anywhere.
    data_dir: Option<PathBuf>,
}

impl Authorizer {
    /// An authorizer holding at most `max_acls`, with the ACLs stored in
    /// `data_dir` (none without one).
    pub(crate) fn open(
        config: AuthorizerConfig,
        max_acls: usize,
        data_dir: Option<&Path>,
    ) -> Result<Authorizer, BrokerError> {
        let mut store = AclStore::new(max_acls);
        if let Some(dir) = data_dir {
            for b in persist::load(dir)? {
                store
                    .add(b)
                    .map_err(|e| BrokerError::Config(format!("the stored ACLs do not fit: {e}")))?;
            }
        }
        Ok(Authorizer {
            config,
            acls: RwLock::new(store),
            data_dir: data_dir.map(Path::to_path_buf),
        })
    }

    /// Writes the changed set to the data directory, if there is one.
    fn persist(&self, store: &AclStore) -> Result<(), StoreError> {
        match &self.data_dir {
            Some(dir) => {
                persist::save(dir, store.bindings()).map_err(|e| StoreError::Persist(e.to_string()))
            }
            None => Ok(()),
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

    /// Adds a (valid) binding, stored before this returns.
    pub(crate) fn add(&self, binding: AclBinding) -> Result<(), StoreError> {
        let mut store = self.write();
        if store.bindings().contains(&binding) {
            return Ok(());
        }
        store.add(binding.clone())?;
        self.persist(&store).inspect_err(|_| {
            store.remove_matching(&exactly(&binding));
        })
    }

    /// The bindings `filter` selects.
    pub(crate) fn describe(&self, filter: &AclBindingFilter) -> Vec<AclBinding> {
        self.read().matching(filter).cloned().collect()
    }

    /// Removes and returns the bindings `filter` selects, stored before this
    /// returns.
    pub(crate) fn remove_matching(
        &self,
        filter: &AclBindingFilter,
    ) -> Result<Vec<AclBinding>, StoreError> {
        let mut store = self.write();
        let gone = store.remove_matching(filter);
        if gone.is_empty() {
            return Ok(gone);
        }
        match self.persist(&store) {
            Ok(()) => Ok(gone),
            Err(e) => {
                for b in gone {
                    // They were in the store a moment ago, so they fit.
                    let _ = store.add(b);
                }
                Err(e)
            }
        }
    }
}

/// The filter selecting exactly `b`.
fn exactly(b: &AclBinding) -> AclBindingFilter {
    AclBindingFilter {
        resource_type: b.pattern.resource_type,
        name: Some(b.pattern.name.clone()),
        pattern_type: b.pattern.pattern_type,
        principal: Some(b.entry.principal.clone()),
        host: Some(b.entry.host.clone()),
        operation: b.entry.operation,
        permission_type: b.entry.permission_type,
    }
}
