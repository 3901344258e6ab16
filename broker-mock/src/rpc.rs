//! Request/response connections built on [`baton_protocol::envelope`].
//!
//! [`Channel`] is one Kafka connection that writes request frames and reads
//! response frames, one exchange at a time or several written ahead; tests drive
//! it directly (`baton_testkit::wire` is built on it). `Rpc`, the broker-to-broker
//! and broker-to-controller client, wraps a channel with a timeout and reconnects
//! after any failure.
//!
//! ```no_run
//! # async fn demo(addr: std::net::SocketAddr) -> Result<(), baton_broker::rpc::RpcError> {
//! use baton_broker::rpc::Channel;
//! use baton_protocol::messages::ApiVersionsRequest;
//!
//! let mut channel = Channel::connect(addr, "tool").await?;
//! let versions = channel.call(&ApiVersionsRequest::default(), 3).await?;
//! println!("{} APIs", versions.api_keys.len());
//! # Ok(()) }
//! ```

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use baton_env::Socket;
use baton_protocol::frame::DEFAULT_MAX_FRAME;
use baton_protocol::{envelope, FrameCodec, Request, ResponseHeader};
use bytes::{Bytes, BytesMut};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_rustls::client::TlsStream;

use baton_protocol::messages::{SaslAuthenticateRequest, SaslHandshakeRequest};
use baton_protocol::sasl::{ClientSession, Mechanism, Secret};
use rustls::pki_types::ServerName;

use crate::inter_node::InterNodeSecurity;

/// The most a [`Channel`] grows its read buffer by for one read.
const READ_CHUNK: usize = 64 * 1024;

/// Why a call failed. A connection is dropped after any of these.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RpcError {
    /// Connecting, writing or reading failed (end of stream included).
    #[error("i/o error talking to {addr}: {source}")]
    Io {
        /// The peer.
        addr: SocketAddr,
        /// The cause.
        source: std::io::Error,
    },
    /// No answer within the timeout.
    #[error("no answer from {0} in time")]
    Timeout(SocketAddr),
    /// The answer could not be encoded or decoded.
    #[error("protocol error with {addr}: {reason}")]
    Protocol {
        /// The peer.
        addr: SocketAddr,
        /// What went wrong.
        reason: String,
    },
}

/// The bytes under a channel: TCP, or TLS over TCP (inter-node connections of a
/// secured cluster).
#[derive(Debug)]
enum Transport {
    Tcp(Socket),
    Tls(Box<TlsStream<Socket>>),
}

impl Transport {
    async fn write_all(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        match self {
            Transport::Tcp(s) => s.write_all(bytes).await,
            Transport::Tls(s) => {
                s.write_all(bytes).await?;
                s.flush().await
            }
        }
    }

    async fn read_buf(&mut self, buf: &mut BytesMut) -> std::io::Result<usize> {
        match self {
            Transport::Tcp(s) => s.read_buf(buf).await,
            Transport::Tls(s) => s.read_buf(buf).await,
        }
    }
}

/// One Kafka connection: request frames out, response frames in, in order.
///
/// Each request carries the next correlation id and the channel's client id;
/// responses are read in the order the peer writes them. Frames over
/// [`DEFAULT_MAX_FRAME`] are refused before they are buffered, and the read buffer
/// grows only with the bytes received.
#[derive(Debug)]
pub struct Channel {
    /// The connection.
    stream: Transport,
    /// The peer, named in errors.
    addr: SocketAddr,
    /// Sent in every request header.
    client_id: String,
    /// The correlation id of the next request.
    next_correlation_id: i32,
    /// Splits response frames off `buf`.
    codec: FrameCodec,
    /// Bytes read but not yet handed out as frames.
    buf: BytesMut,
}

impl Channel {
    /// Connects to `addr` (asking for `TCP_NODELAY`); requests name `client_id`.
    ///
    /// Cancel safety: cancelling drops the half-open connection.
    pub async fn connect(addr: SocketAddr, client_id: impl Into<String>) -> Result<Self, RpcError> {
        let io = |source| RpcError::Io { addr, source };
        let stream = connect_socket(addr).await.map_err(io)?;
        Ok(Channel::over_tcp(stream, addr, client_id.into()))
    }

    /// A channel over a stream the caller connected (e.g. from a chosen source
    /// address).
    pub fn from_stream(stream: TcpStream, client_id: impl Into<String>) -> Result<Self, RpcError> {
        let addr = stream.peer_addr().map_err(|source| RpcError::Io {
            addr: SocketAddr::from(([0, 0, 0, 0], 0)),
            source,
        })?;
        Ok(Channel::over_tcp(
            Socket::Tcp(stream),
            addr,
            client_id.into(),
        ))
    }

    pub(crate) fn over_tcp(stream: Socket, addr: SocketAddr, client_id: String) -> Self {
        Channel::over(Transport::Tcp(stream), addr, client_id)
    }

    pub(crate) fn over_tls(stream: TlsStream<Socket>, addr: SocketAddr, client_id: String) -> Self {
        Channel::over(Transport::Tls(Box::new(stream)), addr, client_id)
    }

    fn over(stream: Transport, addr: SocketAddr, client_id: String) -> Self {
        Channel {
            stream,
            addr,
            client_id,
            next_correlation_id: 1,
            codec: FrameCodec::new(DEFAULT_MAX_FRAME),
            buf: BytesMut::new(),
        }
    }

    /// The underlying stream, for writing bytes around the framing (under TLS,
    /// the stream beneath it: bytes written there bypass TLS).
    pub fn stream_mut(&mut self) -> &mut Socket {
        match &mut self.stream {
            Transport::Tcp(s) => s,
            Transport::Tls(s) => s.get_mut().0,
        }
    }

    /// The peer's address.
    pub fn peer(&self) -> SocketAddr {
        self.addr
    }

    /// Writes `req` in `version` with the next correlation id, and returns that id.
    ///
    /// Cancel safety: not cancel safe; a cancelled write may leave part of a frame
    /// on the connection, which should then be dropped.
    pub async fn send<R: Request + Sync>(
        &mut self,
        req: &R,
        version: i16,
    ) -> Result<i32, RpcError> {
        let correlation_id = self.next_correlation_id;
        self.next_correlation_id = correlation_id.wrapping_add(1);
        let frame = envelope::encode_request(correlation_id, Some(&self.client_id), req, version)
            .map_err(|e| self.protocol(e.to_string()))?;
        self.send_raw(&frame).await.map_err(|source| RpcError::Io {
            addr: self.addr,
            source,
        })?;
        Ok(correlation_id)
    }

    /// Writes `bytes` as they are (a frame built by hand, or garbage).
    ///
    /// Cancel safety: as [`Channel::send`].
    pub async fn send_raw(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        self.stream.write_all(bytes).await
    }

    /// Reads the next frame (without its size prefix).
    ///
    /// Cancel safety: cancel safe; bytes read so far stay buffered for the next call.
    pub async fn recv_frame(&mut self) -> Result<Bytes, RpcError> {
        loop {
            let frame = self
                .codec
                .decode(&mut self.buf)
                .map_err(|e| self.protocol(e.to_string()))?;
            if let Some(frame) = frame {
                return Ok(frame);
            }
            self.buf
                .reserve(self.codec.wanted(&self.buf).min(READ_CHUNK));
            let io = |source| RpcError::Io {
                addr: self.addr,
                source,
            };
            if self.stream.read_buf(&mut self.buf).await.map_err(io)? == 0 {
                return Err(io(std::io::ErrorKind::UnexpectedEof.into()));
            }
        }
    }

    /// Reads the next frame as the response to an `R` request in `version`.
    ///
    /// Cancel safety: as [`Channel::recv_frame`].
    pub async fn recv<R: Request>(
        &mut self,
        version: i16,
    ) -> Result<(ResponseHeader, R::Response), RpcError> {
        let frame = self.recv_frame().await?;
        envelope::decode_response::<R>(frame, version).map_err(|e| self.protocol(e.to_string()))
    }

    /// Sends `req` in `version` and reads its response, which must carry the
    /// request's correlation id.
    ///
    /// Cancel safety: as [`Channel::send`].
    pub async fn call<R: Request + Sync>(
        &mut self,
        req: &R,
        version: i16,
    ) -> Result<R::Response, RpcError> {
        let correlation_id = self.send(req, version).await?;
        let (header, response) = self.recv::<R>(version).await?;
        if header.correlation_id != correlation_id {
            return Err(self.protocol(format!(
                "correlation id {} instead of {correlation_id}",
                header.correlation_id
            )));
        }
        Ok(response)
    }

    fn protocol(&self, reason: String) -> RpcError {
        RpcError::Protocol {
            addr: self.addr,
            reason,
        }
    }
}

/// One connection to a peer, opened on first use (secured as the cluster's
/// inter-node security says), dropped after any failure.
#[derive(Debug)]
pub(crate) struct Rpc {
    addr: SocketAddr,
    channel: Option<Channel>,
    client_id: String,
    security: Option<Arc<InterNodeSecurity>>,
}

impl Rpc {
    pub(crate) fn new(
        addr: SocketAddr,
        client_id: impl Into<String>,
        security: Option<Arc<InterNodeSecurity>>,
    ) -> Self {
        Rpc {
            addr,
            channel: None,
            client_id: client_id.into(),
            security,
        }
    }

    /// Sends `req` in `version` and waits for its response.
    ///
    /// Cancel safety: cancelling drops the connection state mid-exchange; the next call
    /// reconnects.
    pub(crate) async fn call<R: Request + Sync>(
        &mut self,
        req: &R,
        version: i16,
        timeout: Duration,
    ) -> Result<R::Response, RpcError> {
        let addr = self.addr;
        let channel = self.channel.take();
        let exchange = async {
            let mut channel = match channel {
                Some(c) => c,
                None => {
                    connect_secured(addr, self.client_id.as_str(), self.security.as_deref()).await?
                }
            };
            let response = channel.call(req, version).await?;
            Ok::<_, RpcError>((response, channel))
        };
        match tokio::time::timeout(timeout, exchange).await {
            Ok(Ok((response, channel))) => {
                self.channel = Some(channel);
                Ok(response)
            }
            Ok(Err(e)) => Err(e),
            Err(_) => Err(RpcError::Timeout(addr)),
        }
    }
}

/// Connects to `addr` through the process's environment ([`baton_env::process`]),
/// with `TCP_NODELAY`.
async fn connect_socket(addr: SocketAddr) -> std::io::Result<Socket> {
    let socket = baton_env::process().net.connect(&addr.to_string()).await?;
    socket.set_nodelay();
    Ok(socket)
}

/// Opens a channel to `addr` secured as `security` says (plain TCP for `None`).
async fn connect_secured(
    addr: SocketAddr,
    client_id: &str,
    security: Option<&InterNodeSecurity>,
) -> Result<Channel, RpcError> {
    let io = |source| RpcError::Io { addr, source };
    let stream = connect_socket(addr).await.map_err(io)?;
    let Some(security) = security else {
        return Ok(Channel::over_tcp(stream, addr, client_id.to_owned()));
    };
    let protocol = |reason: String| RpcError::Protocol { addr, reason };
    let mut channel = match security.tls_config() {
        Some(config) => {
            let name = ServerName::IpAddress(addr.ip().into());
            let tls = tokio_rustls::TlsConnector::from(config.clone())
                .connect(name, stream)
                .await
                .map_err(|e| protocol(format!("TLS handshake: {e}")))?;
            Channel::over_tls(tls, addr, client_id.to_owned())
        }
        None => Channel::over_tcp(stream, addr, client_id.to_owned()),
    };
    if let Some((mechanism, user, password)) = security.sasl_user() {
        authenticate(&mut channel, mechanism, user, password.clone())
            .await
            .map_err(|e| protocol(format!("SASL {mechanism} as {user}: {e}")))?;
    }
    Ok(channel)
}

/// SaslHandshake v1, then SaslAuthenticate v2 rounds until the exchange ends.
async fn authenticate(
    channel: &mut Channel,
    mechanism: Mechanism,
    user: &str,
    password: Secret,
) -> Result<(), String> {
    let handshake = channel
        .call(
            &SaslHandshakeRequest {
                mechanism: mechanism.name().into(),
            },
            1,
        )
        .await
        .map_err(|e| e.to_string())?;
    if handshake.error_code != 0 {
        return Err(format!("handshake refused ({})", handshake.error_code));
    }
    let mut session = ClientSession::new(mechanism, user, password).map_err(|e| e.to_string())?;
    let mut out = session.initial_response();
    loop {
        let resp = channel
            .call(
                &SaslAuthenticateRequest {
                    auth_bytes: Bytes::from(out),
                },
                2,
            )
            .await
            .map_err(|e| e.to_string())?;
        if resp.error_code != 0 {
            return Err(resp.error_message.unwrap_or_else(|| "refused".into()));
        }
        let server = resp.auth_bytes;
        let (back, step) = baton_env::spawn_blocking(move || {
            let step = session.step(&server);
            (session, step)
        })
        .await
        .map_err(|e| e.to_string())?;
        session = back;
        match step.map_err(|e| e.to_string())? {
            Some(next) => out = next,
            None => return Ok(()),
        }
    }
}
