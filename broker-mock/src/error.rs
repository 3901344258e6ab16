//! Errors of the broker: start-up failures and storage failures.

use std::path::PathBuf;

/// Why the broker could not start or stopped abnormally.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BrokerError {
    /// Binding the listener failed.
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        /// The address.
        addr: std::net::SocketAddr,
        /// The cause.
        source: std::io::Error,
    },
    /// The configuration is invalid.
    #[error("invalid configuration: {0}")]
    Config(String),
    /// Loading or writing persisted state failed.
    #[error(transparent)]
    Log(#[from] LogError),
    /// Topic metadata in the data directory could not be read.
    #[error("bad topic metadata in {path}: {reason}")]
    TopicMetadata {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
    /// A replica topic could not take the controller's new partitions or configs.
    #[error("cannot update topic {topic}: {reason}")]
    TopicUpdate {
        /// The topic.
        topic: String,
        /// Why.
        reason: String,
    },
}

/// Why a log operation failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LogError {
    /// A file operation failed.
    #[error("i/o error on {path}: {source}")]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// An appended batch does not start at or after the log end offset.
    #[error("batch base offset {got} is below the log end offset {expected}")]
    NonMonotonic {
        /// The log end offset.
        expected: i64,
        /// The batch's base offset.
        got: i64,
    },
    /// An appended batch's framing is wrong.
    #[error("invalid batch: {0}")]
    InvalidBatch(&'static str),
    /// Stored data no longer parses: its framing is broken (the disk changed under us).
    #[error("stored data is corrupt at {path} position {position}: {reason}")]
    Corrupt {
        /// The segment file.
        path: PathBuf,
        /// Byte position in it.
        position: u64,
        /// What is wrong.
        reason: &'static str,
    },
    /// An earlier write or fsync of this log failed, so it takes nothing more and
    /// serves nothing until it is reopened (and recovered from what is on disk).
    #[error("log in {dir} is offline after a storage failure: {reason}")]
    Offline {
        /// The log's directory.
        dir: PathBuf,
        /// The failure that took it offline.
        reason: String,
    },
}

impl LogError {
    pub(crate) fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        LogError::Io {
            path: path.into(),
            source,
        }
    }
}
