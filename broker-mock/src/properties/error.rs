//! [`PropertiesError`]: why a properties file cannot configure the broker.

/// Why a properties file cannot configure the broker.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PropertiesError {
    /// The text breaks the properties syntax.
    #[error("line {line}: {reason}")]
    Syntax {
        /// The line (1-based).
        line: usize,
        /// What is wrong.
        reason: String,
    },
    /// A key is given twice.
    #[error("line {line}: {key} is already set on line {first}")]
    Duplicate {
        /// The key.
        key: String,
        /// The second occurrence's line.
        line: usize,
        /// The first occurrence's line.
        first: usize,
    },
    /// The text is larger than [`MAX_PROPERTIES_BYTES`](super::MAX_PROPERTIES_BYTES).
    #[error("the properties text is {bytes} bytes, over the limit of {limit}")]
    TooLarge {
        /// Its size.
        bytes: usize,
        /// The limit.
        limit: usize,
    },
    /// A key this broker does not know.
    #[error("line {line}: unknown property {key}")]
    Unknown {
        /// The key.
        key: String,
        /// Its line.
        line: usize,
    },
    /// A key's value is malformed or out of range (the message never quotes a
    /// password or key material).
    #[error("line {line}: {key}: {reason}")]
    Invalid {
        /// The key.
        key: String,
        /// Its line.
        line: usize,
        /// What is wrong.
        reason: String,
    },
    /// A known Kafka key whose setting this build cannot honour.
    #[error("line {line}: {key} is not supported by this build: {reason}")]
    Unsupported {
        /// The key.
        key: String,
        /// Its line.
        line: usize,
        /// Why.
        reason: String,
    },
    /// Settings that do not fit together (not tied to one line).
    #[error("{0}")]
    Inconsistent(String),
}
