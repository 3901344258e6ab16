//! [`SecurityProtocol`] and [`ListenerSecurity`]: how one listener secures its
//! connections.

pub use baton_protocol::security::SecurityProtocol;

use super::{SaslSettings, TlsSettings};
use std::sync::Arc;

use crate::error::BrokerError;

/// The security of one listener: its protocol and, for SASL protocols, the
/// mechanisms and users.
#[derive(Clone, Debug, Default)]
pub struct ListenerSecurity {
    /// The security protocol.
    pub protocol: SecurityProtocol,
    /// Mechanisms and users; used when `protocol` is a SASL one.
    pub sasl: SaslSettings,
    /// Certificate, key and client authentication; required when `protocol` is
    /// `SSL` or `SASL_SSL`.
    pub tls: Option<TlsSettings>,
}

impl ListenerSecurity {
    /// A listener with `protocol` and no users yet.
    pub fn new(protocol: SecurityProtocol) -> ListenerSecurity {
        ListenerSecurity {
            protocol,
            sasl: SaslSettings::default(),
            tls: None,
        }
    }

    /// These settings on a node's wall clock (see `SaslSettings::on_clock`).
    pub(crate) fn on_clock(mut self, clock: crate::clock::WallClock) -> ListenerSecurity {
        self.sasl = self.sasl.on_clock(clock);
        self
    }

    /// Sets the TLS settings.
    pub fn with_tls(mut self, tls: TlsSettings) -> ListenerSecurity {
        self.tls = Some(tls);
        self
    }

    /// Sets the SASL settings.
    pub fn with_sasl(mut self, sasl: SaslSettings) -> ListenerSecurity {
        self.sasl = sasl;
        self
    }

    /// Checks that the settings can serve `protocol` and builds the TLS server
    /// configuration (`None` for a listener without TLS).
    pub(crate) fn validate(&self) -> Result<Option<Arc<rustls::ServerConfig>>, BrokerError> {
        let acceptor = match (&self.tls, self.protocol.uses_tls()) {
            (Some(tls), true) => Some(tls.server_config()?),
            (None, true) => {
                return Err(BrokerError::Config(format!(
                    "security protocol {} needs TLS settings (certificate and key)",
                    self.protocol
                )))
            }
            (_, false) => None,
        };
        if self.protocol.uses_sasl() && self.sasl.mechanisms().is_empty() {
            return Err(BrokerError::Config(format!(
                "security protocol {} needs at least one enabled SASL mechanism",
                self.protocol
            )));
        }
        Ok(acceptor)
    }
}
