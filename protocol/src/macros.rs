//! `wire_struct!`: declares a versioned Kafka struct once and derives its encoder,
//! decoder, default and (with baton-protocol's `testing` feature) random generator
//! from that one declaration. It works from other crates too: whether the random
//! generator is emitted depends on baton-protocol's feature, not the caller's.
//!
//! ```text
//! wire_struct! {
//!     /// Docs.
//!     pub struct Example {
//!         /// Present from v0.
//!         pub name: String [0..],
//!         /// Present in v1 to v3, default -1.
//!         pub id: i32 [1..=3] default(-1),
//!         /// A tagged field (flexible versions only), tag 0, from v5.
//!         pub hint: i32 [5..] tag(0) default(-1),
//!     }
//! }
//! ```
//!
//! Field ranges are Rust range expressions over the message version. Non-tagged fields
//! are written in declaration order when the version is in range. Tagged fields are
//! written in the trailing tagged section (flexible versions only) when in range and
//! not equal to their default; they must be declared in ascending tag order.

/// Declares a Kafka struct; see the module docs.
#[macro_export]
macro_rules! wire_struct {
    (
        $(#[$meta:meta])*
        pub struct $name:ident {
            $(
                $(#[$fmeta:meta])*
                pub $field:ident : $fty:ty [$vers:expr] $(tag($tag:literal))? $(default($def:expr))?
            ),* $(,)?
        }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, PartialEq)]
        pub struct $name {
            $( $(#[$fmeta])* pub $field: $fty, )*
        }

        impl Default for $name {
            fn default() -> Self {
                $name {
                    $( $field: $crate::wire_struct!(@default $fty $(, $def)?), )*
                }
            }
        }

        impl $crate::primitives::Wire for $name {
            #[allow(unused_variables, unused_mut, clippy::manual_range_contains)]
            fn encode(&self, buf: &mut ::bytes::BytesMut, version: i16, flexible: bool) {
                $( $crate::wire_struct!(@enc self, buf, version, flexible, $field, $vers $(, $tag)?); )*
                if flexible {
                    $crate::wire_struct!(@tags self, buf, version; $( $field, $vers $(, $tag)?; )*);
                }
            }

            #[allow(unused_variables, unused_mut, clippy::manual_range_contains)]
            fn encode_to(
                &self,
                out: &mut $crate::primitives::Encoder,
                version: i16,
                flexible: bool,
            ) {
                $( $crate::wire_struct!(@enc_to self, out, version, flexible, $field, $vers $(, $tag)?); )*
                if flexible {
                    // Tagged fields are small; they are always encoded inline.
                    let buf = out.buf_mut();
                    $crate::wire_struct!(@tags self, buf, version; $( $field, $vers $(, $tag)?; )*);
                }
            }

            #[allow(unused_variables, unused_mut, clippy::manual_range_contains)]
            fn decode(
                d: &mut $crate::primitives::Decoder,
                version: i16,
                flexible: bool,
            ) -> Result<Self, $crate::error::DecodeError> {
                let mut out = Self::default();
                $( $crate::wire_struct!(@dec out, d, version, flexible, $field, $vers $(, $tag)?); )*
                if flexible {
                    $crate::primitives::decode_tagged_fields(d, |tag, fd| {
                        $( $crate::wire_struct!(@dectag out, fd, tag, version, $field, $vers $(, $tag)?); )*
                        Ok(false)
                    })?;
                }
                Ok(out)
            }
        }

        impl $crate::primitives::ArrayElement for $name {}

        $crate::wire_random! { $name { $( $field : $fty [$vers] ),* } }
    };

    (@default $fty:ty) => { <$fty as Default>::default() };
    (@default $fty:ty, $def:expr) => { $def };

    (@enc $s:ident, $buf:ident, $v:ident, $fl:ident, $field:ident, $vers:expr) => {
        if ($vers).contains(&$v) {
            $crate::primitives::Wire::encode(&$s.$field, $buf, $v, $fl);
        }
    };
    (@enc $s:ident, $buf:ident, $v:ident, $fl:ident, $field:ident, $vers:expr, $tag:literal) => {};

    (@enc_to $s:ident, $out:ident, $v:ident, $fl:ident, $field:ident, $vers:expr) => {
        if ($vers).contains(&$v) {
            $crate::primitives::Wire::encode_to(&$s.$field, $out, $v, $fl);
        }
    };
    (@enc_to $s:ident, $out:ident, $v:ident, $fl:ident, $field:ident, $vers:expr, $tag:literal) => {};

    (@tags $s:ident, $buf:ident, $v:ident; $( $field:ident, $vers:expr $(, $tag:literal)?; )*) => {
        let defaults = Self::default();
        let mut count: u32 = 0;
        $( $crate::wire_struct!(@count $s, defaults, $v, count, $field, $vers $(, $tag)?); )*
        $crate::primitives::put_uvarint($buf, count);
        $( $crate::wire_struct!(@tagged $s, defaults, $buf, $v, $field, $vers $(, $tag)?); )*
    };

    (@count $s:ident, $defs:ident, $v:ident, $count:ident, $field:ident, $vers:expr) => {};
    (@count $s:ident, $defs:ident, $v:ident, $count:ident, $field:ident, $vers:expr, $tag:literal) => {
        if ($vers).contains(&$v) && $s.$field != $defs.$field {
            $count += 1;
        }
    };

    (@tagged $s:ident, $defs:ident, $buf:ident, $v:ident, $field:ident, $vers:expr) => {};
    (@tagged $s:ident, $defs:ident, $buf:ident, $v:ident, $field:ident, $vers:expr, $tag:literal) => {
        if ($vers).contains(&$v) && $s.$field != $defs.$field {
            $crate::primitives::put_tagged_field($buf, $tag, |b| {
                $crate::primitives::Wire::encode(&$s.$field, b, $v, true)
            });
        }
    };

    (@dec $out:ident, $d:ident, $v:ident, $fl:ident, $field:ident, $vers:expr) => {
        if ($vers).contains(&$v) {
            $out.$field = $crate::primitives::Wire::decode($d, $v, $fl)?;
        }
    };
    (@dec $out:ident, $d:ident, $v:ident, $fl:ident, $field:ident, $vers:expr, $tag:literal) => {};

    (@dectag $out:ident, $fd:ident, $t:ident, $v:ident, $field:ident, $vers:expr) => {};
    (@dectag $out:ident, $fd:ident, $t:ident, $v:ident, $field:ident, $vers:expr, $tag:literal) => {
        if $t == $tag && ($vers).contains(&$v) {
            $out.$field = $crate::primitives::Wire::decode($fd, $v, true)?;
            return Ok(true);
        }
    };
}

/// Implements [`crate::testing::Random`] for a struct declared by [`wire_struct!`]
/// (which calls it): each field present in the version gets a random value.
///
/// Whether the impl exists follows baton-protocol's own `testing` feature (or its own
/// unit tests), not the calling crate's: it is emitted exactly when
/// `baton_protocol::testing` exists, so `wire_struct!` can be used from any crate.
/// A crate that wants random values of its structs enables `baton-protocol/testing`
/// (for example in its dev-dependencies).
#[cfg(any(test, feature = "testing"))]
#[macro_export]
macro_rules! wire_random {
    ($name:ident { $( $field:ident : $fty:ty [$vers:expr] ),* }) => {
        impl $crate::testing::Random for $name {
            #[allow(unused_variables, clippy::manual_range_contains)]
            fn random(rng: &mut $crate::testing::Rng, version: i16) -> Self {
                let mut out = Self::default();
                $(
                    if ($vers).contains(&version) {
                        out.$field = <$fty as $crate::testing::Random>::random(rng, version);
                    }
                )*
                out
            }
        }
    };
}

/// Implements `baton_protocol::testing::Random` for a struct declared by
/// [`wire_struct!`] when baton-protocol is built with its `testing` feature; without
/// it (as here) it expands to nothing.
#[cfg(not(any(test, feature = "testing")))]
#[macro_export]
macro_rules! wire_random {
    ($name:ident { $( $field:ident : $fty:ty [$vers:expr] ),* }) => {};
}

/// Ties a top-level request or response struct to its API key and version ranges.
///
/// `impl_message!(MetadataRequest, key = 3, versions = 0..=12, flexible = 9, response = MetadataResponse);`
#[macro_export]
macro_rules! impl_message {
    ($name:ident, key = $key:expr, versions = $min:literal ..= $max:literal, flexible = $flex:expr $(, response = $resp:ident)?) => {
        impl $crate::messages::Message for $name {
            const API_KEY: i16 = $key;
            const MIN_VERSION: i16 = $min;
            const MAX_VERSION: i16 = $max;
            const FIRST_FLEXIBLE: i16 = $flex;
        }
        $( impl $crate::messages::Request for $name {
            type Response = $resp;
        } )?
    };
}
