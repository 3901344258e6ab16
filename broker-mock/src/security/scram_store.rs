//! [`ScramStore`]: a node's SCRAM credentials, shared by all its SASL listeners
//! and changed at runtime by AlterUserScramCredentials. Only salts, iteration
//! counts, StoredKey and ServerKey are kept, never a password; at most
//! [`MAX_SCRAM_CREDENTIALS`] credentials, so requests cannot grow it without
//! bound.
//!
//! A cluster node also holds the credentials of the cluster's metadata log (where
//! its AlterUserScramCredentials requests go), copied in whenever they change;
//! those win over the node's own for the same user and mechanism.

use std::collections::BTreeMap;
use std::sync::{RwLock, RwLockReadGuard};

use baton_protocol::sasl::{
    CredentialStore, ScramCredential, ScramHash, Secret, TokenRejection, ValidatedToken,
};

/// Most SCRAM credentials (user and mechanism pairs) a node holds.
pub const MAX_SCRAM_CREDENTIALS: usize = 10_000;

/// The credentials by user, then hash.
type Table = BTreeMap<String, Vec<ScramCredential>>;

/// A node's SCRAM users.
#[derive(Default)]
pub(crate) struct ScramStore {
    /// Invariant: no user has an empty list or two credentials of one hash; the
    /// total number of credentials is at most [`MAX_SCRAM_CREDENTIALS`].
    users: RwLock<Table>,
    /// The metadata log's credentials and the version they were copied at.
    replicated: RwLock<(u64, Table)>,
}

impl std::fmt::Debug for ScramStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let users: Vec<String> = self.read().keys().cloned().collect();
        f.debug_struct("ScramStore").field("users", &users).finish()
    }
}

/// Why an upsert was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct StoreFull;

impl ScramStore {
    fn read(&self) -> RwLockReadGuard<'_, Table> {
        self.users.read().unwrap_or_else(|p| p.into_inner())
    }

    fn read_replicated(&self) -> RwLockReadGuard<'_, (u64, Table)> {
        self.replicated.read().unwrap_or_else(|p| p.into_inner())
    }

    /// Replaces the metadata log's credentials with `credentials` (by user and
    /// mechanism) unless `version` is the one already copied.
    pub(crate) fn sync_replicated(
        &self,
        version: u64,
        credentials: &BTreeMap<(String, i8), ScramCredential>,
    ) {
        if self.read_replicated().0 == version {
            return;
        }
        let mut table = Table::new();
        for ((user, _), c) in credentials {
            table.entry(user.clone()).or_default().push(c.clone());
        }
        *self.replicated.write().unwrap_or_else(|p| p.into_inner()) = (version, table);
    }

    /// `user`'s credential for `hash`: the metadata log's, else the node's own.
    fn find<'a>(
        replicated: &'a Table,
        own: &'a Table,
        user: &str,
        hash: ScramHash,
    ) -> Option<&'a ScramCredential> {
        let find = |t: &'a Table| t.get(user)?.iter().find(|c| c.hash() == hash);
        find(replicated).or_else(|| find(own))
    }

    fn count(table: &Table) -> usize {
        table.values().map(Vec::len).sum()
    }

    /// Adds or replaces `user`'s credential for its hash.
    pub(crate) fn upsert(&self, user: &str, credential: ScramCredential) -> Result<(), StoreFull> {
        let mut table = self.users.write().unwrap_or_else(|p| p.into_inner());
        let count = Self::count(&table);
        let creds = table.get(user);
        let replaces = creds.is_some_and(|c| c.iter().any(|x| x.hash() == credential.hash()));
        if !replaces && count >= MAX_SCRAM_CREDENTIALS {
            return Err(StoreFull);
        }
        let creds = table.entry(user.to_owned()).or_default();
        creds.retain(|c| c.hash() != credential.hash());
        creds.push(credential);
        Ok(())
    }

    /// Removes `user`'s credential for `hash`; false if there was none.
    pub(crate) fn delete(&self, user: &str, hash: ScramHash) -> bool {
        let mut table = self.users.write().unwrap_or_else(|p| p.into_inner());
        let Some(creds) = table.get_mut(user) else {
            return false;
        };
        let before = creds.len();
        creds.retain(|c| c.hash() != hash);
        let removed = creds.len() != before;
        if creds.is_empty() {
            table.remove(user);
        }
        removed
    }

    /// Whether `user` has a credential for `hash`.
    pub(crate) fn has(&self, user: &str, hash: ScramHash) -> bool {
        Self::find(&self.read_replicated().1, &self.read(), user, hash).is_some()
    }

    /// `user`'s credentials as (hash, iterations), ordered by hash; empty if the
    /// user has none.
    pub(crate) fn describe(&self, user: &str) -> Vec<(ScramHash, u32)> {
        let (replicated, own) = (self.read_replicated(), self.read());
        let mut out: Vec<(ScramHash, u32)> = [ScramHash::Sha256, ScramHash::Sha512]
            .into_iter()
            .filter_map(|h| Self::find(&replicated.1, &own, user, h))
            .map(|x| (x.hash(), x.iterations()))
            .collect();
        out.sort_by_key(|(h, _)| h.kafka_type());
        out
    }

    /// Every user with a credential, in name order.
    pub(crate) fn user_names(&self) -> Vec<String> {
        let mut names: Vec<String> = self.read().keys().cloned().collect();
        names.extend(self.read_replicated().1.keys().cloned());
        names.sort();
        names.dedup();
        names
    }

    /// Runs `f` with the credentials a listener checks logins against: its own
    /// PLAIN users and token validator (`listener`) and this store's SCRAM users.
    pub(crate) fn with_credentials<R>(
        &self,
        listener: &dyn CredentialStore,
        f: impl FnOnce(&dyn CredentialStore) -> R,
    ) -> R {
        let (replicated, own) = (self.read_replicated(), self.read());
        f(&Listener {
            listener,
            replicated: &replicated.1,
            own: &own,
        })
    }
}

/// A listener's PLAIN users and token validator with the node's SCRAM users.
struct Listener<'a> {
    listener: &'a dyn CredentialStore,
    replicated: &'a Table,
    own: &'a Table,
}

impl CredentialStore for Listener<'_> {
    fn plain_password(&self, user: &str) -> Option<&Secret> {
        self.listener.plain_password(user)
    }

    fn scram_credential(&self, hash: ScramHash, user: &str) -> Option<&ScramCredential> {
        ScramStore::find(self.replicated, self.own, user, hash)
    }

    fn validate_token(&self, token: &str) -> Result<ValidatedToken, TokenRejection> {
        self.listener.validate_token(token)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn credential(hash: ScramHash, iterations: u32) -> ScramCredential {
        ScramCredential::generate(hash, b"pw", iterations).unwrap()
    }

    #[test]
    fn upsert_replace_describe_delete() {
        let store = ScramStore::default();
        store
            .upsert("bob", credential(ScramHash::Sha512, 4096))
            .unwrap();
        store
            .upsert("bob", credential(ScramHash::Sha256, 8192))
            .unwrap();
        store
            .upsert("bob", credential(ScramHash::Sha512, 5000))
            .unwrap();
        assert_eq!(
            store.describe("bob"),
            [(ScramHash::Sha256, 8192), (ScramHash::Sha512, 5000)]
        );
        assert!(store.delete("bob", ScramHash::Sha256));
        assert!(!store.delete("bob", ScramHash::Sha256));
        assert!(store.has("bob", ScramHash::Sha512));
        assert!(store.delete("bob", ScramHash::Sha512));
        assert!(
            store.user_names().is_empty(),
            "a user without credentials is gone"
        );
        let plain = baton_protocol::sasl::StaticCredentials::default();
        store
            .upsert("carol", credential(ScramHash::Sha256, 4096))
            .unwrap();
        store.with_credentials(&plain, |c| {
            assert!(c.scram_credential(ScramHash::Sha256, "carol").is_some());
            assert!(c.scram_credential(ScramHash::Sha512, "carol").is_none());
        });
        assert!(!format!("{store:?}").contains("pw"));
    }

    #[test]
    fn the_store_is_bounded() {
        let store = ScramStore::default();
        let c = credential(ScramHash::Sha256, 4096);
        for i in 0..MAX_SCRAM_CREDENTIALS {
            store.upsert(&format!("u{i}"), c.clone()).unwrap();
        }
        assert_eq!(store.upsert("one-more", c.clone()), Err(StoreFull));
        store.upsert("u0", c).expect("replacing is always possible");
    }
}
