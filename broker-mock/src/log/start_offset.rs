//! The persisted log start offset of an on-disk log.
//!
//! The log start offset is where reads may begin. It is the base offset of the
//! first segment unless DeleteRecords (or a follower copying its leader's) moved it
//! inside that segment, so it is kept in a file of its own in the partition
//! directory, `log-start-offset`, holding the offset in decimal. Kafka keeps one
//! `log-start-offset-checkpoint` per data directory and writes it periodically; a
//! file per partition, written (atomically, by rename) whenever the offset moves,
//! keeps each partition's state in its own directory and survives a crash at once.
//!
//! Invariant: the stored value only grows, except when the log is emptied and
//! restarted at a lower offset (a replica truncating fully, as Kafka's
//! `truncateFullyAndStartAt`).

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

use crate::error::LogError;

/// The file name, inside the partition directory.
pub const FILE_NAME: &str = "log-start-offset";

/// Longest valid content: an `i64` in decimal plus a newline.
const MAX_LEN: u64 = 24;

fn path(dir: &Path) -> PathBuf {
    dir.join(FILE_NAME)
}

/// Reads the stored log start offset of the log in `dir`; `None` if none is stored.
/// A file that does not hold a non-negative decimal offset is corrupt.
pub fn read(dir: &Path) -> Result<Option<i64>, LogError> {
    let p = path(dir);
    let meta = match fs::metadata(&p) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(LogError::io(&p, e)),
    };
    let corrupt = LogError::Corrupt {
        path: p.clone(),
        position: 0,
        reason: "log start offset file does not hold an offset",
    };
    if meta.len() > MAX_LEN {
        return Err(corrupt);
    }
    let text = fs::read_to_string(&p).map_err(|e| LogError::io(&p, e))?;
    match text.trim().parse::<i64>() {
        Ok(n) if n >= 0 => Ok(Some(n)),
        _ => Err(corrupt),
    }
}

/// Stores `offset` as the log start offset of the log in `dir`: written to a
/// temporary file, synced, then renamed over the old one.
pub fn write(dir: &Path, offset: i64) -> Result<(), LogError> {
    assert!(offset >= 0, "log start offset {offset} is negative");
    let p = path(dir);
    let tmp = dir.join(format!("{FILE_NAME}.tmp"));
    let mut f = fs::File::create(&tmp).map_err(|e| LogError::io(&tmp, e))?;
    f.write_all(format!("{offset}\n").as_bytes())
        .and_then(|_| f.sync_all())
        .map_err(|e| LogError::io(&tmp, e))?;
    fs::rename(&tmp, &p).map_err(|e| LogError::io(&p, e))
}
