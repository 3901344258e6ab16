//! Kafka request and response bodies, each written once and usable both ways.
//!
//! One module per API key. Field names are the snake_case of the names in Apache
//! Kafka's message JSON specs; each field's doc says in which versions it exists.

use bytes::{Bytes, BytesMut};

use crate::error::{DecodeError, EncodeError};
use crate::primitives::{Decoder, Wire};

pub mod api_versions;
pub mod create_topics;
pub mod delete_topics;
pub mod fetch;
pub mod init_producer_id;
pub mod list_offsets;
pub mod metadata;
pub mod offset_for_leader_epoch;
pub mod produce;

pub use api_versions::*;
pub use create_topics::*;
pub use delete_topics::*;
pub use fetch::*;
pub use init_producer_id::*;
pub use list_offsets::*;
pub use metadata::*;
pub use offset_for_leader_epoch::*;
pub use produce::*;

/// A top-level request or response body.
pub trait Message: Wire + Default + Clone + std::fmt::Debug + PartialEq {
    /// The Kafka API key.
    const API_KEY: i16;
    /// Lowest version this implementation encodes and decodes.
    const MIN_VERSION: i16;
    /// Highest version this implementation encodes and decodes.
    const MAX_VERSION: i16;
    /// First flexible version (compact encodings, tagged fields); `i16::MAX` if none.
    const FIRST_FLEXIBLE: i16;

    /// Whether `version` is one this implementation handles.
    fn supports(version: i16) -> bool {
        (Self::MIN_VERSION..=Self::MAX_VERSION).contains(&version)
    }

    /// Whether `version` uses the flexible encoding.
    fn is_flexible(version: i16) -> bool {
        version >= Self::FIRST_FLEXIBLE
    }

    /// Appends the body in `version`.
    fn encode_body(&self, buf: &mut BytesMut, version: i16) -> Result<(), EncodeError> {
        if !Self::supports(version) {
            return Err(EncodeError::UnsupportedVersion {
                api_key: Self::API_KEY,
                version,
            });
        }
        self.encode(buf, version, Self::is_flexible(version));
        Ok(())
    }

    /// Decodes a whole body in `version`; trailing bytes are an error.
    fn decode_body(body: Bytes, version: i16) -> Result<Self, DecodeError> {
        if !Self::supports(version) {
            return Err(DecodeError::UnsupportedVersion {
                api_key: Self::API_KEY,
                version,
            });
        }
        let mut d = Decoder::new(body);
        let msg = Self::decode(&mut d, version, Self::is_flexible(version))?;
        d.finish()?;
        Ok(msg)
    }
}

/// A request body and the response type it expects.
pub trait Request: Message {
    /// The response body type.
    type Response: Message;

    /// The request header version used with this request `version`.
    fn request_header_version(version: i16) -> i16 {
        if Self::is_flexible(version) {
            2
        } else {
            1
        }
    }

    /// The response header version used with this request `version`.
    ///
    /// ApiVersions responses always use header v0 so that a client can parse them
    /// whatever version the broker supports (KIP-511).
    fn response_header_version(version: i16) -> i16 {
        if Self::is_flexible(version) && Self::API_KEY != 18 {
            1
        } else {
            0
        }
    }
}

#[cfg(test)]
mod tests {
    //! Every message round-trips in every supported version, and arbitrary bytes
    //! decode to an error or a value, never a panic.

    use super::*;
    use crate::testing::{Random, Rng};
    use proptest::prelude::*;

    fn round_trip<M: Message + Random>(seed: u64) {
        let mut rng = Rng::new(seed);
        for version in M::MIN_VERSION..=M::MAX_VERSION {
            for _ in 0..4 {
                let msg = M::random(&mut rng, version);
                let mut buf = BytesMut::new();
                msg.encode_body(&mut buf, version).unwrap();
                let back = M::decode_body(buf.clone().freeze(), version).unwrap_or_else(|e| {
                    panic!(
                        "seed {seed}: api {} v{version} failed to decode: {e}",
                        M::API_KEY
                    )
                });
                assert_eq!(back, msg, "seed {seed}: api {} v{version}", M::API_KEY);
            }
        }
    }

    fn never_panics<M: Message>(bytes: &[u8]) {
        for version in M::MIN_VERSION..=M::MAX_VERSION {
            let _ = M::decode_body(Bytes::copy_from_slice(bytes), version);
        }
    }

    macro_rules! all_messages {
        ($f:ident, $arg:expr) => {
            $f::<ApiVersionsRequest>($arg);
            $f::<ApiVersionsResponse>($arg);
        };
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        #[test]
        fn every_message_round_trips(seed in any::<u64>()) {
            all_messages!(round_trip, seed);
        }

        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..256)) {
            all_messages!(never_panics, &bytes);
        }
    }
}
