//! Security material for tests that cross process boundaries (third-party
//! clients, Apache Kafka, the benchmarks): a test PKI written as PEM files, the
//! SASL users every such test shares, and the environment that tells the interop
//! client scripts and the Java harness how to connect.
//!
//! - [`Pki`]: a CA and a broker certificate for `localhost` and `127.0.0.1`
//!   (the names clients connect to, so host name verification stays on),
//!   generated in-process with rcgen into a temporary directory;
//! - [`Login`]: a SASL mechanism with a user name and password, the users
//!   [`sasl_settings`] configures on a baton-broker listener;
//! - [`ClientSecurity`]: what a client script needs to connect (security
//!   protocol, login, CA file), as environment variables
//!   ([`ClientSecurity::env`]) read by `tests/interop/*.py` and
//!   `tests/interop/java/BatonJava.java`.

use std::fmt;
use std::path::{Path, PathBuf};

use baton_broker::{ListenerSecurity, SaslSettings, SecurityProtocol, TlsSettings};
use baton_kafka::SaslCredentials;
use baton_kafka::SaslMechanism as Mechanism;
use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair,
};

/// PEM files of a test PKI in a temporary directory (removed on drop).
#[derive(Debug)]
pub struct Pki {
    dir: tempfile::TempDir,
    /// The CA certificate that signed the broker certificate.
    pub ca: PathBuf,
    /// The broker's certificate (SANs `localhost` and `127.0.0.1`).
    pub broker_cert: PathBuf,
    /// The broker's PKCS#8 private key.
    pub broker_key: PathBuf,
    /// The broker's private key followed by its certificate in one file: the
    /// `ssl.keystore.type=PEM` keystore Apache Kafka reads from
    /// `ssl.keystore.location` (KIP-651).
    pub broker_keystore: PathBuf,
}

impl Pki {
    /// Generates a CA and a broker certificate signed by it.
    pub fn generate() -> Pki {
        let dir = tempfile::tempdir().expect("temporary directory for the test PKI");
        let write = |name: &str, text: &str| {
            let path = dir.path().join(name);
            std::fs::write(&path, text).expect("write a PEM file");
            path
        };
        let mut params = CertificateParams::new(Vec::<String>::new()).expect("CA parameters");
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params
            .distinguished_name
            .push(DnType::CommonName, "baton interop CA");
        let issuer = CertifiedIssuer::self_signed(params, KeyPair::generate().expect("CA key"))
            .expect("self-signed CA");

        let key = KeyPair::generate().expect("broker key");
        let mut params = CertificateParams::new(vec!["localhost".into(), "127.0.0.1".into()])
            .expect("broker certificate parameters");
        params.distinguished_name.push(DnType::CommonName, "broker");
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        let cert = params.signed_by(&key, &issuer).expect("broker certificate");
        let key_pem = key.serialize_pem();
        Pki {
            ca: write("ca.pem", &issuer.pem()),
            broker_cert: write("broker.pem", &cert.pem()),
            broker_key: write("broker.key", &key_pem),
            broker_keystore: write("broker-keystore.pem", &format!("{key_pem}{}", cert.pem())),
            dir,
        }
    }

    /// The directory holding the files (for other files of the same test).
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// The broker side: its certificate and key, for a baton-broker listener.
    pub fn tls_settings(&self) -> TlsSettings {
        TlsSettings::from_pem_files(&self.broker_cert, &self.broker_key)
            .expect("the generated broker certificate loads")
    }

    /// A `SASL_SSL` listener with this PKI's broker certificate and the users
    /// of [`sasl_settings`].
    pub fn sasl_ssl_listener(&self) -> ListenerSecurity {
        ListenerSecurity::new(SecurityProtocol::SaslSsl)
            .with_tls(self.tls_settings())
            .with_sasl(sasl_settings())
    }
}

/// A SASL login: mechanism, user name and password. Debug output hides the
/// password.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Login {
    /// The SASL mechanism.
    pub mechanism: Mechanism,
    /// The user name.
    pub username: &'static str,
    /// The password.
    pub password: &'static str,
}

impl fmt::Debug for Login {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Login")
            .field("mechanism", &self.mechanism.name())
            .field("username", &self.username)
            .finish_non_exhaustive()
    }
}

/// The PLAIN user of the security tests.
pub const PLAIN_LOGIN: Login = Login {
    mechanism: Mechanism::Plain,
    username: "alice",
    password: "alice-secret",
};

/// The SCRAM-SHA-256 user of the security tests.
pub const SCRAM_SHA256_LOGIN: Login = Login {
    mechanism: Mechanism::ScramSha256,
    username: "bob",
    password: "bob-secret",
};

/// The SCRAM-SHA-512 user of the security tests.
pub const SCRAM_SHA512_LOGIN: Login = Login {
    mechanism: Mechanism::ScramSha512,
    username: "carol",
    password: "carol-secret",
};

impl Login {
    /// The same user and mechanism with another password (for refused logins).
    pub fn with_password(self, password: &'static str) -> Login {
        Login { password, ..self }
    }

    /// Baton's credentials for this login.
    pub fn credentials(&self) -> SaslCredentials {
        SaslCredentials::new(self.mechanism, self.username, self.password)
    }
}

/// PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512 enabled, with the users of
/// [`PLAIN_LOGIN`], [`SCRAM_SHA256_LOGIN`] and [`SCRAM_SHA512_LOGIN`].
pub fn sasl_settings() -> SaslSettings {
    SaslSettings::new([
        Mechanism::Plain,
        Mechanism::ScramSha256,
        Mechanism::ScramSha512,
    ])
    .with_plain_user(PLAIN_LOGIN.username, PLAIN_LOGIN.password)
    .with_scram_user(
        SCRAM_SHA256_LOGIN.mechanism,
        SCRAM_SHA256_LOGIN.username,
        SCRAM_SHA256_LOGIN.password,
    )
    .expect("SCRAM-SHA-256 user")
    .with_scram_user(
        SCRAM_SHA512_LOGIN.mechanism,
        SCRAM_SHA512_LOGIN.username,
        SCRAM_SHA512_LOGIN.password,
    )
    .expect("SCRAM-SHA-512 user")
}

/// How a client script connects over `SASL_SSL`: the login and the CA that
/// verifies the broker (host name verification on).
#[derive(Debug, Clone)]
pub struct ClientSecurity {
    /// The SASL login.
    pub login: Login,
    /// The CA certificate (PEM file).
    pub ca: PathBuf,
}

impl ClientSecurity {
    /// `SASL_SSL` with `login`, trusting `pki`'s CA.
    pub fn sasl_ssl(pki: &Pki, login: Login) -> ClientSecurity {
        ClientSecurity {
            login,
            ca: pki.ca.clone(),
        }
    }

    /// The environment variables the interop scripts and the Java harness read:
    /// `INTEROP_SECURITY_PROTOCOL`, `INTEROP_SASL_MECHANISM`,
    /// `INTEROP_SASL_USERNAME`, `INTEROP_SASL_PASSWORD` and `INTEROP_SSL_CA`.
    /// Without them the clients connect in plaintext.
    pub fn env(&self) -> Vec<(&'static str, String)> {
        vec![
            ("INTEROP_SECURITY_PROTOCOL", "SASL_SSL".to_string()),
            (
                "INTEROP_SASL_MECHANISM",
                self.login.mechanism.name().to_string(),
            ),
            ("INTEROP_SASL_USERNAME", self.login.username.to_string()),
            ("INTEROP_SASL_PASSWORD", self.login.password.to_string()),
            ("INTEROP_SSL_CA", self.ca.display().to_string()),
        ]
    }

    /// Baton's client settings for the same connection.
    pub fn apply(&self, builder: baton_kafka::ClientBuilder) -> baton_kafka::ClientBuilder {
        builder
            .security_protocol(SecurityProtocol::SaslSsl)
            .tls(baton_kafka::TlsConfig::with_ca_pem_file(&self.ca).expect("the CA file loads"))
            .sasl(self.login.credentials())
    }
}
