//! The connection layer: one connection to one broker, over TCP by default or
//! over any byte stream ([`Connection::from_stream`]).
//!
//! A [`Connection`] pipelines requests: each gets a correlation id and a slot in a
//! map of pending requests, its frame goes to a writer task, and a reader task
//! matches each response frame to its slot by correlation id. Many requests can be
//! in flight at once; responses may come back in any order.
//!
//! At connect the connection asks the broker for its supported API versions
//! (ApiVersions v3, falling back to v0 when the broker answers UNSUPPORTED_VERSION)
//! and from then on [`Connection::send`] picks, for each API, the highest version
//! both sides support. Under `SSL` and `SASL_SSL` the TCP stream is wrapped in
//! TLS first (`tls.rs`); under `SASL_PLAINTEXT` and `SASL_SSL` the connection
//! authenticates right after ApiVersions (`sasl.rs`) before it is handed out.
//!
//! **Re-authentication (KIP-368).** When the broker gives the SASL session a
//! lifetime, a task re-authenticates the connection at a jittered 85–95 % of it.
//! It first closes the connection's *gate*: requests being queued finish
//! queueing, new ones wait; requests already written stay in flight and their
//! responses are matched by correlation id as usual. The SaslHandshake and
//! SaslAuthenticate exchange then runs on the same socket, and the gate opens
//! again, so nothing is dropped, failed or reordered. A failed re-authentication
//! breaks the connection ([`BrokenCause::Reauthentication`]), as the broker
//! closes it too.
//!
//! **Failure is sticky.** When the socket fails (I/O error, the peer closes it, a frame
//! over the configured maximum), every request in flight fails with the same
//! [`BrokenCause`] (shared in an [`Arc`]) and the connection is *poisoned*: later
//! calls fail at once with that cause. Nothing reconnects here; the broker pool one
//! layer up replaces poisoned connections.
//!
//! **Tracing.** Every request runs in a `kafka.request` span (level DEBUG) with
//! the API's name and version, the broker's address and node id, and the
//! correlation id; the outcome (the response's error code, or the connection
//! error) is recorded on it at the end, and a failed request is logged at DEBUG.
//! With no subscriber listening, the span costs a level check.
//!
//! **Cancellation never desyncs the stream.** A request's frame is handed whole to the
//! writer task, so dropping a [`Connection::send`] future cannot leave half a frame on
//! the socket; the pending slot is removed by a drop guard, and a response that
//! arrives later for a dropped request is read and discarded.

use std::collections::{HashMap, VecDeque};
use std::fmt;
use std::io::{self, IoSlice};
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use baton_env::Socket;
use baton_protocol::envelope;
use baton_protocol::frame::DEFAULT_MAX_FRAME;
use baton_protocol::messages::{ApiVersionsRequest, ApiVersionsResponse, Message, Request};
use baton_protocol::primitives::DEFAULT_MIN_SEGMENT;
use baton_protocol::security::SecurityProtocol;
use baton_protocol::{DecodeError, EncodeError, ErrorCode, FrameCodec, ResponseHeader};
use bytes::{Buf, Bytes, BytesMut};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::{mpsc, oneshot, RwLock};
use tokio::task::AbortHandle;
use tracing::{Instrument, Span};

use crate::request_span;
use crate::sasl::{self, SaslCredentials};
#[cfg(feature = "tls")]
use crate::tls::{self, TlsConfig};

/// Initial read buffer size, and the least room made for each read.
const READ_CHUNK: usize = 64 * 1024;

/// How many encoded frames may wait for the writer task before senders wait.
const WRITE_QUEUE: usize = 256;

/// Most segments handed to one vectored write (well under any platform's
/// `IOV_MAX`); the writer gathers queued frames up to this many segments.
const MAX_WRITE_SEGMENTS: usize = 64;

/// Settings of one connection.
#[derive(Debug, Clone)]
pub struct ConnectionConfig {
    /// Sent in every request header so brokers can attribute requests in their logs
    /// and quotas. `None` sends a null client id.
    pub client_id: Option<String>,
    /// Frames larger than this are refused in both directions: a response announcing
    /// a larger size breaks the connection before anything is buffered, and a request
    /// that would encode larger fails without being sent. Default 100 MiB.
    pub max_frame_size: usize,
    /// How long [`Connection::send`] waits for a response before giving up on it.
    /// Default 30 s.
    pub request_timeout: Duration,
    /// How long [`Connection::connect`] may take, TCP handshake and version
    /// negotiation together. Default 10 s.
    pub connect_timeout: Duration,
    /// Reported to the broker in ApiVersions v3+ (KIP-511).
    pub client_software_name: String,
    /// Reported to the broker in ApiVersions v3+ (KIP-511).
    pub client_software_version: String,
    /// How the connection is secured (Kafka's `security.protocol`). Default
    /// `PLAINTEXT`.
    pub security_protocol: SecurityProtocol,
    /// The SASL mechanism and credentials; required by `SASL_PLAINTEXT` and
    /// `SASL_SSL`, ignored otherwise. `Debug` never shows the password.
    pub sasl: Option<SaslCredentials>,
    /// TLS settings for `SSL` and `SASL_SSL`; `None` there means the operating
    /// system's roots and the broker's host name verified. Needs the `tls`
    /// feature.
    #[cfg(feature = "tls")]
    pub tls: Option<TlsConfig>,
    /// The environment connections are opened through ([`baton_env::Env`]): the
    /// process-wide one by default, tokio's TCP unless a simulation installed its
    /// own.
    pub env: baton_env::Env,
}

impl Default for ConnectionConfig {
    fn default() -> Self {
        ConnectionConfig {
            client_id: Some("baton".to_string()),
            max_frame_size: DEFAULT_MAX_FRAME,
            request_timeout: Duration::from_secs(30),
            connect_timeout: Duration::from_secs(10),
            client_software_name: "baton".to_string(),
            client_software_version: env!("CARGO_PKG_VERSION").to_string(),
            security_protocol: SecurityProtocol::Plaintext,
            sasl: None,
            #[cfg(feature = "tls")]
            tls: None,
            env: baton_env::Env::default(),
        }
    }
}

/// Why a connection stopped working: the root cause shared by every request that was
/// in flight when it broke and by every later call on the poisoned connection.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BrokenCause {
    /// Reading from or writing to the socket failed.
    #[error("i/o error: {0}")]
    Io(#[from] io::Error),
    /// The broker closed the connection.
    #[error("the broker closed the connection")]
    Closed,
    /// The broker sent a frame that could not be split off the stream (for example
    /// one larger than the configured maximum); the stream cannot be resynchronised.
    #[error("bad frame from the broker: {0}")]
    Frame(DecodeError),
    /// The broker sent a response frame too short to hold a correlation id.
    #[error("response frame without a correlation id: {0}")]
    BadHeader(DecodeError),
    /// Re-authenticating the SASL session (KIP-368) failed; the broker closes
    /// such a connection.
    #[error("SASL {mechanism} re-authentication failed: {message}")]
    Reauthentication {
        /// The mechanism (`OAUTHBEARER`...).
        mechanism: String,
        /// The broker's message, or what went wrong on this side (a token
        /// provider's error).
        message: String,
    },
}

/// Errors of the connection layer.
///
/// Cheap to clone: causes that are not `Clone` themselves are shared in an [`Arc`].
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum ConnectionError {
    /// The TCP connection could not be opened.
    #[error("could not connect to {addr}: {source}")]
    Connect {
        /// The address dialled.
        addr: String,
        /// The I/O error.
        #[source]
        source: Arc<io::Error>,
    },
    /// Opening the connection and negotiating versions took longer than the
    /// connect timeout.
    #[error("connecting to {addr} timed out after {timeout:?}")]
    ConnectTimeout {
        /// The address dialled.
        addr: String,
        /// The configured connect timeout.
        timeout: Duration,
    },
    /// The connection broke; `cause` is the root cause, the same for every request
    /// that was in flight and for every later call.
    #[error("connection to {addr} is broken: {cause}")]
    Broken {
        /// The broker's address.
        addr: String,
        /// What broke it.
        #[source]
        cause: Arc<BrokenCause>,
    },
    /// No response arrived within the request timeout. The connection stays usable;
    /// the response, if it comes later, is discarded.
    #[error("request with api key {api_key} to {addr} timed out after {timeout:?}")]
    Timeout {
        /// The broker's address.
        addr: String,
        /// The API key of the request.
        api_key: i16,
        /// The timeout that elapsed.
        timeout: Duration,
    },
    /// The broker does not offer this API at all.
    #[error("broker {addr} does not support api key {api_key}")]
    UnsupportedApi {
        /// The broker's address.
        addr: String,
        /// The API key.
        api_key: i16,
    },
    /// The broker offers this API, but no version this client implements.
    #[error(
        "no common version of api key {api_key} with {addr}: broker {broker_min}..={broker_max}, \
         client {client_min}..={client_max}"
    )]
    NoCommonVersion {
        /// The broker's address.
        addr: String,
        /// The API key.
        api_key: i16,
        /// Lowest version the broker supports.
        broker_min: i16,
        /// Highest version the broker supports.
        broker_max: i16,
        /// Lowest version this client implements.
        client_min: i16,
        /// Highest version this client implements.
        client_max: i16,
    },
    /// The broker answered ApiVersions with an error.
    #[error("api version negotiation with {addr} failed: {code}")]
    Negotiation {
        /// The broker's address.
        addr: String,
        /// The error code the broker sent.
        code: ErrorCode,
    },
    /// SASL authentication failed: the broker refused the mechanism or the
    /// credentials, or the exchange broke its rules (for SCRAM, a server signature
    /// that does not match). Not retriable: the same credentials fail again.
    #[error("SASL {mechanism} authentication with {addr} failed: {message}")]
    Authentication {
        /// The broker's address.
        addr: String,
        /// The mechanism (`SCRAM-SHA-512`...).
        mechanism: String,
        /// The broker's error message, or what went wrong on this side.
        message: String,
    },
    /// The TLS handshake failed; `message` names the problem (for example an
    /// unknown issuer, a certificate not valid for the host name, an expired
    /// certificate, or the broker refusing the client's certificate). Not
    /// retriable.
    #[error("TLS with {addr} failed: {message}")]
    Tls {
        /// The broker's address.
        addr: String,
        /// What went wrong, from rustls.
        message: String,
    },
    /// The connection's security settings cannot work (for example a SASL
    /// protocol without credentials). Not retriable.
    #[error("invalid security settings: {0}")]
    SecurityConfig(String),
    /// The request could not be encoded.
    #[error("could not encode request: {0}")]
    Encode(#[from] EncodeError),
    /// The request would be larger than the maximum frame size; it was not sent.
    #[error("request of {size} bytes exceeds the maximum frame size of {max}")]
    RequestTooLarge {
        /// Encoded size of the request.
        size: usize,
        /// Configured maximum.
        max: usize,
    },
    /// A response arrived but could not be decoded. Only this request fails; the
    /// connection stays usable because the framing is intact.
    #[error("could not decode response to api key {api_key} v{version} from {addr}: {source}")]
    Decode {
        /// The broker's address.
        addr: String,
        /// The API key of the request.
        api_key: i16,
        /// The version used.
        version: i16,
        /// What went wrong.
        #[source]
        source: DecodeError,
    },
}

impl ConnectionError {
    /// Whether retrying the request (on a fresh connection, possibly to another
    /// broker after a metadata refresh) might succeed.
    pub fn is_retriable(&self) -> bool {
        matches!(
            self,
            ConnectionError::Connect { .. }
                | ConnectionError::ConnectTimeout { .. }
                | ConnectionError::Broken { .. }
                | ConnectionError::Timeout { .. }
        )
    }
}

/// A version range one side supports for one API.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct VersionRange {
    /// Lowest supported version, inclusive.
    pub min: i16,
    /// Highest supported version, inclusive.
    pub max: i16,
}

/// A response frame (header included) or the reason none will come.
type Slot = oneshot::Sender<Result<Bytes, Arc<BrokenCause>>>;

/// State shared by the handle, the reader task and the writer task.
struct Shared {
    addr: String,
    /// The broker's node id for request spans, once the pool knows it; -1 before.
    node_id: AtomicI32,
    state: Mutex<State>,
    /// Where the connection's closing is counted (set by the pool that opened it).
    close_meter: std::sync::OnceLock<Arc<crate::metrics::ConnectionMeter>>,
    /// Whether the closing was counted (once: broken, or dropped).
    close_counted: std::sync::atomic::AtomicBool,
}

struct State {
    next_correlation_id: i32,
    pending: HashMap<i32, Slot>,
    /// Set once, when the connection breaks; never cleared.
    poisoned: Option<Arc<BrokenCause>>,
}

impl Shared {
    /// Breaks the connection: records the cause (only the first one counts) and fails
    /// every pending request with it.
    fn poison(&self, cause: BrokenCause) {
        let drained: Vec<Slot> = {
            let mut st = self.state.lock().expect("connection state poisoned");
            if st.poisoned.is_some() {
                return;
            }
            let cause = Arc::new(cause);
            tracing::debug!(addr = %self.addr, %cause, "connection broken");
            st.poisoned = Some(cause);
            st.pending.drain().map(|(_, slot)| slot).collect()
        };
        let cause = self.poisoned().expect("just set");
        self.count_closed();
        for slot in drained {
            let _ = slot.send(Err(cause.clone()));
        }
    }

    /// Poisons the connection with `cause`, or, if the broker has already closed
    /// it (as it does right after refusing a re-authentication), names `cause` as
    /// the reason for later calls.
    fn poison_explained(&self, cause: BrokenCause) {
        {
            let mut st = self.state.lock().expect("connection state poisoned");
            if let Some(current) = &st.poisoned {
                if matches!(**current, BrokenCause::Closed | BrokenCause::Io(_)) {
                    st.poisoned = Some(Arc::new(cause));
                }
                return;
            }
        }
        self.poison(cause);
    }

    /// Counts the connection as closed, once, if a pool counts it.
    fn count_closed(&self) {
        if let Some(meter) = self.close_meter.get() {
            if !self
                .close_counted
                .swap(true, std::sync::atomic::Ordering::AcqRel)
            {
                meter.closed();
            }
        }
    }

    fn poisoned(&self) -> Option<Arc<BrokenCause>> {
        self.state
            .lock()
            .expect("connection state poisoned")
            .poisoned
            .clone()
    }

    fn broken(&self, cause: Arc<BrokenCause>) -> ConnectionError {
        ConnectionError::Broken {
            addr: self.addr.clone(),
            cause,
        }
    }
}

/// Removes a pending slot when the request is abandoned (future dropped, timeout).
struct PendingGuard<'a> {
    shared: &'a Shared,
    correlation_id: i32,
}

impl Drop for PendingGuard<'_> {
    fn drop(&mut self) {
        if let Ok(mut st) = self.shared.state.lock() {
            st.pending.remove(&self.correlation_id);
        }
    }
}

/// A frame for the writer task, as segments to write in order (large byte fields,
/// such as a Produce request's record batches, are segments of their own rather
/// than copies); `written` is told once it is on the socket.
struct Outgoing {
    frame: Vec<Bytes>,
    written: Option<oneshot::Sender<()>>,
}

/// One pipelined connection to one broker. Cheap to clone; all clones share the
/// socket. The reader and writer tasks stop when the last clone is dropped.
#[derive(Clone)]
pub struct Connection {
    inner: Arc<Inner>,
}

struct Inner {
    shared: Arc<Shared>,
    tx: mpsc::Sender<Outgoing>,
    reader: AbortHandle,
    versions: HashMap<i16, VersionRange>,
    config: ConnectionConfig,
    /// Held shared while a request is queued for writing, exclusively while the
    /// SASL session re-authenticates, so that no request is written during the
    /// exchange. Fair: once a re-authentication waits, later requests queue
    /// behind it, in order.
    gate: RwLock<()>,
    /// The re-authentication task, stopped with the connection.
    reauth: Mutex<Option<AbortHandle>>,
}

impl Drop for Inner {
    fn drop(&mut self) {
        self.shared.count_closed();
        self.reader.abort();
        if let Some(task) = self.reauth.get_mut().ok().and_then(Option::take) {
            task.abort();
        }
    }
}

impl fmt::Debug for Connection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Connection")
            .field("addr", &self.inner.shared.addr)
            .field("poisoned", &self.inner.shared.poisoned())
            .finish_non_exhaustive()
    }
}

impl Connection {
    /// Opens a TCP connection to `addr` (`host:port`) and negotiates API versions.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: dropping the future closes the half-open connection and leaves
    /// nothing behind.
    pub async fn connect(addr: &str, config: &ConnectionConfig) -> Result<Self, ConnectionError> {
        let timeout = config.connect_timeout;
        match tokio::time::timeout(timeout, Self::connect_inner(addr, config)).await {
            Ok(result) => result,
            Err(_) => Err(ConnectionError::ConnectTimeout {
                addr: addr.to_string(),
                timeout,
            }),
        }
    }

    async fn connect_inner(addr: &str, config: &ConnectionConfig) -> Result<Self, ConnectionError> {
        let stream = config
            .env
            .net
            .connect(addr)
            .await
            .map_err(|e| ConnectionError::Connect {
                addr: addr.to_string(),
                source: Arc::new(e),
            })?;
        stream.set_nodelay();
        if !config.security_protocol.uses_tls() {
            // TCP splits into owned halves without a lock between them.
            let (read, write) = stream.into_split();
            return Self::start(read, write, addr, config).await;
        }
        Self::connect_tls(addr, stream, config).await
    }

    /// Without the `tls` feature no TLS protocol can be used.
    #[cfg(not(feature = "tls"))]
    async fn connect_tls(
        _addr: &str,
        _stream: Socket,
        config: &ConnectionConfig,
    ) -> Result<Self, ConnectionError> {
        Err(ConnectionError::SecurityConfig(format!(
            "{} needs TLS, and the SDK was built without its `tls` feature",
            config.security_protocol
        )))
    }

    /// Wraps `stream` in TLS and runs the connection over it.
    #[cfg(feature = "tls")]
    async fn connect_tls(
        addr: &str,
        stream: Socket,
        config: &ConnectionConfig,
    ) -> Result<Self, ConnectionError> {
        let tls = config.tls.clone().unwrap_or_default();
        let stream = tls.connect(addr, stream).await?;
        let (read, write) = tokio::io::split(stream);
        Self::start(read, write, addr, config)
            .await
            .map_err(|e| match &e {
                // TLS 1.3 clients learn of a refused client certificate from the
                // broker's alert on the first read.
                ConnectionError::Broken { cause, .. } => match &**cause {
                    BrokenCause::Io(io) => tls::tls_error(addr, io).unwrap_or(e),
                    _ => e,
                },
                _ => e,
            })
    }

    /// Runs the connection over `stream`, an already open byte stream to a broker
    /// (a TLS stream, an in-memory pipe; [`connect`](Self::connect) opens TCP),
    /// and negotiates API versions. `addr` names the peer in errors and logs.
    /// Unlike `connect`, no connect timeout applies: wrap the call in one if needed.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: dropping the future drops `stream` and leaves nothing behind.
    pub async fn from_stream<S>(
        stream: S,
        addr: &str,
        config: &ConnectionConfig,
    ) -> Result<Self, ConnectionError>
    where
        S: AsyncRead + AsyncWrite + Send + Unpin + 'static,
    {
        let (read, write) = tokio::io::split(stream);
        Self::start(read, write, addr, config).await
    }

    /// Starts the reader and writer tasks on the two halves of a stream and
    /// negotiates API versions.
    async fn start<R, W>(
        read: R,
        write: W,
        addr: &str,
        config: &ConnectionConfig,
    ) -> Result<Self, ConnectionError>
    where
        R: AsyncRead + Send + Unpin + 'static,
        W: AsyncWrite + Send + Unpin + 'static,
    {
        let shared = Arc::new(Shared {
            addr: addr.to_string(),
            node_id: AtomicI32::new(-1),
            state: Mutex::new(State {
                next_correlation_id: 1,
                pending: HashMap::new(),
                poisoned: None,
            }),
            close_meter: std::sync::OnceLock::new(),
            close_counted: std::sync::atomic::AtomicBool::new(false),
        });
        let (tx, rx) = mpsc::channel(WRITE_QUEUE);
        let codec = FrameCodec::new(config.max_frame_size);
        let reader = tokio::spawn(read_loop(read, codec, shared.clone())).abort_handle();
        tokio::spawn(write_loop(write, rx, shared.clone()));
        let mut conn = Connection {
            inner: Arc::new(Inner {
                shared,
                tx,
                reader,
                versions: HashMap::new(),
                config: config.clone(),
                gate: RwLock::new(()),
                reauth: Mutex::new(None),
            }),
        };
        let versions = conn.negotiate().await?;
        Arc::get_mut(&mut conn.inner)
            .expect("connection not shared during negotiation")
            .versions = versions;
        if config.security_protocol.uses_sasl() {
            let Some(credentials) = &config.sasl else {
                return Err(ConnectionError::SecurityConfig(format!(
                    "{} needs SASL credentials",
                    config.security_protocol
                )));
            };
            if let Some(lifetime) = sasl::authenticate(&conn, credentials).await? {
                conn.schedule_reauthentication(credentials.clone(), lifetime);
            }
        }
        Ok(conn)
    }

    /// Starts the task that re-authenticates this connection before each SASL
    /// session lifetime runs out (KIP-368). It holds the connection weakly:
    /// once the last handle is dropped it stops.
    fn schedule_reauthentication(&self, credentials: SaslCredentials, lifetime: Duration) {
        let weak = Arc::downgrade(&self.inner);
        let task = tokio::spawn(reauthenticate_loop(weak, credentials, lifetime));
        *self.inner.reauth.lock().expect("reauth slot poisoned") = Some(task.abort_handle());
    }

    /// Asks for ApiVersions v3; on UNSUPPORTED_VERSION (answered in v0 by old
    /// brokers) asks again in v0.
    async fn negotiate(&self) -> Result<HashMap<i16, VersionRange>, ConnectionError> {
        let req = ApiVersionsRequest {
            client_software_name: self.inner.config.client_software_name.clone(),
            client_software_version: self.inner.config.client_software_version.clone(),
        };
        let timeout = self.inner.config.request_timeout;
        let body = self.round_trip_raw(&req, 3, timeout).await?;
        let resp = match ApiVersionsResponse::decode_body(body.clone(), 3) {
            Ok(r) if r.error_code != ErrorCode::UnsupportedVersion.code() => r,
            first => {
                // A broker without v3 answers in v0 with UNSUPPORTED_VERSION.
                let old = ApiVersionsResponse::decode_body(body, 0);
                match (first, old) {
                    (_, Ok(r)) if r.error_code == ErrorCode::UnsupportedVersion.code() => {
                        let body = self.round_trip_raw(&req, 0, timeout).await?;
                        ApiVersionsResponse::decode_body(body, 0).map_err(|source| {
                            self.decode_error(ApiVersionsRequest::API_KEY, 0, source)
                        })?
                    }
                    (Ok(r), _) => r,
                    (Err(source), _) => {
                        return Err(self.decode_error(ApiVersionsRequest::API_KEY, 3, source))
                    }
                }
            }
        };
        let code = ErrorCode::from_code(resp.error_code);
        if !code.is_ok() {
            return Err(ConnectionError::Negotiation {
                addr: self.addr().to_string(),
                code,
            });
        }
        Ok(resp
            .api_keys
            .iter()
            .map(|k| {
                (
                    k.api_key,
                    VersionRange {
                        min: k.min_version,
                        max: k.max_version,
                    },
                )
            })
            .collect())
    }

    fn decode_error(&self, api_key: i16, version: i16, source: DecodeError) -> ConnectionError {
        ConnectionError::Decode {
            addr: self.addr().to_string(),
            api_key,
            version,
            source,
        }
    }

    /// The address this connection was opened to.
    pub fn addr(&self) -> &str {
        &self.inner.shared.addr
    }

    /// Names the broker's node id in this connection's request spans.
    pub(crate) fn set_node_id(&self, node_id: i32) {
        self.inner.shared.node_id.store(node_id, Ordering::Relaxed);
    }

    /// Counts this connection's closing (when it breaks or its last handle is
    /// dropped) in `meter`.
    pub(crate) fn count_close_in(&self, meter: Arc<crate::metrics::ConnectionMeter>) {
        let _ = self.inner.shared.close_meter.set(meter);
        if self.is_poisoned() {
            self.inner.shared.count_closed();
        }
    }

    /// Whether the connection has broken; a poisoned connection fails every call.
    pub fn is_poisoned(&self) -> bool {
        self.inner.shared.poisoned().is_some()
    }

    /// The versions the broker announced for `api_key`, if it supports it.
    pub fn broker_versions(&self, api_key: i16) -> Option<VersionRange> {
        self.inner.versions.get(&api_key).copied()
    }

    /// The version [`Connection::send`] uses for `R`: the highest both sides support.
    pub fn version_for<R: Request>(&self) -> Result<i16, ConnectionError> {
        let broker =
            self.broker_versions(R::API_KEY)
                .ok_or_else(|| ConnectionError::UnsupportedApi {
                    addr: self.addr().to_string(),
                    api_key: R::API_KEY,
                })?;
        let version = R::MAX_VERSION.min(broker.max);
        if version < R::MIN_VERSION.max(broker.min) {
            return Err(ConnectionError::NoCommonVersion {
                addr: self.addr().to_string(),
                api_key: R::API_KEY,
                broker_min: broker.min,
                broker_max: broker.max,
                client_min: R::MIN_VERSION,
                client_max: R::MAX_VERSION,
            });
        }
        Ok(version)
    }

    /// Sends `req` in the negotiated version and waits for its response, up to the
    /// configured request timeout.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe with respect to the connection: if the future is dropped, the
    /// request may or may not have reached the broker (and may take effect there),
    /// but the connection stays in sync and its response is discarded on arrival.
    pub async fn send<R: Request + Sync + 'static>(
        &self,
        req: &R,
    ) -> Result<R::Response, ConnectionError> {
        self.send_with_timeout(req, self.inner.config.request_timeout)
            .await
    }

    /// Like [`Connection::send`], with an explicit timeout (for example a Fetch
    /// whose `max_wait_ms` is longer than the default timeout).
    ///
    /// # Cancel safety
    ///
    /// As for [`Connection::send`].
    pub async fn send_with_timeout<R: Request + Sync + 'static>(
        &self,
        req: &R,
        timeout: Duration,
    ) -> Result<R::Response, ConnectionError> {
        let version = self.version_for::<R>()?;
        self.call(req, version, timeout, true).await
    }

    /// Like [`Connection::send`], in the negotiated version but at most `max`: for
    /// requests whose newer versions change the protocol the client speaks (for
    /// example AddPartitionsToTxn v4+, which only brokers send, or the
    /// transactions-v2 versions of EndTxn and TxnOffsetCommit).
    ///
    /// # Cancel safety
    ///
    /// As for [`Connection::send`].
    pub(crate) async fn send_at_most<R: Request + Sync + 'static>(
        &self,
        req: &R,
        max: i16,
        timeout: Duration,
    ) -> Result<R::Response, ConnectionError> {
        let version = self.version_for::<R>()?.min(max);
        let broker_min = self.broker_versions(R::API_KEY).map_or(0, |v| v.min);
        if version < R::MIN_VERSION.max(broker_min) {
            return Err(ConnectionError::NoCommonVersion {
                addr: self.addr().to_string(),
                api_key: R::API_KEY,
                broker_min,
                broker_max: self.broker_versions(R::API_KEY).map_or(-1, |v| v.max),
                client_min: R::MIN_VERSION,
                client_max: max,
            });
        }
        self.call(req, version, timeout, true).await
    }

    /// Sends a SASL request in the negotiated version, past the re-authentication
    /// gate (the exchange that holds it closed, or the first login).
    pub(crate) async fn send_sasl<R: Request + Sync + 'static>(
        &self,
        req: &R,
    ) -> Result<R::Response, ConnectionError> {
        let version = self.version_for::<R>()?;
        let timeout = self.inner.config.request_timeout;
        self.call(req, version, timeout, false).await
    }

    /// Sends `req` without waiting for a response, for requests the broker does not
    /// answer (a Produce with `acks = 0`). Returns once the frame is written to the
    /// socket.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe with respect to the connection: once queued, the frame is written
    /// whole whether or not the future is still polled.
    pub async fn send_no_response<R: Request + Sync + 'static>(
        &self,
        req: &R,
    ) -> Result<(), ConnectionError> {
        let version = self.version_for::<R>()?;
        let span = self.request_span::<R>(version);
        let result = async {
            let (frame, correlation_id) = self.encode(req, version)?;
            span.record("correlation_id", correlation_id);
            let (written_tx, written_rx) = oneshot::channel();
            let open = self.inner.gate.read().await;
            self.enqueue(Outgoing {
                frame,
                written: Some(written_tx),
            })
            .await?;
            drop(open);
            match written_rx.await {
                Ok(()) => Ok(()),
                Err(_) => Err(self.current_broken()),
            }
        }
        .instrument(span.clone())
        .await;
        request_span::finish(&span, R::API_KEY, &result);
        result
    }

    /// The span of a request of type `R` in `version` on this connection.
    fn request_span<R: Request>(&self, version: i16) -> Span {
        let node_id = self.inner.shared.node_id.load(Ordering::Relaxed);
        request_span::start(R::API_KEY, version, node_id, self.addr())
    }

    /// Sends `req` in `version` (past the re-authentication gate unless `gated`)
    /// and decodes the response, in the request's span.
    async fn call<R: Request + Sync + 'static>(
        &self,
        req: &R,
        version: i16,
        timeout: Duration,
        gated: bool,
    ) -> Result<R::Response, ConnectionError> {
        let span = self.request_span::<R>(version);
        let result = async {
            let body = self.round_trip(req, version, timeout, gated, &span).await?;
            R::Response::decode_body(body, version)
                .map_err(|source| self.decode_error(R::API_KEY, version, source))
        }
        .instrument(span.clone())
        .await;
        request_span::finish(&span, R::API_KEY, &result);
        result
    }

    fn current_broken(&self) -> ConnectionError {
        let cause = self
            .inner
            .shared
            .poisoned()
            .unwrap_or_else(|| Arc::new(BrokenCause::Closed));
        self.inner.shared.broken(cause)
    }

    /// Encodes the header and body of `req` into one frame and reserves a
    /// correlation id; returns the frame (as segments: byte fields of at least
    /// [`DEFAULT_MIN_SEGMENT`] bytes are shared, not copied) and the id.
    fn encode<R: Request>(
        &self,
        req: &R,
        version: i16,
    ) -> Result<(Vec<Bytes>, i32), ConnectionError> {
        let correlation_id = {
            let mut st = self
                .inner
                .shared
                .state
                .lock()
                .expect("connection state poisoned");
            if let Some(cause) = &st.poisoned {
                return Err(self.inner.shared.broken(cause.clone()));
            }
            loop {
                let id = st.next_correlation_id;
                st.next_correlation_id = id.checked_add(1).unwrap_or(1);
                if !st.pending.contains_key(&id) {
                    break id;
                }
            }
        };
        let frame = envelope::encode_request_segmented(
            correlation_id,
            self.inner.config.client_id.as_deref(),
            req,
            version,
            DEFAULT_MIN_SEGMENT,
        )?;
        let size = frame.iter().map(Bytes::len).sum::<usize>() - 4;
        if size > self.inner.config.max_frame_size {
            return Err(ConnectionError::RequestTooLarge {
                size,
                max: self.inner.config.max_frame_size,
            });
        }
        Ok((frame, correlation_id))
    }

    async fn enqueue(&self, out: Outgoing) -> Result<(), ConnectionError> {
        self.inner
            .tx
            .send(out)
            .await
            .map_err(|_| self.current_broken())
    }

    /// Sends one request and returns the response body (header stripped), in the
    /// request's span.
    async fn round_trip_raw<R: Request + Sync + 'static>(
        &self,
        req: &R,
        version: i16,
        timeout: Duration,
    ) -> Result<Bytes, ConnectionError> {
        let span = self.request_span::<R>(version);
        let result = self
            .round_trip(req, version, timeout, true, &span)
            .instrument(span.clone())
            .await;
        request_span::finish(&span, R::API_KEY, &result);
        result
    }

    /// Sends one request and returns the response body (header stripped); with
    /// `gated`, the request waits while the session re-authenticates. Its
    /// correlation id is recorded on `span`.
    async fn round_trip<R: Request + Sync + 'static>(
        &self,
        req: &R,
        version: i16,
        timeout: Duration,
        gated: bool,
        span: &Span,
    ) -> Result<Bytes, ConnectionError> {
        let shared = &*self.inner.shared;
        let (frame, correlation_id) = self.encode(req, version)?;
        span.record("correlation_id", correlation_id);
        let (slot_tx, slot_rx) = oneshot::channel();
        {
            let mut st = shared.state.lock().expect("connection state poisoned");
            if let Some(cause) = &st.poisoned {
                return Err(shared.broken(cause.clone()));
            }
            st.pending.insert(correlation_id, slot_tx);
        }
        // From here on, leaving early (error, timeout, drop) frees the slot.
        let _guard = PendingGuard {
            shared,
            correlation_id,
        };
        let exchange = async {
            // Held only while queueing: a re-authentication waits for queued
            // frames, never for responses.
            let open = if gated {
                Some(self.inner.gate.read().await)
            } else {
                None
            };
            self.enqueue(Outgoing {
                frame,
                written: None,
            })
            .await?;
            drop(open);
            match slot_rx.await {
                Ok(Ok(frame)) => Ok(frame),
                Ok(Err(cause)) => Err(shared.broken(cause)),
                Err(_) => Err(self.current_broken()),
            }
        };
        let frame = match tokio::time::timeout(timeout, exchange).await {
            Ok(result) => result?,
            Err(_) => {
                return Err(ConnectionError::Timeout {
                    addr: shared.addr.clone(),
                    api_key: R::API_KEY,
                    timeout,
                })
            }
        };
        let (_, body) = envelope::split_response::<R>(frame, version)
            .map_err(|source| self.decode_error(R::API_KEY, version, source))?;
        Ok(body)
    }
}

/// Re-authenticates the connection `weak` points to before each session lifetime
/// runs out, until the connection is gone, breaks, or the broker stops giving a
/// lifetime. A failure poisons the connection.
async fn reauthenticate_loop(
    weak: Weak<Inner>,
    credentials: SaslCredentials,
    mut lifetime: Duration,
) {
    loop {
        let delay = sasl::reauth_delay(lifetime, crate::backoff::unit_jitter());
        tokio::time::sleep(delay).await;
        let Some(inner) = weak.upgrade() else {
            return;
        };
        let conn = Connection { inner };
        if conn.is_poisoned() {
            return;
        }
        let result = match sasl::prepare(&conn, &credentials).await {
            Ok(session) => {
                let _closed = conn.inner.gate.write().await;
                sasl::exchange(&conn, session).await
            }
            Err(e) => Err(e),
        };
        match result {
            Ok(Some(next)) => {
                tracing::debug!(addr = %conn.addr(), mechanism = %credentials.mechanism(), ?next, "SASL session re-authenticated");
                lifetime = next;
            }
            Ok(None) => return,
            Err(e) => {
                let message = match e {
                    ConnectionError::Authentication { message, .. } => message,
                    // Broken for its own reason: that reason stands.
                    ConnectionError::Broken { .. } => return,
                    other => other.to_string(),
                };
                tracing::warn!(addr = %conn.addr(), mechanism = %credentials.mechanism(), %message, "SASL re-authentication failed");
                conn.inner
                    .shared
                    .poison_explained(BrokenCause::Reauthentication {
                        mechanism: credentials.mechanism().name().to_string(),
                        message,
                    });
                return;
            }
        }
    }
}

/// Room made in the read buffer before each read: what the frame under way still
/// wants, but no more than fills [`READ_CHUNK`] or doubles the bytes already
/// buffered, whichever is larger. A frame header announcing the maximum frame size
/// thus costs nothing until its bytes arrive: the buffer grows geometrically with
/// the bytes actually received (to at most about four times those, or
/// `READ_CHUNK`), so a broker that announces a large frame and stalls makes the
/// client hold no more than it sent.
fn read_reserve(wanted: usize, buffered: usize) -> usize {
    wanted.min(READ_CHUNK.saturating_sub(buffered).max(buffered))
}

/// Splits frames off the socket and hands each to its pending slot.
async fn read_loop<R: AsyncRead + Unpin>(mut read: R, codec: FrameCodec, shared: Arc<Shared>) {
    let mut buf = BytesMut::with_capacity(READ_CHUNK);
    loop {
        loop {
            match codec.decode(&mut buf) {
                Ok(Some(frame)) => {
                    let id = match ResponseHeader::peek_correlation_id(&frame) {
                        Ok(id) => id,
                        Err(e) => {
                            shared.poison(BrokenCause::BadHeader(e));
                            return;
                        }
                    };
                    let slot = shared
                        .state
                        .lock()
                        .expect("connection state poisoned")
                        .pending
                        .remove(&id);
                    match slot {
                        Some(slot) => {
                            let _ = slot.send(Ok(frame));
                        }
                        None => {
                            tracing::trace!(addr = %shared.addr, id, "discarding response to an abandoned request");
                        }
                    }
                }
                Ok(None) => break,
                Err(e) => {
                    shared.poison(BrokenCause::Frame(e));
                    return;
                }
            }
        }
        buf.reserve(read_reserve(codec.wanted(&buf), buf.len()));
        match read.read_buf(&mut buf).await {
            Ok(0) => {
                shared.poison(BrokenCause::Closed);
                return;
            }
            Ok(_) => {}
            Err(e) => {
                shared.poison(BrokenCause::Io(e));
                return;
            }
        }
    }
}

/// Writes queued frames: whatever is queued when the writer wakes (up to
/// [`MAX_WRITE_SEGMENTS`] segments) goes out in vectored writes, without copying.
async fn write_loop<W: AsyncWrite + Unpin>(
    mut write: W,
    mut rx: mpsc::Receiver<Outgoing>,
    shared: Arc<Shared>,
) {
    let mut segments = VecDeque::new();
    let mut acks = Vec::new();
    while let Some(first) = rx.recv().await {
        let mut next = Some(first);
        while let Some(out) = next.take() {
            segments.extend(out.frame);
            acks.extend(out.written);
            if segments.len() < MAX_WRITE_SEGMENTS {
                next = rx.try_recv().ok();
            }
        }
        if shared.poisoned().is_some() {
            return;
        }
        if let Err(e) = write_segments(&mut write, &mut segments).await {
            shared.poison(BrokenCause::Io(e));
            return;
        }
        for ack in acks.drain(..) {
            let _ = ack.send(());
        }
    }
    let _ = write.shutdown().await;
}

/// Writes `segments` in order with vectored writes, resuming correctly after a
/// partial write; on success `segments` is empty.
///
/// # Cancel safety
///
/// Not cancel safe: dropped mid-way, `segments` holds exactly what was not yet
/// written, but the stream may hold part of a frame.
async fn write_segments<W: AsyncWrite + Unpin>(
    w: &mut W,
    segments: &mut VecDeque<Bytes>,
) -> io::Result<()> {
    segments.retain(|s| !s.is_empty());
    while !segments.is_empty() {
        let mut slices = [IoSlice::new(&[]); MAX_WRITE_SEGMENTS];
        let mut n = 0;
        for (slice, segment) in slices.iter_mut().zip(segments.iter()) {
            *slice = IoSlice::new(segment);
            n += 1;
        }
        let mut written = w.write_vectored(&slices[..n]).await?;
        if written == 0 {
            return Err(io::ErrorKind::WriteZero.into());
        }
        while written > 0 {
            let Some(front) = segments.front_mut() else {
                break;
            };
            if written >= front.len() {
                written -= front.len();
                segments.pop_front();
            } else {
                front.advance(written);
                written = 0;
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use baton_protocol::messages::ApiVersion;
    use tokio::net::TcpListener;

    /// Segments of awkward sizes, several MiB in all, so that the socket buffer fills
    /// and vectored writes come back partial.
    fn sample_segments() -> (VecDeque<Bytes>, Vec<u8>) {
        let mut segments = VecDeque::new();
        let mut all = Vec::new();
        for i in 0..40usize {
            let len = match i % 5 {
                0 => 0,
                1 => 1,
                2 => 17,
                3 => 65_537,
                _ => 3 * 1024 * 1024 / 2 + i,
            };
            let segment: Vec<u8> = (0..len).map(|j| (i * 31 + j) as u8).collect();
            all.extend_from_slice(&segment);
            segments.push_back(Bytes::from(segment));
        }
        (segments, all)
    }

    #[tokio::test]
    async fn vectored_writes_resume_after_partial_writes() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (mut segments, expected) = sample_segments();
        let reader = tokio::spawn(async move {
            let (mut sock, _) = listener.accept().await.unwrap();
            let mut got = Vec::new();
            let mut chunk = vec![0u8; 7_919];
            loop {
                let n = sock.read(&mut chunk).await.unwrap();
                if n == 0 {
                    break got;
                }
                got.extend_from_slice(&chunk[..n]);
            }
        });
        let mut sock = tokio::net::TcpStream::connect(addr).await.unwrap();
        write_segments(&mut sock, &mut segments).await.unwrap();
        assert!(segments.is_empty());
        sock.shutdown().await.unwrap();
        let got = reader.await.unwrap();
        assert_eq!(got.len(), expected.len());
        assert!(got == expected, "bytes differ");
    }

    #[tokio::test]
    async fn vectored_writes_through_a_tiny_pipe() {
        let (mut a, mut b) = tokio::io::duplex(7);
        let (mut segments, expected) = sample_segments();
        segments.truncate(4); // 0, 1, 17 and 64 KiB + 1 bytes
        let expected_len: usize = segments.iter().map(Bytes::len).sum();
        let reader = tokio::spawn(async move {
            let mut got = Vec::new();
            b.read_to_end(&mut got).await.unwrap();
            got
        });
        write_segments(&mut a, &mut segments).await.unwrap();
        drop(a);
        let got = reader.await.unwrap();
        assert!(got == expected[..expected_len], "bytes differ");
    }

    /// A tiny in-memory broker: answers `answers` ApiVersions requests (in the
    /// version asked) with `api_keys`, then closes its end of the pipe.
    async fn api_versions_responder(
        mut io: tokio::io::DuplexStream,
        api_keys: Vec<ApiVersion>,
        answers: usize,
    ) {
        let codec = FrameCodec::new(DEFAULT_MAX_FRAME);
        let mut buf = BytesMut::new();
        let mut answered = 0;
        while answered < answers {
            let Some(frame) = codec.decode(&mut buf).unwrap() else {
                if io.read_buf(&mut buf).await.unwrap() == 0 {
                    return;
                }
                continue;
            };
            let (api_key, version, correlation_id) =
                baton_protocol::RequestHeader::peek(&frame).unwrap();
            assert_eq!(api_key, ApiVersionsRequest::API_KEY);
            let resp = ApiVersionsResponse {
                api_keys: api_keys.clone(),
                ..Default::default()
            };
            let out =
                envelope::encode_response::<ApiVersionsRequest>(correlation_id, version, &resp)
                    .unwrap();
            io.write_all(&out).await.unwrap();
            answered += 1;
        }
    }

    #[tokio::test]
    async fn a_connection_runs_over_an_in_memory_stream() {
        let (client_end, broker_end) = tokio::io::duplex(64);
        let api_keys = vec![
            ApiVersion {
                api_key: ApiVersionsRequest::API_KEY,
                min_version: 0,
                max_version: 3,
            },
            ApiVersion {
                api_key: 3,
                min_version: 1,
                max_version: 12,
            },
        ];
        // Negotiation, one request, then the broker goes away.
        let broker = tokio::spawn(api_versions_responder(broker_end, api_keys, 2));
        let config = ConnectionConfig::default();
        let conn = Connection::from_stream(client_end, "in-memory", &config)
            .await
            .unwrap();
        assert_eq!(conn.addr(), "in-memory");
        let metadata = conn.broker_versions(3).expect("versions negotiated");
        assert_eq!((metadata.min, metadata.max), (1, 12));

        let resp = conn.send(&ApiVersionsRequest::default()).await.unwrap();
        assert_eq!(resp.api_keys.len(), 2);
        broker.await.unwrap();

        let err = conn.send(&ApiVersionsRequest::default()).await.unwrap_err();
        assert!(
            matches!(&err, ConnectionError::Broken { cause, .. } if matches!(**cause, BrokenCause::Closed)),
            "{err}"
        );
        assert!(conn.is_poisoned());
    }
}
