//! A minimal request/response connection for broker-to-broker and broker-to-controller
//! traffic: one request at a time, reconnecting after any failure.

use std::net::SocketAddr;
use std::time::Duration;

use baton_protocol::frame::{begin_frame, finish_frame, DEFAULT_MAX_FRAME};
use baton_protocol::primitives::Decoder;
use baton_protocol::{FrameCodec, Request, RequestHeader, ResponseHeader};
use bytes::BytesMut;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Why a call failed. The connection is dropped after any of these.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RpcError {
    /// Connecting, writing or reading failed.
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

/// One connection to a peer, opened on first use.
#[derive(Debug)]
pub(crate) struct Rpc {
    addr: SocketAddr,
    conn: Option<TcpStream>,
    correlation_id: i32,
    client_id: String,
    codec: FrameCodec,
}

impl Rpc {
    pub(crate) fn new(addr: SocketAddr, client_id: impl Into<String>) -> Self {
        Rpc {
            addr,
            conn: None,
            correlation_id: 0,
            client_id: client_id.into(),
            codec: FrameCodec::new(DEFAULT_MAX_FRAME),
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
        let conn = self.conn.take();
        let res = tokio::time::timeout(timeout, self.exchange(conn, req, version)).await;
        match res {
            Ok(Ok((resp, conn))) => {
                self.conn = Some(conn);
                Ok(resp)
            }
            Ok(Err(e)) => Err(e),
            Err(_) => Err(RpcError::Timeout(addr)),
        }
    }

    async fn exchange<R: Request + Sync>(
        &mut self,
        conn: Option<TcpStream>,
        req: &R,
        version: i16,
    ) -> Result<(R::Response, TcpStream), RpcError> {
        let addr = self.addr;
        let io = |source| RpcError::Io { addr, source };
        let proto = |reason: String| RpcError::Protocol { addr, reason };
        let mut conn = match conn {
            Some(c) => c,
            None => {
                let c = TcpStream::connect(addr).await.map_err(io)?;
                let _ = c.set_nodelay(true);
                c
            }
        };
        self.correlation_id = self.correlation_id.wrapping_add(1);
        let correlation_id = self.correlation_id;
        let mut buf = BytesMut::new();
        let at = begin_frame(&mut buf);
        RequestHeader {
            api_key: R::API_KEY,
            api_version: version,
            correlation_id,
            client_id: Some(self.client_id.clone()),
        }
        .encode(&mut buf, R::request_header_version(version));
        req.encode_body(&mut buf, version)
            .map_err(|e| proto(e.to_string()))?;
        finish_frame(&mut buf, at);
        conn.write_all(&buf).await.map_err(io)?;
        let mut rbuf = BytesMut::new();
        let frame = loop {
            if let Some(f) = self
                .codec
                .decode(&mut rbuf)
                .map_err(|e| proto(e.to_string()))?
            {
                break f;
            }
            rbuf.reserve(self.codec.wanted(&rbuf).min(64 * 1024));
            let n = conn.read_buf(&mut rbuf).await.map_err(io)?;
            if n == 0 {
                return Err(io(std::io::ErrorKind::UnexpectedEof.into()));
            }
        };
        let mut d = Decoder::new(frame);
        let header = ResponseHeader::decode(&mut d, R::response_header_version(version))
            .map_err(|e| proto(e.to_string()))?;
        if header.correlation_id != correlation_id {
            return Err(proto(format!(
                "correlation id {} instead of {correlation_id}",
                header.correlation_id
            )));
        }
        let resp = <R::Response as baton_protocol::Message>::decode_body(d.take_rest(), version)
            .map_err(|e| proto(e.to_string()))?;
        Ok((resp, conn))
    }
}
