//! TLS for `SSL` and `SASL_SSL` connections: rustls with the ring provider.
//!
//! [`TlsConfig`] says whom to trust (the operating system's roots by default, or a
//! CA bundle in PEM), which name to verify (the host of the broker's address
//! unless overridden; sent as SNI), and an optional client certificate (mTLS).
//! The broker's certificate chain is always verified; its host name too, unless
//! [`TlsConfig::verify_hostname`] turns that off (Kafka's
//! `ssl.endpoint.identification.algorithm=`). A handshake failure is
//! [`ConnectionError::Tls`] naming the certificate problem.

use std::io;
use std::path::Path;
use std::sync::{Arc, OnceLock};

use baton_env::Socket;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::WebPkiServerVerifier;
use rustls::pki_types::{ServerName, UnixTime};
use rustls::{CertificateError, DigitallySignedStruct, RootCertStore, SignatureScheme};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use tokio::io::BufReader;
use tokio_rustls::client::TlsStream;
use tokio_rustls::TlsConnector;

use crate::connection::ConnectionError;

/// Bytes of ciphertext read from the socket at once. rustls reads at most 4 KiB
/// per call (a 16 KiB record takes four or more), so without a buffer below it a
/// large Fetch response costs a read system call per 4 KiB; with this one it costs
/// one per 64 KiB, and rustls's small reads become copies within memory.
const TLS_READ_BUFFER: usize = 64 * 1024;

/// The byte stream under a client's TLS session: the socket with a read buffer
/// ([`TLS_READ_BUFFER`]); writes pass straight through.
pub(crate) type TlsTransport = BufReader<Socket>;

/// Whom the client trusts.
#[derive(Clone)]
enum Roots {
    /// The operating system's trust store (`rustls-native-certs`).
    System,
    /// The CAs of a PEM bundle.
    Pem(Vec<CertificateDer<'static>>),
}

/// A client certificate chain and its key.
#[derive(Clone)]
struct ClientCert {
    chain: Vec<CertificateDer<'static>>,
    key: Arc<PrivateKeyDer<'static>>,
}

/// The client's TLS settings. `Debug` shows no key material.
#[derive(Clone)]
pub struct TlsConfig {
    roots: Roots,
    client_cert: Option<ClientCert>,
    server_name: Option<String>,
    verify_hostname: bool,
    /// The rustls configuration, built on first use and shared by every connection.
    built: Arc<OnceLock<Result<Arc<rustls::ClientConfig>, String>>>,
}

impl std::fmt::Debug for TlsConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let roots = match &self.roots {
            Roots::System => "system".to_string(),
            Roots::Pem(cas) => format!("{} PEM CA(s)", cas.len()),
        };
        f.debug_struct("TlsConfig")
            .field("roots", &roots)
            .field("client_certificate", &self.client_cert.is_some())
            .field("server_name", &self.server_name)
            .field("verify_hostname", &self.verify_hostname)
            .finish()
    }
}

impl Default for TlsConfig {
    fn default() -> Self {
        TlsConfig::system_roots()
    }
}

impl TlsConfig {
    /// Trusts the operating system's roots (the default).
    pub fn system_roots() -> TlsConfig {
        TlsConfig {
            roots: Roots::System,
            client_cert: None,
            server_name: None,
            verify_hostname: true,
            built: Arc::default(),
        }
    }

    /// Trusts exactly the CAs of a PEM bundle (Kafka's `ssl.truststore.type=PEM`).
    pub fn with_ca_pem(pem: &[u8]) -> Result<TlsConfig, ConnectionError> {
        Ok(TlsConfig {
            roots: Roots::Pem(certificates(pem, "CA bundle")?),
            ..TlsConfig::system_roots()
        })
    }

    /// Trusts exactly the CAs of a PEM file (`ssl.truststore.location`).
    pub fn with_ca_pem_file(path: impl AsRef<Path>) -> Result<TlsConfig, ConnectionError> {
        TlsConfig::with_ca_pem(&read(path.as_ref())?)
    }

    /// Presents a client certificate (mTLS): the chain (leaf first) and its
    /// private key, in PEM.
    pub fn client_cert_pem(
        mut self,
        chain_pem: &[u8],
        key_pem: &[u8],
    ) -> Result<TlsConfig, ConnectionError> {
        let chain = certificates(chain_pem, "client certificate")?;
        let key = PrivateKeyDer::from_pem_slice(key_pem)
            .map_err(|e| ConnectionError::SecurityConfig(format!("client private key: {e}")))?;
        self.client_cert = Some(ClientCert {
            chain,
            key: Arc::new(key),
        });
        self.built = Arc::default();
        Ok(self)
    }

    /// Presents a client certificate from PEM files.
    pub fn client_cert_pem_files(
        self,
        chain: impl AsRef<Path>,
        key: impl AsRef<Path>,
    ) -> Result<TlsConfig, ConnectionError> {
        let (chain, key) = (read(chain.as_ref())?, read(key.as_ref())?);
        self.client_cert_pem(&chain, &key)
    }

    /// Verifies the broker's certificate against `name` (and sends it as SNI)
    /// instead of the host of the address dialled.
    pub fn server_name(mut self, name: impl Into<String>) -> TlsConfig {
        self.server_name = Some(name.into());
        self
    }

    /// Whether the broker's certificate must be valid for its host name (default
    /// `true`). With `false` the chain is still verified against the trusted
    /// CAs, but any host name is accepted, as Kafka clients do with an empty
    /// `ssl.endpoint.identification.algorithm`; use it only where names cannot
    /// match (brokers reached through addresses their certificates do not list).
    pub fn verify_hostname(mut self, verify: bool) -> TlsConfig {
        self.verify_hostname = verify;
        self.built = Arc::default();
        self
    }

    fn client_config(&self) -> Result<Arc<rustls::ClientConfig>, ConnectionError> {
        self.built
            .get_or_init(|| self.build().map(Arc::new))
            .clone()
            .map_err(ConnectionError::SecurityConfig)
    }

    fn build(&self) -> Result<rustls::ClientConfig, String> {
        let mut roots = RootCertStore::empty();
        match &self.roots {
            Roots::System => {
                let found = rustls_native_certs::load_native_certs();
                let (added, _ignored) = roots.add_parsable_certificates(found.certs);
                if added == 0 {
                    return Err(format!(
                        "no usable CA certificate in the system trust store ({} error(s) loading it)",
                        found.errors.len()
                    ));
                }
            }
            Roots::Pem(cas) => {
                for ca in cas {
                    roots
                        .add(ca.clone())
                        .map_err(|e| format!("CA bundle: {e}"))?;
                }
            }
        }
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let builder = rustls::ClientConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .map_err(|e| format!("TLS: {e}"))?;
        let builder = if self.verify_hostname {
            builder.with_root_certificates(roots)
        } else {
            let webpki = WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider)
                .build()
                .map_err(|e| format!("certificate verifier: {e}"))?;
            builder
                .dangerous()
                .with_custom_certificate_verifier(Arc::new(AnyHostName(webpki)))
        };
        match &self.client_cert {
            None => Ok(builder.with_no_client_auth()),
            Some(cert) => builder
                .with_client_auth_cert(cert.chain.clone(), cert.key.clone_key())
                .map_err(|e| format!("client certificate and key: {e}")),
        }
    }

    /// Runs the TLS handshake over `stream` to `addr` (`host:port`), reading the
    /// socket through a [`TLS_READ_BUFFER`] buffer.
    pub(crate) async fn connect(
        &self,
        addr: &str,
        stream: Socket,
    ) -> Result<TlsStream<TlsTransport>, ConnectionError> {
        let stream = BufReader::with_capacity(TLS_READ_BUFFER, stream);
        let config = self.client_config()?;
        let host = match &self.server_name {
            Some(name) => name.as_str(),
            None => host_of(addr),
        };
        let name = ServerName::try_from(host.to_string()).map_err(|e| {
            ConnectionError::SecurityConfig(format!("TLS server name {host:?}: {e}"))
        })?;
        TlsConnector::from(config)
            .connect(name, stream)
            .await
            .map_err(|e| {
                tls_error(addr, &e).unwrap_or_else(|| ConnectionError::Connect {
                    addr: addr.to_string(),
                    source: Arc::new(e),
                })
            })
    }
}

/// rustls' WebPKI verification with the host name check alone waived: the chain,
/// validity dates and signatures are verified exactly as by default (rustls checks
/// the name last, after the chain).
#[derive(Debug)]
struct AnyHostName(Arc<WebPkiServerVerifier>);

impl ServerCertVerifier for AnyHostName {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        match self
            .0
            .verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now)
        {
            Err(rustls::Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) => Ok(ServerCertVerified::assertion()),
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.supported_verify_schemes()
    }
}

/// The host of `host:port` (brackets of an IPv6 literal removed).
fn host_of(addr: &str) -> &str {
    let host = addr.rsplit_once(':').map_or(addr, |(host, _)| host);
    host.strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host)
}

/// [`ConnectionError::Tls`] if `e` carries a TLS error (a certificate problem, a
/// fatal alert from the broker), naming it.
pub(crate) fn tls_error(addr: &str, e: &io::Error) -> Option<ConnectionError> {
    let tls = e.get_ref()?.downcast_ref::<rustls::Error>()?;
    Some(ConnectionError::Tls {
        addr: addr.to_string(),
        message: tls.to_string(),
    })
}

fn read(path: &Path) -> Result<Vec<u8>, ConnectionError> {
    std::fs::read(path)
        .map_err(|e| ConnectionError::SecurityConfig(format!("reading {}: {e}", path.display())))
}

/// Every certificate of `pem`; none is an error.
fn certificates(pem: &[u8], what: &str) -> Result<Vec<CertificateDer<'static>>, ConnectionError> {
    let certs = CertificateDer::pem_slice_iter(pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| ConnectionError::SecurityConfig(format!("{what}: {e}")))?;
    if certs.is_empty() {
        return Err(ConnectionError::SecurityConfig(format!(
            "{what}: no PEM certificate found"
        )));
    }
    Ok(certs)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts_of_addresses() {
        assert_eq!(host_of("broker-1.example.com:9093"), "broker-1.example.com");
        assert_eq!(host_of("127.0.0.1:9093"), "127.0.0.1");
        assert_eq!(host_of("[::1]:9093"), "::1");
    }

    #[test]
    fn bad_pem_is_a_config_error() {
        assert!(matches!(
            TlsConfig::with_ca_pem(b"nothing here"),
            Err(ConnectionError::SecurityConfig(_))
        ));
    }
}
