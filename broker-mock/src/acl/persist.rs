//! A standalone node's ACLs on disk: `<data_dir>/acls.meta` holds the bindings
//! as metadata-log ACL records (framed and CRC-checked, as the controller's log
//! is), rewritten whole after every change (temporary file, fsync, rename) and
//! read at start-up. A cluster node keeps none: its ACLs are the controller's.

use std::collections::BTreeSet;
use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

use baton_protocol::acl::AclBinding;

use crate::controller::records::{decode_log, MetadataLogEntry, MetadataRecord};
use crate::error::{BrokerError, LogError};

const FILE: &str = "acls.meta";

fn path(dir: &Path) -> PathBuf {
    dir.join(FILE)
}

/// The bindings stored in `dir` (none if the file does not exist). A file that
/// does not decode whole, or holds other records, is an error: the node does not
/// start with ACLs it cannot read.
pub(crate) fn load(dir: &Path) -> Result<Vec<AclBinding>, BrokerError> {
    let p = path(dir);
    let bytes = match fs::read(&p) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(LogError::io(&p, e).into()),
    };
    let bad = |why: String| BrokerError::Config(format!("{}: {why}", p.display()));
    let log = decode_log(&bytes).map_err(|e| bad(e.to_string()))?;
    if log.torn_tail {
        return Err(bad("truncated".into()));
    }
    log.entries
        .into_iter()
        .map(|e| match e.record {
            MetadataRecord::AccessControlEntry(b) => Ok(b),
            other => Err(bad(format!("unexpected record {other:?}"))),
        })
        .collect()
}

/// Replaces the stored bindings of `dir` with `bindings`.
pub(crate) fn save(dir: &Path, bindings: &BTreeSet<AclBinding>) -> Result<(), LogError> {
    let mut bytes = Vec::new();
    for (i, b) in bindings.iter().enumerate() {
        MetadataLogEntry {
            offset: i as i64,
            controller_epoch: 0,
            record: MetadataRecord::AccessControlEntry(b.clone()),
        }
        .encode(&mut bytes);
    }
    fs::create_dir_all(dir).map_err(|e| LogError::io(dir, e))?;
    let tmp = dir.join(format!("{FILE}.tmp"));
    let mut f = fs::File::create(&tmp).map_err(|e| LogError::io(&tmp, e))?;
    f.write_all(&bytes)
        .and_then(|_| f.sync_all())
        .map_err(|e| LogError::io(&tmp, e))?;
    let p = path(dir);
    fs::rename(&tmp, &p).map_err(|e| LogError::io(&p, e))
}

#[cfg(test)]
mod tests {
    use super::*;
    use baton_protocol::acl::{
        AccessControlEntry, AclOperation, AclPermissionType, PatternType, ResourcePattern,
        ResourceType,
    };

    #[test]
    fn bindings_survive_a_save_and_load_and_garbage_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        assert!(load(dir.path()).unwrap().is_empty());
        let b = AclBinding {
            pattern: ResourcePattern {
                resource_type: ResourceType::Group,
                name: "g".into(),
                pattern_type: PatternType::Prefixed,
            },
            entry: AccessControlEntry {
                principal: "User:alice".into(),
                host: "*".into(),
                operation: AclOperation::Read,
                permission_type: AclPermissionType::Allow,
            },
        };
        let set: BTreeSet<AclBinding> = [b.clone()].into();
        save(dir.path(), &set).unwrap();
        assert_eq!(load(dir.path()).unwrap(), vec![b]);
        let mut bytes = fs::read(path(dir.path())).unwrap();
        let last = bytes.len() - 1;
        bytes[last] ^= 1;
        fs::write(path(dir.path()), &bytes).unwrap();
        assert!(load(dir.path()).is_err());
    }
}
