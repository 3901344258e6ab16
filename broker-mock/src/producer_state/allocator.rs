//! Producer id allocation for InitProducerId.
//!
//! Ids come from one process-wide counter, so that the broker nodes of an in-process
//! cluster never hand out the same id (an idempotent producer's id must be unique
//! across every partition it writes to, whichever node leads them). An on-disk node
//! takes ids from the counter in blocks of [`ProducerIdAllocator::BLOCK_SIZE`] and
//! persists the end of its latest block in its data directory (`producer_ids`)
//! before handing out any id of the block; on open, the counter is raised past that
//! mark, so ids stay unique across restarts of the node and of the process.
//!
//! Limit: after a whole-process restart, uniqueness across nodes needs every node's
//! mark read before the first allocation (open all nodes first). A controller-owned
//! allocator (Kafka's AllocateProducerIds, KIP-730) would remove that condition.

use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

/// The next id no allocator of this process has handed out or reserved.
static NEXT_FREE: AtomicI64 = AtomicI64::new(0);

/// One allocator per data directory, shared by restarts of a node inside the process.
static BY_DIR: OnceLock<Mutex<HashMap<PathBuf, Arc<ProducerIdAllocator>>>> = OnceLock::new();

/// The file in the data directory that holds the end of the latest reserved block.
const FILE_NAME: &str = "producer_ids";

/// Why no producer id could be allocated.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AllocatorError {
    /// The reservation could not be persisted, or the file could not be read.
    #[error("producer id block file {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The failure.
        source: std::io::Error,
    },
    /// The file does not hold a non-negative decimal id.
    #[error("producer id block file {0} is damaged")]
    Damaged(PathBuf),
    /// Every id up to `i64::MAX` is used.
    #[error("producer ids exhausted")]
    Exhausted,
}

/// The ids of the current block: `next..end`.
#[derive(Debug, Default)]
struct Block {
    next: i64,
    end: i64,
}

/// Hands out producer ids that are unique within the process and, for an on-disk
/// node, across its restarts.
#[derive(Debug)]
pub struct ProducerIdAllocator {
    /// The persisted mark, for an on-disk node.
    file: Option<PathBuf>,
    block: Mutex<Block>,
}

impl ProducerIdAllocator {
    /// Ids an on-disk node reserves (and persists) at a time.
    pub const BLOCK_SIZE: i64 = 1000;

    /// An allocator that persists nothing (in-memory brokers).
    pub fn in_memory() -> Self {
        ProducerIdAllocator {
            file: None,
            block: Mutex::new(Block::default()),
        }
    }

    /// Opens the allocator persisted in `data_dir`, raising the process counter past
    /// its mark.
    pub fn open(data_dir: &Path) -> Result<Self, AllocatorError> {
        let path = data_dir.join(FILE_NAME);
        let mark = read_mark(&path)?;
        NEXT_FREE.fetch_max(mark, Ordering::SeqCst);
        Ok(ProducerIdAllocator {
            file: Some(path),
            block: Mutex::new(Block::default()),
        })
    }

    /// The allocator for a node's data directory (`None`: in memory), opened once
    /// per directory and process and shared by the node's restarts.
    pub fn for_data_dir(data_dir: Option<&Path>) -> Result<Arc<Self>, AllocatorError> {
        static MEMORY: OnceLock<Arc<ProducerIdAllocator>> = OnceLock::new();
        let Some(dir) = data_dir else {
            return Ok(MEMORY
                .get_or_init(|| Arc::new(ProducerIdAllocator::in_memory()))
                .clone());
        };
        let mut map = BY_DIR
            .get_or_init(Default::default)
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        if let Some(a) = map.get(dir) {
            return Ok(a.clone());
        }
        let a = Arc::new(ProducerIdAllocator::open(dir)?);
        map.insert(dir.to_path_buf(), a.clone());
        Ok(a)
    }

    /// A new producer id.
    pub fn next_id(&self) -> Result<i64, AllocatorError> {
        let Some(path) = &self.file else {
            let id = NEXT_FREE.fetch_add(1, Ordering::SeqCst);
            return if id < 0 {
                Err(AllocatorError::Exhausted)
            } else {
                Ok(id)
            };
        };
        let mut block = self.block.lock().unwrap_or_else(|p| p.into_inner());
        if block.next >= block.end {
            let start = NEXT_FREE.fetch_add(Self::BLOCK_SIZE, Ordering::SeqCst);
            let end = start
                .checked_add(Self::BLOCK_SIZE)
                .filter(|_| start >= 0)
                .ok_or(AllocatorError::Exhausted)?;
            write_mark(path, end)?;
            *block = Block { next: start, end };
        }
        let id = block.next;
        block.next += 1;
        Ok(id)
    }
}

fn read_mark(path: &Path) -> Result<i64, AllocatorError> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(0),
        Err(source) => {
            return Err(AllocatorError::Io {
                path: path.to_path_buf(),
                source,
            })
        }
    };
    match text.trim().parse::<i64>() {
        Ok(v) if v >= 0 => Ok(v),
        _ => Err(AllocatorError::Damaged(path.to_path_buf())),
    }
}

/// Writes the mark durably: a temporary file, fsync, rename, fsync of the directory.
fn write_mark(path: &Path, mark: i64) -> Result<(), AllocatorError> {
    let io = |source| AllocatorError::Io {
        path: path.to_path_buf(),
        source,
    };
    let tmp = path.with_extension("tmp");
    let mut f = std::fs::File::create(&tmp).map_err(io)?;
    writeln!(f, "{mark}").map_err(io)?;
    f.sync_all().map_err(io)?;
    drop(f);
    std::fs::rename(&tmp, path).map_err(io)?;
    if let Some(dir) = path.parent() {
        // Directory fsync makes the rename durable; not every platform allows it.
        if let Ok(d) = std::fs::File::open(dir) {
            let _ = d.sync_all();
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_survive_reopen_and_are_unique_in_process() {
        let dir = tempfile::tempdir().unwrap();
        let a = ProducerIdAllocator::open(dir.path()).unwrap();
        let first: Vec<i64> = (0..3).map(|_| a.next_id().unwrap()).collect();
        assert!(first.windows(2).all(|w| w[1] == w[0] + 1));
        let mark = read_mark(&dir.path().join(FILE_NAME)).unwrap();
        assert!(mark > first[2], "the block end is persisted before use");
        // A fresh open (a restart) never hands out an id below the mark.
        let b = ProducerIdAllocator::open(dir.path()).unwrap();
        assert!(b.next_id().unwrap() >= mark);
        // The in-memory allocator shares the process counter.
        let m = ProducerIdAllocator::in_memory();
        let id = m.next_id().unwrap();
        assert!(!first.contains(&id));
    }

    #[test]
    fn damaged_file_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(FILE_NAME), "not a number").unwrap();
        assert!(matches!(
            ProducerIdAllocator::open(dir.path()),
            Err(AllocatorError::Damaged(_))
        ));
    }
}
