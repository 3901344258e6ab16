//! The files of a segment swap that a crash may leave behind, and the marker of a
//! log with offset gaps (see `log::disk::swap` for the swap itself): opening a log
//! first finishes or discards an interrupted swap here.

use std::fs::{self, File};
use std::path::Path;

use crate::error::LogError;

/// Name of the file whose presence says the log may skip offsets between batches.
pub const GAPS_MARKER: &str = "offset-gaps";

/// Makes renames and creations in `dir` durable.
pub(crate) fn sync_dir(dir: &Path) -> Result<(), LogError> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| LogError::io(dir, e))
}

/// Whether the log in `dir` may have gaps between batches.
pub(crate) fn has_gaps_marker(dir: &Path) -> bool {
    dir.join(GAPS_MARKER).exists()
}

/// Completes or discards a swap a crash interrupted (see the module docs).
pub(crate) fn finish_leftovers(dir: &Path) -> Result<(), LogError> {
    let mut touched = false;
    for entry in fs::read_dir(dir).map_err(|e| LogError::io(dir, e))? {
        let entry = entry.map_err(|e| LogError::io(dir, e))?;
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        if name.ends_with(".log.cleaned") {
            fs::remove_file(entry.path()).map_err(|e| LogError::io(entry.path(), e))?;
            touched = true;
        } else if let Some(log) = name.strip_suffix(".swap") {
            if log.ends_with(".log") {
                fs::rename(entry.path(), dir.join(log))
                    .map_err(|e| LogError::io(entry.path(), e))?;
                touched = true;
            }
        }
    }
    if touched {
        sync_dir(dir)?;
    }
    Ok(())
}
