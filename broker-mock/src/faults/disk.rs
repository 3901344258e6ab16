//! Disk faults for logs under a directory: slow or failing fsync, ENOSPC or EIO on
//! write, short writes, and a torn tail left by a crash.
//!
//! The registry is process-wide and keyed by directory, so clusters with their own
//! data directories (tests running in parallel) do not see each other's faults. A
//! fault registered for a node's data directory covers all its partition logs; one
//! registered for a partition's directory covers that log alone.
//!
//! The on-disk log writes and syncs its segment and index files only through
//! `write_at` and `sync_data`, the narrow wrapper where the faults act, so the
//! production write path is the one under test. What the log does with a failure is
//! in `log/disk.rs` (the log goes offline) and `partition/storage.rs` (the replica
//! resigns and is reported to the controller).

use std::fs::{self, File};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

/// How the disk behaves for logs under a directory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum DiskFault {
    /// Normal.
    None,
    /// Every fsync takes this much longer.
    SlowFsync(Duration),
    /// Every fsync fails with EIO.
    FailFsync,
    /// Every write fails with ENOSPC (nothing is written).
    NoSpace,
    /// Every write fails with EIO (nothing is written).
    FailWrite,
    /// Every write stores the first half of its bytes, then fails with ENOSPC (a
    /// short write that `write_all` could not complete).
    ShortWrite,
    /// Writes work, but a crash tears the logs: when a node killed while this fault
    /// covered a partition's log is started again, the last `n` bytes of that log's
    /// active segment are damaged first (see [`tear_tail`]).
    TornTailOnCrash(u64),
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

/// The error a real disk returns: ENOSPC (28) or EIO (5) on Unix.
fn os_error(no_space: bool) -> io::Error {
    #[cfg(unix)]
    {
        io::Error::from_raw_os_error(if no_space { 28 } else { 5 })
    }
    #[cfg(not(unix))]
    {
        if no_space {
            io::Error::new(io::ErrorKind::StorageFull, "no space left on device")
        } else {
            io::Error::other("input/output error")
        }
    }
}

/// Called by the on-disk log before it syncs a file under `path`: stalls the
/// blocking work for a slow fsync ([`baton_env::stall`]: the thread sleeps, or a
/// simulation waits in simulated time), fails for a failing one.
pub fn before_fsync(path: &Path) -> io::Result<()> {
    match fault_for(path) {
        DiskFault::SlowFsync(d) => {
            baton_env::stall(d);
            Ok(())
        }
        DiskFault::FailFsync => Err(os_error(false)),
        _ => Ok(()),
    }
}

/// Writes all of `buf` at `pos` of `file` (which lives at `path`), as the log's
/// appends do, unless a fault for `path` says otherwise.
pub(crate) fn write_at(path: &Path, file: &File, buf: &[u8], pos: u64) -> io::Result<()> {
    match fault_for(path) {
        DiskFault::NoSpace => Err(os_error(true)),
        DiskFault::FailWrite => Err(os_error(false)),
        DiskFault::ShortWrite => {
            raw_write_at(file, &buf[..buf.len() / 2], pos)?;
            Err(os_error(true))
        }
        _ => raw_write_at(file, buf, pos),
    }
}

/// Makes `file`'s data durable (fsync), unless a fault for `path` says otherwise.
pub(crate) fn sync_data(path: &Path, file: &File) -> io::Result<()> {
    before_fsync(path)?;
    file.sync_data()
}

#[cfg(unix)]
fn raw_write_at(file: &File, buf: &[u8], pos: u64) -> io::Result<()> {
    use std::os::unix::fs::FileExt;
    file.write_all_at(buf, pos)
}

#[cfg(not(unix))]
fn raw_write_at(file: &File, buf: &[u8], pos: u64) -> io::Result<()> {
    use std::io::{Seek, SeekFrom, Write};
    let mut f = file.try_clone()?;
    f.seek(SeekFrom::Start(pos))?;
    f.write_all(buf)
}

/// The partition log directories directly under a node's data directory `dir` whose
/// fault is [`DiskFault::TornTailOnCrash`], with its byte count: what a crash of the
/// node tears now.
pub fn tails_to_tear(dir: &Path) -> Vec<(PathBuf, u64)> {
    let Ok(entries) = fs::read_dir(dir) else {
        return Vec::new();
    };
    entries
        .filter_map(Result::ok)
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .filter_map(|e| match fault_for(&e.path()) {
            DiskFault::TornTailOnCrash(n) => Some((e.path(), n)),
            _ => None,
        })
        .collect()
}

/// Damages the tail of the active (last) segment of the log in `log_dir`, as a
/// crash in the middle of writes does: of its last `n` bytes, the second half is cut
/// off and the first half overwritten with zeros (sectors that never reached the
/// disk). Returns the bytes damaged (0 for an empty segment or no log). Only for a
/// log no running node has open.
pub fn tear_tail(log_dir: &Path, n: u64) -> io::Result<u64> {
    let Some(last) = last_segment(log_dir)? else {
        return Ok(0);
    };
    let file = fs::OpenOptions::new().write(true).open(&last)?;
    let len = file.metadata()?.len();
    let span = n.min(len);
    if span == 0 {
        return Ok(0);
    }
    let cut = span / 2;
    file.set_len(len - cut)?;
    raw_write_at(&file, &vec![0u8; (span - cut) as usize], len - span)?;
    file.sync_data()?;
    Ok(span)
}

/// The segment file (`<20 digits>.log`) with the highest base offset in `dir`.
fn last_segment(dir: &Path) -> io::Result<Option<PathBuf>> {
    let mut best: Option<(i64, PathBuf)> = None;
    for entry in fs::read_dir(dir)? {
        let entry = entry?;
        let name = entry.file_name();
        let base = name
            .to_str()
            .and_then(|n| n.strip_suffix(".log"))
            .filter(|s| s.len() == 20)
            .and_then(|s| s.parse::<i64>().ok());
        if let Some(b) = base {
            if best.as_ref().is_none_or(|(x, _)| b > *x) {
                best = Some((b, entry.path()));
            }
        }
    }
    Ok(best.map(|(_, p)| p))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dir() -> tempfile::TempDir {
        tempfile::tempdir().unwrap()
    }

    #[test]
    fn write_faults_fail_with_the_disk_errors_and_a_short_write_leaves_a_prefix() {
        let d = dir();
        let path = d.path().join("f");
        let file = fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(&path)
            .unwrap();
        set(d.path(), DiskFault::NoSpace);
        let e = write_at(&path, &file, b"abcd", 0).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::StorageFull, "{e}");
        assert_eq!(fs::read(&path).unwrap(), b"");
        set(d.path(), DiskFault::FailWrite);
        assert!(write_at(&path, &file, b"abcd", 0).is_err());
        assert_eq!(fs::read(&path).unwrap(), b"");
        set(d.path(), DiskFault::ShortWrite);
        assert!(write_at(&path, &file, b"abcd", 0).is_err());
        assert_eq!(fs::read(&path).unwrap(), b"ab");
        set(d.path(), DiskFault::FailFsync);
        assert!(sync_data(&path, &file).is_err());
        set(d.path(), DiskFault::None);
        write_at(&path, &file, b"abcd", 0).unwrap();
        sync_data(&path, &file).unwrap();
        assert_eq!(fs::read(&path).unwrap(), b"abcd");
    }

    #[test]
    fn tear_tail_cuts_and_zeroes_the_last_segment_only() {
        let d = dir();
        let p = d.path().join("t-0");
        fs::create_dir(&p).unwrap();
        fs::write(p.join(format!("{:020}.log", 0)), [7u8; 100]).unwrap();
        fs::write(p.join(format!("{:020}.log", 10)), [7u8; 100]).unwrap();
        assert!(tails_to_tear(d.path()).is_empty());
        set(&p, DiskFault::TornTailOnCrash(20));
        assert_eq!(tails_to_tear(d.path()), vec![(p.clone(), 20)]);
        assert_eq!(tear_tail(&p, 20).unwrap(), 20);
        assert_eq!(
            fs::read(p.join(format!("{:020}.log", 0))).unwrap(),
            [7u8; 100]
        );
        let last = fs::read(p.join(format!("{:020}.log", 10))).unwrap();
        assert_eq!(last.len(), 90);
        assert!(last[..80].iter().all(|b| *b == 7));
        assert!(last[80..].iter().all(|b| *b == 0));
        set(&p, DiskFault::None);
    }
}
