//! Disk faults: slow or failing fsync for logs under a directory.
//!
//! The registry is process-wide and keyed by directory, so clusters with their own
//! data directories (tests running in parallel) do not see each other's faults.

use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

/// How fsync behaves for logs under a directory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DiskFault {
    /// Normal.
    None,
    /// Every fsync takes this much longer.
    SlowFsync(Duration),
    /// Every fsync fails with an I/O error.
    FailFsync,
}

static FAULTS: Mutex<Vec<(PathBuf, DiskFault)>> = Mutex::new(Vec::new());

/// Sets the fault for logs under `dir` ([`DiskFault::None`] removes it).
pub fn set(dir: &Path, fault: DiskFault) {
    let mut f = FAULTS.lock().unwrap_or_else(|p| p.into_inner());
    f.retain(|(d, _)| d != dir);
    if fault != DiskFault::None {
        f.push((dir.to_path_buf(), fault));
    }
}

/// The fault for `path`: the one of the longest registered directory containing it.
pub fn fault_for(path: &Path) -> DiskFault {
    let f = FAULTS.lock().unwrap_or_else(|p| p.into_inner());
    f.iter()
        .filter(|(d, _)| path.starts_with(d))
        .max_by_key(|(d, _)| d.as_os_str().len())
        .map_or(DiskFault::None, |(_, x)| *x)
}

/// Called by the on-disk log before it syncs a file under `path`: sleeps for a slow
/// fsync, fails for a failing one.
pub fn before_fsync(path: &Path) -> std::io::Result<()> {
    match fault_for(path) {
        DiskFault::None => Ok(()),
        DiskFault::SlowFsync(d) => {
            std::thread::sleep(d);
            Ok(())
        }
        DiskFault::FailFsync => Err(std::io::Error::other("injected fsync failure")),
    }
}
