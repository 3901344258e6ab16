//! W3C Trace Context (<https://www.w3.org/TR/trace-context/>) in record headers,
//! so that an application can join a producer's trace and its consumers' traces.
//!
//! A [`TraceContext`] is the `traceparent` value: a 16-byte trace id, the 8-byte
//! id of the span that produced the record, and the trace flags. The producer
//! writes it as a `traceparent` header when the application supplies one
//! ([`ProducerRecord::trace_context`](crate::ProducerRecord::trace_context), or
//! for every record [`ProducerBuilder::propagate_trace_context`](crate::ProducerBuilder::propagate_trace_context));
//! a consumer reads it back with
//! [`ConsumerRecord::trace_context`](crate::ConsumerRecord::trace_context). The
//! SDK carries the ids only: making spans of them (for example with
//! `tracing-opentelemetry`, whose trace and span ids convert to and from these
//! byte arrays) is the application's part.
//!
//! ```
//! use baton_kafka::TraceContext;
//!
//! let ctx: TraceContext = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01".parse()?;
//! assert!(ctx.is_sampled());
//! assert_eq!(ctx.span_id(), [0x00, 0xf0, 0x67, 0xaa, 0x0b, 0xa9, 0x02, 0xb7]);
//! assert_eq!(ctx.to_string(), "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01");
//! # Ok::<(), baton_kafka::TraceContextError>(())
//! ```

use std::fmt;
use std::str::FromStr;

use bytes::Bytes;

use crate::RecordHeader;

/// The record header that carries a [`TraceContext`], as in W3C Trace Context's
/// HTTP header of the same name.
pub const TRACEPARENT: &str = "traceparent";

/// The length of a version 00 `traceparent` value (and the least of any version).
const LEN: usize = 55;

/// The sampled trace flag: the caller may have recorded its part of the trace.
const SAMPLED: u8 = 0x01;

/// A W3C `traceparent`: trace id, parent span id and trace flags.
///
/// Invariant: neither id is all zeroes (the specification makes such values
/// invalid), so every `TraceContext` formats to a valid version 00 value.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct TraceContext {
    trace_id: [u8; 16],
    span_id: [u8; 8],
    flags: u8,
}

/// Why a `traceparent` value (or a pair of ids) is not a valid trace context.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TraceContextError {
    /// The value does not have the `version-traceid-parentid-flags` shape: wrong
    /// length, a missing dash, or characters that are not lowercase hex digits.
    #[error("malformed traceparent")]
    Malformed,
    /// The version is `ff`, which the specification forbids.
    #[error("traceparent version ff is invalid")]
    InvalidVersion,
    /// The trace id is all zeroes.
    #[error("the trace id is all zeroes")]
    ZeroTraceId,
    /// The parent (span) id is all zeroes.
    #[error("the span id is all zeroes")]
    ZeroSpanId,
}

impl TraceContext {
    /// A context from its ids and trace flags (bit 0 is "sampled"; the others
    /// are carried as given). Fails if an id is all zeroes.
    pub fn new(trace_id: [u8; 16], span_id: [u8; 8], flags: u8) -> Result<Self, TraceContextError> {
        if trace_id == [0; 16] {
            return Err(TraceContextError::ZeroTraceId);
        }
        if span_id == [0; 8] {
            return Err(TraceContextError::ZeroSpanId);
        }
        Ok(TraceContext {
            trace_id,
            span_id,
            flags,
        })
    }

    /// Parses a `traceparent` value.
    ///
    /// Version 00 must be exactly `00-<32 hex>-<16 hex>-<2 hex>`, lowercase. A
    /// higher version (other than the invalid `ff`) is read as the specification
    /// says a version 00 parser reads a future one: its first 55 characters must
    /// have the version 00 shape and be followed by nothing or by a dash; what
    /// follows is ignored, and the context is written back as version 00.
    pub fn parse(value: &[u8]) -> Result<Self, TraceContextError> {
        if value.len() < LEN {
            return Err(TraceContextError::Malformed);
        }
        let version = hex_byte(&value[0..2]).ok_or(TraceContextError::Malformed)?;
        if version == 0xff {
            return Err(TraceContextError::InvalidVersion);
        }
        let rest_ok = match version {
            0 => value.len() == LEN,
            _ => value.len() == LEN || value[LEN] == b'-',
        };
        if !rest_ok || value[2] != b'-' || value[35] != b'-' || value[52] != b'-' {
            return Err(TraceContextError::Malformed);
        }
        let mut trace_id = [0; 16];
        hex_into(&value[3..35], &mut trace_id)?;
        let mut span_id = [0; 8];
        hex_into(&value[36..52], &mut span_id)?;
        let flags = hex_byte(&value[53..55]).ok_or(TraceContextError::Malformed)?;
        TraceContext::new(trace_id, span_id, flags)
    }

    /// The trace id.
    pub fn trace_id(&self) -> [u8; 16] {
        self.trace_id
    }

    /// The id of the span that sent the record (the specification's parent id).
    pub fn span_id(&self) -> [u8; 8] {
        self.span_id
    }

    /// The trace flags.
    pub fn flags(&self) -> u8 {
        self.flags
    }

    /// Whether the sampled flag is set.
    pub fn is_sampled(&self) -> bool {
        self.flags & SAMPLED != 0
    }

    /// The `traceparent` header carrying this context (version 00).
    pub fn to_header(&self) -> RecordHeader {
        RecordHeader::new(TRACEPARENT, Some(Bytes::from(self.to_string())))
    }

    /// The context in the last `traceparent` header of `headers` (the last, as
    /// the Java client's `Headers.lastHeader`); `None` if there is none, or if
    /// it is null or invalid (the specification has invalid values ignored).
    pub fn from_headers(headers: &[RecordHeader]) -> Option<Self> {
        let header = headers.iter().rev().find(|h| h.key == TRACEPARENT)?;
        TraceContext::parse(header.value.as_deref()?).ok()
    }
}

/// Adds `ctx` as a `traceparent` header unless `headers` has one already.
pub(crate) fn inject(headers: &mut Vec<RecordHeader>, ctx: &TraceContext) {
    inject_from(headers, &|| Some(*ctx));
}

/// Adds the context `current` gives as a `traceparent` header unless `headers`
/// has one already (then `current` is not called).
pub(crate) fn inject_from(
    headers: &mut Vec<RecordHeader>,
    current: &(dyn Fn() -> Option<TraceContext> + Send + Sync),
) {
    if headers.iter().any(|h| h.key == TRACEPARENT) {
        return;
    }
    if let Some(ctx) = current() {
        headers.push(ctx.to_header());
    }
}

impl FromStr for TraceContext {
    type Err = TraceContextError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        TraceContext::parse(s.as_bytes())
    }
}

impl fmt::Display for TraceContext {
    /// The version 00 `traceparent` value.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("00-")?;
        for b in self.trace_id {
            write!(f, "{b:02x}")?;
        }
        f.write_str("-")?;
        for b in self.span_id {
            write!(f, "{b:02x}")?;
        }
        write!(f, "-{:02x}", self.flags)
    }
}

impl fmt::Debug for TraceContext {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "TraceContext({self})")
    }
}

/// The value of a lowercase hex digit.
fn hex_digit(c: u8) -> Option<u8> {
    match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        _ => None,
    }
}

/// Two lowercase hex digits as a byte.
fn hex_byte(pair: &[u8]) -> Option<u8> {
    Some(hex_digit(pair[0])? << 4 | hex_digit(pair[1])?)
}

/// Fills `out` from twice as many lowercase hex digits.
fn hex_into(digits: &[u8], out: &mut [u8]) -> Result<(), TraceContextError> {
    for (byte, pair) in out.iter_mut().zip(digits.chunks_exact(2)) {
        *byte = hex_byte(pair).ok_or(TraceContextError::Malformed)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const EXAMPLE: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

    #[test]
    fn the_specification_example_parses_and_formats_back() {
        let ctx: TraceContext = EXAMPLE.parse().unwrap();
        assert_eq!(
            ctx.trace_id(),
            [
                0x4b, 0xf9, 0x2f, 0x35, 0x77, 0xb3, 0x4d, 0xa6, 0xa3, 0xce, 0x92, 0x9d, 0x0e, 0x0e,
                0x47, 0x36
            ]
        );
        assert_eq!(ctx.flags(), 1);
        assert!(ctx.is_sampled());
        assert_eq!(ctx.to_string(), EXAMPLE);
        let unsampled: TraceContext = EXAMPLE.replace("-01", "-00").parse().unwrap();
        assert!(!unsampled.is_sampled());
    }

    #[test]
    fn invalid_values_are_refused() {
        let cases = [
            ("", TraceContextError::Malformed),
            (&EXAMPLE[..54], TraceContextError::Malformed),
            // Version 00 has exactly 55 characters.
            (
                "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-",
                TraceContextError::Malformed,
            ),
            (
                "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
                TraceContextError::Malformed,
            ),
            (
                "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0g",
                TraceContextError::Malformed,
            ),
            (
                "00_4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
                TraceContextError::Malformed,
            ),
            (
                "00-4bf92f3577b34da6a3ce929d0e0e4736_00f067aa0ba902b7-01",
                TraceContextError::Malformed,
            ),
            (
                "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7_01",
                TraceContextError::Malformed,
            ),
            (
                "0x-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
                TraceContextError::Malformed,
            ),
            (
                "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
                TraceContextError::InvalidVersion,
            ),
            (
                "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
                TraceContextError::ZeroTraceId,
            ),
            (
                "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
                TraceContextError::ZeroSpanId,
            ),
            // A future version: what follows the flags must start with a dash.
            (
                "cc-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01x",
                TraceContextError::Malformed,
            ),
        ];
        for (value, want) in cases {
            assert_eq!(TraceContext::from_str(value), Err(want), "{value:?}");
        }
    }

    #[test]
    fn future_versions_are_read_as_version_00() {
        for value in [
            "cc-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-09",
            "cc-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-09-what-comes-next",
        ] {
            let ctx: TraceContext = value.parse().unwrap();
            assert_eq!(ctx.flags(), 9);
            assert_eq!(ctx.to_string(), value[..LEN].replacen("cc", "00", 1));
        }
    }

    #[test]
    fn headers_keep_an_existing_traceparent_and_read_the_last() {
        let a: TraceContext = EXAMPLE.parse().unwrap();
        let b = TraceContext::new([7; 16], [9; 8], 0).unwrap();
        let mut headers = vec![RecordHeader::new("other", None)];
        assert_eq!(TraceContext::from_headers(&headers), None);
        inject(&mut headers, &a);
        inject(&mut headers, &b);
        assert_eq!(headers.len(), 2);
        assert_eq!(TraceContext::from_headers(&headers), Some(a));
        headers.push(b.to_header());
        assert_eq!(TraceContext::from_headers(&headers), Some(b));
        headers.push(RecordHeader::new(
            TRACEPARENT,
            Some(Bytes::from_static(b"junk")),
        ));
        assert_eq!(TraceContext::from_headers(&headers), None);
    }

    proptest! {
        #[test]
        fn every_valid_context_round_trips(
            trace_id in any::<[u8; 16]>(),
            span_id in any::<[u8; 8]>(),
            flags in any::<u8>(),
        ) {
            match TraceContext::new(trace_id, span_id, flags) {
                Ok(ctx) => {
                    let text = ctx.to_string();
                    prop_assert_eq!(text.len(), LEN);
                    prop_assert_eq!(text.parse::<TraceContext>(), Ok(ctx));
                }
                Err(_) => prop_assert!(trace_id == [0; 16] || span_id == [0; 8]),
            }
        }

        #[test]
        fn arbitrary_bytes_never_panic_and_parsed_values_are_canonical(
            bytes in proptest::collection::vec(any::<u8>(), 0..80),
        ) {
            if let Ok(ctx) = TraceContext::parse(&bytes) {
                // Whatever parses is a valid context whose version 00 text is the
                // input's first 55 characters with the version replaced.
                let text = ctx.to_string();
                prop_assert_eq!(&text.as_bytes()[2..], &bytes[2..LEN]);
            }
        }

        #[test]
        fn one_changed_character_is_refused_or_read_as_written(
            trace_id in any::<[u8; 16]>(),
            span_id in any::<[u8; 8]>(),
            flags in any::<u8>(),
            at in 0..LEN,
            c in any::<u8>(),
        ) {
            prop_assume!(trace_id != [0; 16] && span_id != [0; 8]);
            let ctx = TraceContext::new(trace_id, span_id, flags).unwrap();
            let mut text = ctx.to_string().into_bytes();
            prop_assume!(text[at] != c);
            let dash = [2, 35, 52].contains(&at);
            text[at] = c;
            match TraceContext::parse(&text) {
                Ok(parsed) => {
                    // Only another lowercase hex digit in place of one keeps it valid.
                    prop_assert!(hex_digit(c).is_some() && !dash);
                    let again = parsed.to_string();
                    prop_assert_eq!(&again.as_bytes()[2..], &text[2..]);
                }
                Err(_) => {
                    let zero = |ids: &[u8]| ids.iter().all(|&d| d == b'0');
                    prop_assert!(
                        hex_digit(c).is_none() || dash || zero(&text[3..35]) || zero(&text[36..52])
                    );
                }
            }
        }
    }
}
