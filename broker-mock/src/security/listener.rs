//! [`SecurityProtocol`] and [`ListenerSecurity`]: how one listener secures its
//! connections.

pub use baton_protocol::security::SecurityProtocol;

use super::SaslSettings;
use crate::error::BrokerError;

/// The security of one listener: its protocol and, for SASL protocols, the
/// mechanisms and users.
#[derive(Clone, Debug, Default)]
pub struct ListenerSecurity {
    /// The security protocol.
    pub protocol: SecurityProtocol,
    /// Mechanisms and users; used when `protocol` is a SASL one.
    pub sasl: SaslSettings,
}

impl ListenerSecurity {
    /// A listener with `protocol` and no users yet.
    pub fn new(protocol: SecurityProtocol) -> ListenerSecurity {
        ListenerSecurity {
            protocol,
            sasl: SaslSettings::default(),
        }
    }

    /// Sets the SASL settings.
    pub fn with_sasl(mut self, sasl: SaslSettings) -> ListenerSecurity {
        self.sasl = sasl;
        self
    }

    /// Checks that the settings can serve `protocol`.
    pub(crate) fn validate(&self) -> Result<(), BrokerError> {
        if self.protocol.uses_tls() {
            return Err(BrokerError::Config(format!(
                "security protocol {} needs TLS, which this broker does not serve yet",
                self.protocol
            )));
        }
        if self.protocol.uses_sasl() && self.sasl.mechanisms().is_empty() {
            return Err(BrokerError::Config(format!(
                "security protocol {} needs at least one enabled SASL mechanism",
                self.protocol
            )));
        }
        Ok(())
    }
}
