//! SASL authentication of one connection (KIP-152): after ApiVersions, a
//! SaslHandshake v1 naming the mechanism, then SaslAuthenticate rounds carrying
//! the mechanism's bytes (`baton_protocol::sasl` computes them), until the
//! exchange completes; for SCRAM that includes checking the broker's signature.
//!
//! OAUTHBEARER takes its token from an application-supplied
//! [`OAuthTokenProvider`], asked again at every (re-)authentication. The broker's
//! answer may carry a session lifetime (KIP-368); the connection then
//! re-authenticates before it runs out (`connection.rs`), at a jittered 85–95 %
//! of it, as Kafka's clients do.

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use baton_protocol::messages::{SaslAuthenticateRequest, SaslHandshakeRequest};
use baton_protocol::sasl::oauthbearer::unsecured_jws;
use baton_protocol::sasl::{ClientSession, Mechanism, Secret};
use baton_protocol::ErrorCode;
use bytes::Bytes;

use crate::connection::{Connection, ConnectionError};

/// Most SaslAuthenticate rounds one exchange may take (SCRAM takes two); a broker
/// asking for more is refused.
const MAX_ROUNDS: usize = 8;

/// The error a token provider returns.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// An OAUTHBEARER token from an [`OAuthTokenProvider`]. `Debug` never shows the
/// token itself.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct OAuthToken {
    /// The bearer token (a JWT, or whatever the broker's validator accepts).
    pub value: Secret,
    /// When the token expires, if the provider knows; for the application's
    /// information (the broker's session lifetime drives re-authentication).
    pub expires_at: Option<SystemTime>,
    /// The principal the token names, if the provider knows.
    pub principal: Option<String>,
    /// SASL extensions sent with the token (KIP-342): names `[A-Za-z]+`,
    /// values printable ASCII.
    pub extensions: Vec<(String, String)>,
}

impl OAuthToken {
    /// A token with nothing else known about it.
    pub fn new(value: impl Into<Secret>) -> OAuthToken {
        OAuthToken {
            value: value.into(),
            expires_at: None,
            principal: None,
            extensions: Vec::new(),
        }
    }

    /// An unsecured JWS (`"alg":"none"`) for `principal`, valid for `lifetime`
    /// from now on the system clock: what Apache Kafka's default OAUTHBEARER
    /// validator (and baton-broker's) accepts, for development and tests; it
    /// proves nothing.
    pub fn unsecured(principal: &str, lifetime: Duration) -> OAuthToken {
        OAuthToken::unsecured_at(principal, SystemTime::now(), lifetime)
    }

    /// [`unsecured`](Self::unsecured), issued at `issued_at` instead of now: a
    /// provider on a clock of its own (a simulated host's
    /// [`Env`](baton_env::Env) clock) stamps its tokens with that clock.
    pub fn unsecured_at(principal: &str, issued_at: SystemTime, lifetime: Duration) -> OAuthToken {
        let ms = |t: SystemTime| {
            t.duration_since(UNIX_EPOCH)
                .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
        };
        // A lifetime past what the clock can hold means "never expires".
        let expires_at = issued_at
            .checked_add(lifetime)
            .or_else(|| UNIX_EPOCH.checked_add(Duration::from_millis(i64::MAX as u64)))
            .unwrap_or(issued_at);
        OAuthToken {
            value: Secret::new(unsecured_jws(principal, ms(issued_at), ms(expires_at), &[])),
            expires_at: Some(expires_at),
            principal: Some(principal.to_owned()),
            extensions: Vec::new(),
        }
    }

    /// Adds a SASL extension.
    pub fn with_extension(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.extensions.push((name.into(), value.into()));
        self
    }
}

/// Supplies OAUTHBEARER tokens: called before every authentication and
/// re-authentication of every connection, so it should cache its token and
/// refresh it before it expires.
#[async_trait::async_trait]
pub trait OAuthTokenProvider: Send + Sync {
    /// A current token. An error fails the (re-)authentication with a
    /// non-retriable [`ConnectionError::Authentication`] naming OAUTHBEARER.
    ///
    /// # Cancel safety
    ///
    /// The future may be dropped (a connect timeout, a closed connection); an
    /// implementation must leave its cache consistent if it is.
    async fn token(&self) -> Result<OAuthToken, BoxError>;
}

/// How a connection logs in.
#[derive(Clone)]
enum Login {
    Password { username: String, password: Secret },
    OAuth(Arc<dyn OAuthTokenProvider>),
}

/// A SASL mechanism with what it logs in with: a user name and password, or an
/// OAUTHBEARER token provider. `Debug` shows the mechanism and user, never the
/// password or token.
#[derive(Clone)]
pub struct SaslCredentials {
    mechanism: Mechanism,
    login: Login,
}

impl std::fmt::Debug for SaslCredentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut d = f.debug_struct("SaslCredentials");
        d.field("mechanism", &self.mechanism);
        match &self.login {
            Login::Password { username, password } => {
                d.field("username", username).field("password", password)
            }
            Login::OAuth(_) => d.field("token_provider", &"<application provider>"),
        };
        d.finish()
    }
}

impl SaslCredentials {
    /// PLAIN (RFC 4616): the password travels as it is, so use it over TLS
    /// (`SASL_SSL`) only.
    pub fn plain(username: impl Into<String>, password: impl Into<Secret>) -> SaslCredentials {
        SaslCredentials::new(Mechanism::Plain, username, password)
    }

    /// SCRAM-SHA-256 (RFC 7677).
    pub fn scram_sha256(
        username: impl Into<String>,
        password: impl Into<Secret>,
    ) -> SaslCredentials {
        SaslCredentials::new(Mechanism::ScramSha256, username, password)
    }

    /// SCRAM-SHA-512.
    pub fn scram_sha512(
        username: impl Into<String>,
        password: impl Into<Secret>,
    ) -> SaslCredentials {
        SaslCredentials::new(Mechanism::ScramSha512, username, password)
    }

    /// OAUTHBEARER (RFC 7628, KIP-255) with tokens from `provider`, asked at
    /// every authentication and re-authentication.
    pub fn oauthbearer(provider: impl OAuthTokenProvider + 'static) -> SaslCredentials {
        SaslCredentials {
            mechanism: Mechanism::OAuthBearer,
            login: Login::OAuth(Arc::new(provider)),
        }
    }

    /// Credentials for `mechanism`. With OAUTHBEARER, `password` is a fixed
    /// bearer token and `username` is not sent.
    pub fn new(
        mechanism: Mechanism,
        username: impl Into<String>,
        password: impl Into<Secret>,
    ) -> SaslCredentials {
        SaslCredentials {
            mechanism,
            login: Login::Password {
                username: username.into(),
                password: password.into(),
            },
        }
    }

    /// The mechanism.
    pub fn mechanism(&self) -> Mechanism {
        self.mechanism
    }

    /// The user name; empty for an OAUTHBEARER token provider.
    pub fn username(&self) -> &str {
        match &self.login {
            Login::Password { username, .. } => username,
            Login::OAuth(_) => "",
        }
    }

    /// A new client exchange: for a token provider, after asking it for a token.
    async fn session(&self) -> Result<ClientSession, String> {
        match &self.login {
            Login::Password { username, password } => {
                ClientSession::new(self.mechanism, username, password.clone())
                    .map_err(|e| e.to_string())
            }
            Login::OAuth(provider) => {
                let token = provider
                    .token()
                    .await
                    .map_err(|e| format!("the token provider failed: {e}"))?;
                ClientSession::oauthbearer(&token.value, &token.extensions)
                    .map_err(|e| e.to_string())
            }
        }
    }
}

/// Authenticates `conn` with `credentials` and returns the session lifetime the
/// broker gave (KIP-368; `None` when it gave none). Any refusal or protocol
/// violation is [`ConnectionError::Authentication`], which is not retriable.
/// Its requests bypass the connection's re-authentication gate.
pub(crate) async fn authenticate(
    conn: &Connection,
    credentials: &SaslCredentials,
) -> Result<Option<Duration>, ConnectionError> {
    let session = prepare(conn, credentials).await?;
    exchange(conn, session).await
}

/// The client's side of a new exchange (for a token provider, after asking it
/// for a token), before anything is sent.
pub(crate) async fn prepare(
    conn: &Connection,
    credentials: &SaslCredentials,
) -> Result<ClientSession, ConnectionError> {
    credentials
        .session()
        .await
        .map_err(|message| ConnectionError::Authentication {
            addr: conn.addr().to_string(),
            mechanism: credentials.mechanism.name().to_string(),
            message,
        })
}

/// Runs the handshake and the exchange of `session` on `conn`.
pub(crate) async fn exchange(
    conn: &Connection,
    mut session: ClientSession,
) -> Result<Option<Duration>, ConnectionError> {
    let mechanism = session.mechanism();
    let failed = |message: String| ConnectionError::Authentication {
        addr: conn.addr().to_string(),
        mechanism: mechanism.name().to_string(),
        message,
    };
    let handshake = conn
        .send_sasl(&SaslHandshakeRequest {
            mechanism: mechanism.name().to_string(),
        })
        .await?;
    let code = ErrorCode::from_code(handshake.error_code);
    if !code.is_ok() {
        return Err(failed(format!(
            "handshake refused with {code}; the broker enables {:?}",
            handshake.mechanisms
        )));
    }
    let mut outgoing = session.initial_response();
    for _ in 0..MAX_ROUNDS {
        let response = conn
            .send_sasl(&SaslAuthenticateRequest {
                auth_bytes: Bytes::from(outgoing),
            })
            .await?;
        let code = ErrorCode::from_code(response.error_code);
        if !code.is_ok() {
            let message = response.error_message.unwrap_or_else(|| code.to_string());
            return Err(failed(message));
        }
        // SCRAM's PBKDF2 (thousands of HMACs) runs off the async workers.
        let server_bytes = response.auth_bytes;
        let (back, step) = tokio::task::spawn_blocking(move || {
            let step = session.step(&server_bytes);
            (session, step)
        })
        .await
        .map_err(|e| failed(format!("SASL computation failed: {e}")))?;
        session = back;
        match step.map_err(|e| failed(e.to_string()))? {
            Some(next) => outgoing = next,
            None => {
                let lifetime = u64::try_from(response.session_lifetime_ms)
                    .ok()
                    .filter(|ms| *ms > 0)
                    .map(Duration::from_millis);
                return Ok(lifetime);
            }
        }
    }
    Err(failed(format!(
        "the exchange did not complete in {MAX_ROUNDS} rounds"
    )))
}

/// When to re-authenticate a session of `lifetime`: at 85 % of it plus up to
/// 10 % more, `jitter` (in `[0, 1)`) choosing where, as Kafka's clients do so that
/// connections opened together do not re-authenticate together.
pub(crate) fn reauth_delay(lifetime: Duration, jitter: f64) -> Duration {
    lifetime.mul_f64(0.85 + 0.10 * jitter.clamp(0.0, 1.0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_hides_the_password_and_the_token() {
        let text = format!("{:?}", SaslCredentials::scram_sha512("app", "hunter2"));
        assert!(
            text.contains("app") && text.contains("ScramSha512"),
            "{text}"
        );
        assert!(!text.contains("hunter2"), "{text}");
        let token = OAuthToken::unsecured("app", Duration::from_secs(60));
        let jws = token.value.expose().to_owned();
        let text = format!("{token:?}");
        assert!(!text.contains(&jws) && text.contains("app"), "{text}");

        struct Fixed(OAuthToken);
        #[async_trait::async_trait]
        impl OAuthTokenProvider for Fixed {
            async fn token(&self) -> Result<OAuthToken, BoxError> {
                Ok(self.0.clone())
            }
        }
        let text = format!("{:?}", SaslCredentials::oauthbearer(Fixed(token)));
        assert!(
            text.contains("OAuthBearer") && !text.contains(&jws),
            "{text}"
        );
    }

    #[test]
    fn reauthentication_falls_in_85_to_95_percent_of_the_lifetime() {
        let life = Duration::from_secs(100);
        assert_eq!(reauth_delay(life, 0.0), Duration::from_secs(85));
        assert_eq!(reauth_delay(life, 0.5), Duration::from_secs(90));
        assert!(reauth_delay(life, 0.999_999) <= Duration::from_secs(95));
        assert_eq!(reauth_delay(life, 7.0), Duration::from_secs(95));
    }
}
