//! Sans-io Kafka wire protocol for Baton: primitives, framing, request and response
//! headers, every message both ways, RecordBatch v2 with CRC-32C, and error codes.
//!
//! Nothing here does I/O. The client's connection layer and the broker's server layer
//! feed frames in and take frames out.
//!
//! ```
//! use baton_protocol::messages::{ApiVersionsRequest, Message};
//! use bytes::BytesMut;
//!
//! let req = ApiVersionsRequest {
//!     client_software_name: "baton".into(),
//!     client_software_version: "0.1.0".into(),
//! };
//! let mut buf = BytesMut::new();
//! req.encode_body(&mut buf, 3).unwrap();
//! let back = ApiVersionsRequest::decode_body(buf.freeze(), 3).unwrap();
//! assert_eq!(back, req);
//! ```

#![deny(unsafe_code)]

pub mod acl;
mod codec;
pub mod envelope;
pub mod error;
pub mod frame;
#[cfg(any(test, feature = "testing"))]
#[doc(hidden)]
pub mod fuzzing;
pub mod header;
#[doc(hidden)]
pub mod macros;
pub mod messages;
pub mod primitives;
pub mod record;
#[cfg(feature = "sasl")]
pub mod sasl;
pub mod security;
#[cfg(any(test, feature = "testing"))]
pub mod testing;

pub use error::{DecodeError, EncodeError, ErrorCode};
pub use frame::FrameCodec;
pub use header::{RequestHeader, ResponseHeader};
pub use messages::{Message, Request};
pub use primitives::Uuid;
