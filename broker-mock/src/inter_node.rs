//! [`InterNodeSecurity`]: how a cluster's nodes secure the connections they open
//! to each other and to the controller (replication fetches, registration and
//! heartbeats, metadata fetches, reports, forwarded admin requests): TLS with the
//! trusted CAs, then optionally SASL (PLAIN or SCRAM) as an inter-broker user, as
//! Kafka's `security.inter.broker.protocol` and
//! `sasl.mechanism.inter.broker.protocol` do. The nodes' first listener and the
//! controller's listener serve the same [`ListenerSecurity`].
//!
//! `rpc.rs` runs the connecting side: the TLS handshake (the server name is the
//! dialled IP address, so certificates name the listen IP), then SaslHandshake
//! v1 and SaslAuthenticate v2 rounds, SCRAM's PBKDF2 on the blocking pool.

use std::sync::Arc;

use baton_protocol::sasl::{Mechanism, Secret};

use crate::error::BrokerError;
use crate::security::ListenerSecurity;

/// How nodes secure the connections they open to each other and to the
/// controller. `Debug` shows no password.
#[derive(Clone, Debug)]
pub struct InterNodeSecurity {
    /// The security of the nodes' first listener and of the controller's
    /// listener (its protocol, TLS certificate, SASL mechanisms and users; the
    /// inter-broker user must be among them).
    pub listener: ListenerSecurity,
    /// The inter-broker user (for SASL protocols).
    sasl: Option<(Mechanism, String, Secret)>,
    /// The connecting side's TLS configuration (the trusted CAs), for TLS
    /// protocols.
    tls: Option<Arc<rustls::ClientConfig>>,
}

impl InterNodeSecurity {
    /// The principal the nodes authenticate as to each other: `User:<name>` of
    /// the inter-broker SASL user, `None` without SASL.
    pub(crate) fn principal(&self) -> Option<String> {
        self.sasl
            .as_ref()
            .map(|(_, user, _)| format!("User:{user}"))
    }

    /// Inter-node connections secured as `listener` says; a TLS protocol trusts
    /// the CAs in `ca_pem`.
    pub fn new(listener: ListenerSecurity, ca_pem: &[u8]) -> Result<Self, BrokerError> {
        let tls = if listener.protocol.uses_tls() {
            let mut roots = rustls::RootCertStore::empty();
            for cert in rustls_pki_types::pem::PemObject::pem_slice_iter(ca_pem) {
                let cert: rustls_pki_types::CertificateDer<'static> =
                    cert.map_err(|e| BrokerError::Config(format!("inter-node CA: {e}")))?;
                roots
                    .add(cert)
                    .map_err(|e| BrokerError::Config(format!("inter-node CA: {e}")))?;
            }
            if roots.is_empty() {
                return Err(BrokerError::Config("inter-node CA: no certificate".into()));
            }
            let provider = Arc::new(rustls::crypto::ring::default_provider());
            let config = rustls::ClientConfig::builder_with_provider(provider)
                .with_safe_default_protocol_versions()
                .map_err(|e| BrokerError::Config(format!("inter-node TLS: {e}")))?
                .with_root_certificates(roots)
                .with_no_client_auth();
            Some(Arc::new(config))
        } else {
            None
        };
        Ok(InterNodeSecurity {
            listener,
            sasl: None,
            tls,
        })
    }

    /// Nodes log in as `user` with `mechanism` (the listener must know the user).
    pub fn with_sasl_user(
        mut self,
        mechanism: Mechanism,
        user: impl Into<String>,
        password: impl Into<Secret>,
    ) -> Self {
        self.sasl = Some((mechanism, user.into(), password.into()));
        self
    }

    /// The connecting side's TLS configuration, for TLS protocols.
    pub(crate) fn tls_config(&self) -> Option<&Arc<rustls::ClientConfig>> {
        self.tls.as_ref()
    }

    /// The inter-broker user, when the protocol uses SASL.
    pub(crate) fn sasl_user(&self) -> Option<(Mechanism, &str, &Secret)> {
        let (m, u, p) = self.sasl.as_ref()?;
        self.listener
            .protocol
            .uses_sasl()
            .then_some((*m, u.as_str(), p))
    }

    /// Checks that the settings fit together.
    pub(crate) fn validate(&self) -> Result<(), BrokerError> {
        self.listener.validate()?;
        if self.listener.protocol.uses_sasl() && self.sasl.is_none() {
            return Err(BrokerError::Config(format!(
                "inter-node protocol {} needs an inter-broker SASL user",
                self.listener.protocol
            )));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::security::{SaslSettings, SecurityProtocol, TlsSettings};

    #[test]
    fn settings_are_checked_and_hide_the_password() {
        let sasl = SaslSettings::new([Mechanism::ScramSha512])
            .with_scram_user(Mechanism::ScramSha512, "broker", "broker-secret")
            .unwrap();
        let plain_sasl = ListenerSecurity::new(SecurityProtocol::SaslPlaintext).with_sasl(sasl);
        let without_user = InterNodeSecurity::new(plain_sasl.clone(), b"").unwrap();
        assert!(without_user.validate().is_err(), "SASL needs a user");
        let with_user =
            without_user.with_sasl_user(Mechanism::ScramSha512, "broker", "broker-secret");
        with_user.validate().unwrap();
        assert!(with_user.sasl_user().is_some());
        assert!(with_user.tls_config().is_none());
        assert!(!format!("{with_user:?}").contains("broker-secret"));

        let cert = rcgen::generate_simple_self_signed(vec!["127.0.0.1".into()]).unwrap();
        let tls = TlsSettings::from_pem(
            cert.cert.pem().as_bytes(),
            cert.signing_key.serialize_pem().as_bytes(),
        )
        .unwrap();
        let ssl = ListenerSecurity::new(SecurityProtocol::Ssl).with_tls(tls);
        assert!(InterNodeSecurity::new(ssl.clone(), b"no certificate").is_err());
        let secured = InterNodeSecurity::new(ssl, cert.cert.pem().as_bytes()).unwrap();
        secured.validate().unwrap();
        assert!(secured.tls_config().is_some());
        assert!(
            secured.sasl_user().is_none(),
            "SSL logs in with no SASL user"
        );
    }
}
