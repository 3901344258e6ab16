//! The compression codec named by a record batch's attribute bits 0-2.
//!
//! A leaf module: the codec is named by decode errors and by the record layer alike
//! (`record::Compression` re-exports it, with `Compression::from_attributes` there).

/// The compression codec of a batch, from attribute bits 0-2.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Compression {
    /// Records are stored as they are.
    #[default]
    None,
    /// gzip (codec 1).
    Gzip,
    /// Snappy, in Kafka's xerial framing (codec 2).
    Snappy,
    /// LZ4 frame format (codec 3).
    Lz4,
    /// Zstandard (codec 4, KIP-110).
    Zstd,
}

impl Compression {
    /// The codec's value in attribute bits 0-2.
    pub fn bits(self) -> i16 {
        match self {
            Compression::None => 0,
            Compression::Gzip => 1,
            Compression::Snappy => 2,
            Compression::Lz4 => 3,
            Compression::Zstd => 4,
        }
    }
}
