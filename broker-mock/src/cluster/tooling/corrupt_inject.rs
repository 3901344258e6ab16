//! Corruption fault injection on a [`Cluster`]: damage the stored batch holding an
//! offset in one node's segment files, while the node runs or is stopped, and read the
//! corruption events the nodes recorded.

use std::fs::OpenOptions;
use std::path::PathBuf;

use crate::cluster::{Cluster, NodeRef};
use crate::corruption::CorruptionEvent;
use crate::error::BrokerError;
use crate::faults::FramingDamage;
use crate::log::header::HEADER_LEN;
use crate::log::locate_batch_in_dir;

impl NodeRef<'_> {
    fn batch_file(
        &self,
        topic: &str,
        partition: i32,
        offset: i64,
    ) -> Result<(PathBuf, u64, usize), BrokerError> {
        let dir = self.cluster.nodes[self.index]
            .options
            .broker
            .data_dir
            .clone()
            .ok_or_else(|| BrokerError::Config("an in-memory cluster has no segment files".into()))?
            .join(format!("{topic}-{partition}"));
        locate_batch_in_dir(&dir, offset)
            .map_err(BrokerError::from)?
            .ok_or_else(|| {
                BrokerError::Config(format!(
                    "node {} stores no batch holding {topic}-{partition} offset {offset}",
                    self.id()
                ))
            })
    }

    fn overwrite(&self, path: &PathBuf, pos: u64, bytes: &[u8]) -> Result<(), BrokerError> {
        use std::os::unix::fs::FileExt;
        let f = OpenOptions::new()
            .read(true)
            .write(true)
            .open(path)
            .map_err(|e| BrokerError::Config(format!("{}: {e}", path.display())))?;
        f.write_all_at(bytes, pos)
            .and_then(|_| f.sync_data())
            .map_err(|e| BrokerError::Config(format!("{}: {e}", path.display())))
    }

    /// Fault injection: flips bytes inside the stored batch holding `offset` of this
    /// node's replica (in its records, so the CRC no longer matches). Works whether the
    /// node runs or not; needs an on-disk cluster. Recorded on the timeline.
    pub fn corrupt(&mut self, topic: &str, partition: i32, offset: i64) -> Result<(), BrokerError> {
        let (path, pos, len) = self.batch_file(topic, partition, offset)?;
        let at = if len > HEADER_LEN {
            pos + (HEADER_LEN + (len - HEADER_LEN) / 2) as u64
        } else {
            pos + 30
        };
        let mut b = [0u8; 1];
        {
            use std::os::unix::fs::FileExt;
            std::fs::File::open(&path)
                .and_then(|f| f.read_exact_at(&mut b, at))
                .map_err(|e| BrokerError::Config(format!("{}: {e}", path.display())))?;
        }
        self.overwrite(&path, at, &[b[0] ^ 0xFF])?;
        let id = self.id();
        self.cluster.record(format!(
            "node {id}: flipped a byte of the stored batch holding {topic}-{partition}@{offset}"
        ));
        Ok(())
    }

    /// Fault injection: damages the framing of the stored batch holding `offset` (its
    /// length or base offset field, see [`FramingDamage`]). Works whether the node runs
    /// or not; needs an on-disk cluster. Recorded on the timeline.
    pub fn corrupt_framing(
        &mut self,
        topic: &str,
        partition: i32,
        offset: i64,
        damage: FramingDamage,
    ) -> Result<(), BrokerError> {
        let (path, pos, _) = self.batch_file(topic, partition, offset)?;
        match damage {
            FramingDamage::Length => {
                self.overwrite(&path, pos + 8, &0x3FFF_FFF0_i32.to_be_bytes())?;
            }
            FramingDamage::BaseOffset => {
                let mut b = [0u8; 8];
                {
                    use std::os::unix::fs::FileExt;
                    std::fs::File::open(&path)
                        .and_then(|f| f.read_exact_at(&mut b, pos))
                        .map_err(|e| BrokerError::Config(format!("{}: {e}", path.display())))?;
                }
                let base = i64::from_be_bytes(b) - 1;
                self.overwrite(&path, pos, &base.to_be_bytes())?;
            }
        }
        let id = self.id();
        self.cluster.record(format!(
            "node {id}: damaged the {damage:?} field of the stored batch holding {topic}-{partition}@{offset}"
        ));
        Ok(())
    }
}

impl Cluster {
    /// Every corruption event of every node so far (detections, resignations,
    /// reports, repairs), oldest first.
    pub fn corruption_events(&self) -> Vec<CorruptionEvent> {
        self.nodes
            .first()
            .map(|n| n.options.corruption_log.events())
            .unwrap_or_default()
    }
}
