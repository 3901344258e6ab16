//! Listener security: the security protocol of a listener (Kafka's
//! `listener.security.protocol.map` values), its SASL settings, and the
//! per-connection authentication gate the server runs every request through.
//!
//! - `listener.rs`: [`SecurityProtocol`] and [`ListenerSecurity`].
//! - `sasl.rs`: [`SaslSettings`], the enabled mechanisms and the users.
//! - `tls.rs`: [`TlsSettings`], certificate, key and [`ClientAuth`].
//! - `gate.rs`: `ConnectionAuth`, one connection's authentication state.

mod gate;
mod listener;
mod principal;
mod sasl;
mod tls;

pub(crate) use gate::{Admission, ConnectionAuth};
pub use listener::{ListenerSecurity, SecurityProtocol};
pub(crate) use principal::certificate_principal;
pub use sasl::SaslSettings;
pub use tls::{ClientAuth, TlsSettings};
