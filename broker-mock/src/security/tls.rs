//! [`TlsSettings`]: a listener's certificate chain and key (PEM, as Kafka's
//! `ssl.keystore.type=PEM`, KIP-651) and whether it asks clients for certificates
//! (`ssl.client.auth`), turned into a rustls server configuration (ring provider)
//! at start.

use std::path::Path;
use std::sync::Arc;

use rustls::server::WebPkiClientVerifier;
use rustls::RootCertStore;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};

use crate::error::BrokerError;

/// Whether a TLS listener asks clients for certificates, as Kafka's
/// `ssl.client.auth` (`none`, `requested`, `required`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum ClientAuth {
    /// Clients are not asked for a certificate (the default).
    #[default]
    None,
    /// Clients are asked; one without a certificate is still served, one with a
    /// certificate the trusted CAs did not sign is refused.
    Requested,
    /// A client without a certificate signed by a trusted CA is refused (mTLS).
    Required,
}

/// The TLS side of a listener. `Debug` shows no key material.
#[derive(Clone)]
pub struct TlsSettings {
    chain: Vec<CertificateDer<'static>>,
    key: Arc<PrivateKeyDer<'static>>,
    client_auth: ClientAuth,
    client_cas: Vec<CertificateDer<'static>>,
}

impl std::fmt::Debug for TlsSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TlsSettings")
            .field("certificates", &self.chain.len())
            .field("client_auth", &self.client_auth)
            .field("client_cas", &self.client_cas.len())
            .finish_non_exhaustive()
    }
}

impl TlsSettings {
    /// The certificate chain (leaf first) and private key from PEM text.
    pub fn from_pem(chain_pem: &[u8], key_pem: &[u8]) -> Result<TlsSettings, BrokerError> {
        let chain = certificates(chain_pem, "listener certificate chain")?;
        let key = PrivateKeyDer::from_pem_slice(key_pem)
            .map_err(|e| BrokerError::Config(format!("TLS private key: {e}")))?;
        Ok(TlsSettings {
            chain,
            key: Arc::new(key),
            client_auth: ClientAuth::None,
            client_cas: Vec::new(),
        })
    }

    /// The certificate chain and private key from PEM files (Kafka's
    /// `ssl.keystore.location` with `ssl.keystore.type=PEM`).
    pub fn from_pem_files(
        chain: impl AsRef<Path>,
        key: impl AsRef<Path>,
    ) -> Result<TlsSettings, BrokerError> {
        let read = |path: &Path| {
            std::fs::read(path)
                .map_err(|e| BrokerError::Config(format!("reading {}: {e}", path.display())))
        };
        TlsSettings::from_pem(&read(chain.as_ref())?, &read(key.as_ref())?)
    }

    /// Asks clients for certificates signed by one of the CAs in `ca_pem`.
    pub fn with_client_auth(
        mut self,
        client_auth: ClientAuth,
        ca_pem: &[u8],
    ) -> Result<TlsSettings, BrokerError> {
        self.client_auth = client_auth;
        self.client_cas = certificates(ca_pem, "client CA bundle")?;
        Ok(self)
    }

    /// The rustls server configuration for these settings.
    pub(crate) fn server_config(&self) -> Result<Arc<rustls::ServerConfig>, BrokerError> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let builder = rustls::ServerConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .map_err(|e| BrokerError::Config(format!("TLS: {e}")))?;
        let builder = match self.client_auth {
            ClientAuth::None => builder.with_no_client_auth(),
            auth => {
                let mut roots = RootCertStore::empty();
                for ca in &self.client_cas {
                    roots
                        .add(ca.clone())
                        .map_err(|e| BrokerError::Config(format!("client CA bundle: {e}")))?;
                }
                let verifier =
                    WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider);
                let verifier = if auth == ClientAuth::Requested {
                    verifier.allow_unauthenticated()
                } else {
                    verifier
                };
                let verifier = verifier.build().map_err(|e| {
                    BrokerError::Config(format!("client certificate verifier: {e}"))
                })?;
                builder.with_client_cert_verifier(verifier)
            }
        };
        let config = builder
            .with_single_cert(self.chain.clone(), self.key.clone_key())
            .map_err(|e| BrokerError::Config(format!("TLS certificate and key: {e}")))?;
        Ok(Arc::new(config))
    }
}

/// Every certificate in `pem`; none at all is an error.
fn certificates(pem: &[u8], what: &str) -> Result<Vec<CertificateDer<'static>>, BrokerError> {
    let certs = CertificateDer::pem_slice_iter(pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| BrokerError::Config(format!("{what}: {e}")))?;
    if certs.is_empty() {
        return Err(BrokerError::Config(format!(
            "{what}: no PEM certificate found"
        )));
    }
    Ok(certs)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_pem_is_a_config_error() {
        let err = TlsSettings::from_pem(b"not pem", b"").unwrap_err();
        assert!(err.to_string().contains("no PEM certificate"), "{err}");
    }

    #[test]
    fn generated_certificate_builds_an_acceptor_and_hides_its_key() {
        let cert = rcgen::generate_simple_self_signed(vec!["localhost".into()]).unwrap();
        let key_pem = cert.signing_key.serialize_pem();
        let settings =
            TlsSettings::from_pem(cert.cert.pem().as_bytes(), key_pem.as_bytes()).unwrap();
        settings.server_config().unwrap();
        let text = format!("{settings:?}");
        assert!(
            !text.contains("PRIVATE") && !text.contains("Pkcs8"),
            "{text}"
        );
        let mtls = settings
            .with_client_auth(ClientAuth::Required, cert.cert.pem().as_bytes())
            .unwrap();
        mtls.server_config().unwrap();
    }
}
