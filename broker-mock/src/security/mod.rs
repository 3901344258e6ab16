//! Listener security: the security protocol of a listener (Kafka's
//! `listener.security.protocol.map` values), its SASL settings, and the
//! per-connection authentication gate the server runs every request through.
//!
//! - `listener.rs`: [`SecurityProtocol`] and [`ListenerSecurity`].
//! - `sasl.rs`: [`SaslSettings`], the enabled mechanisms, the users, the token
//!   validator and `connections.max.reauth.ms`.
//! - `oauth.rs`: [`TokenValidator`], how OAUTHBEARER tokens are validated.
//! - `reauth.rs`: session lifetimes and re-authentication rules (KIP-368),
//!   [`SaslStats`].
//! - `tls.rs`: [`TlsSettings`], certificate, key and [`ClientAuth`].
//! - `scram_store.rs`: `ScramStore`, the node's SCRAM users, shared by its SASL
//!   listeners and changed by AlterUserScramCredentials.
//! - `gate.rs`: `ConnectionAuth`, one connection's authentication state.

mod gate;
mod listener;
mod oauth;
mod principal;
pub(crate) mod reauth;
mod sasl;
mod scram_store;
mod tls;

pub(crate) use gate::{Admission, ConnectionAuth};
pub use listener::{ListenerSecurity, SecurityProtocol};
pub use oauth::TokenValidator;
pub(crate) use principal::certificate_principal;
pub use reauth::SaslStats;
pub use sasl::SaslSettings;
pub(crate) use scram_store::ScramStore;
pub use scram_store::MAX_SCRAM_CREDENTIALS;
pub use tls::{ClientAuth, TlsSettings};
