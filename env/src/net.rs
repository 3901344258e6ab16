//! The network half of the seam: [`Net`] connects and binds; a [`Socket`] is
//! tokio's TCP stream or any other byte stream; a [`Listener`] accepts them.

use std::fmt;
use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf, ReadHalf, WriteHalf};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};

/// A boxed, sendable future, as [`Net`] and [`ListenerImpl`] return.
pub type NetFuture<'a, T> = Pin<Box<dyn Future<Output = io::Result<T>> + Send + 'a>>;

/// A byte stream other than tokio's TCP (a simulated connection).
pub trait Stream: AsyncRead + AsyncWrite + Send + Unpin + fmt::Debug {}

impl<T: AsyncRead + AsyncWrite + Send + Unpin + fmt::Debug> Stream for T {}

/// Opens connections and listeners.
pub trait Net: Send + Sync + fmt::Debug {
    /// Connects to `addr` (`host:port` or `ip:port`).
    fn connect<'a>(&'a self, addr: &'a str) -> NetFuture<'a, Socket>;
    /// Listens on `addr` (port 0 picks one).
    fn bind(&self, addr: SocketAddr) -> NetFuture<'_, Listener>;
}

/// What a non-TCP listener does.
pub trait ListenerImpl: Send + Sync + fmt::Debug {
    /// The next connection and its peer's address.
    fn accept(&self) -> NetFuture<'_, (Socket, SocketAddr)>;
    /// The address it listens on.
    fn local_addr(&self) -> io::Result<SocketAddr>;
}

/// A connected byte stream: tokio's TCP (split into owned halves without a lock)
/// or another [`Stream`].
#[derive(Debug)]
pub enum Socket {
    /// tokio's TCP.
    Tcp(TcpStream),
    /// Any other stream (split through a lock).
    Other(Box<dyn Stream>),
}

impl Socket {
    /// Disables Nagle's algorithm on TCP (other streams ignore it).
    pub fn set_nodelay(&self) {
        if let Socket::Tcp(s) = self {
            let _ = s.set_nodelay(true);
        }
    }

    /// Splits into a read half and a write half.
    pub fn into_split(self) -> (SocketRead, SocketWrite) {
        match self {
            Socket::Tcp(s) => {
                let (r, w) = s.into_split();
                (SocketRead::Tcp(r), SocketWrite::Tcp(w))
            }
            Socket::Other(s) => {
                let (r, w) = tokio::io::split(s);
                (SocketRead::Other(r), SocketWrite::Other(w))
            }
        }
    }
}

/// The read half of a [`Socket`].
#[derive(Debug)]
pub enum SocketRead {
    /// tokio's owned TCP read half.
    Tcp(OwnedReadHalf),
    /// Another stream's read half.
    Other(ReadHalf<Box<dyn Stream>>),
}

/// The write half of a [`Socket`].
#[derive(Debug)]
pub enum SocketWrite {
    /// tokio's owned TCP write half.
    Tcp(OwnedWriteHalf),
    /// Another stream's write half.
    Other(WriteHalf<Box<dyn Stream>>),
}

/// A listener: tokio's TCP or another [`ListenerImpl`].
#[derive(Debug)]
pub enum Listener {
    /// tokio's TCP listener.
    Tcp(TcpListener),
    /// Any other listener.
    Other(Box<dyn ListenerImpl>),
}

impl Listener {
    /// The next connection and its peer's address.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe for TCP (as `TcpListener::accept`); another listener documents
    /// its own.
    pub async fn accept(&self) -> io::Result<(Socket, SocketAddr)> {
        match self {
            Listener::Tcp(l) => l.accept().await.map(|(s, a)| (Socket::Tcp(s), a)),
            Listener::Other(l) => l.accept().await,
        }
    }

    /// The address it listens on.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        match self {
            Listener::Tcp(l) => l.local_addr(),
            Listener::Other(l) => l.local_addr(),
        }
    }
}

macro_rules! forward_read {
    ($t:ty) => {
        impl AsyncRead for $t {
            fn poll_read(
                self: Pin<&mut Self>,
                cx: &mut Context<'_>,
                buf: &mut ReadBuf<'_>,
            ) -> Poll<io::Result<()>> {
                match self.get_mut() {
                    Self::Tcp(s) => Pin::new(s).poll_read(cx, buf),
                    Self::Other(s) => Pin::new(s).poll_read(cx, buf),
                }
            }
        }
    };
}

macro_rules! forward_write {
    ($t:ty) => {
        impl AsyncWrite for $t {
            fn poll_write(
                self: Pin<&mut Self>,
                cx: &mut Context<'_>,
                buf: &[u8],
            ) -> Poll<io::Result<usize>> {
                match self.get_mut() {
                    Self::Tcp(s) => Pin::new(s).poll_write(cx, buf),
                    Self::Other(s) => Pin::new(s).poll_write(cx, buf),
                }
            }

            fn poll_write_vectored(
                self: Pin<&mut Self>,
                cx: &mut Context<'_>,
                bufs: &[io::IoSlice<'_>],
            ) -> Poll<io::Result<usize>> {
                match self.get_mut() {
                    Self::Tcp(s) => Pin::new(s).poll_write_vectored(cx, bufs),
                    Self::Other(s) => Pin::new(s).poll_write_vectored(cx, bufs),
                }
            }

            fn is_write_vectored(&self) -> bool {
                match self {
                    Self::Tcp(s) => s.is_write_vectored(),
                    Self::Other(s) => s.is_write_vectored(),
                }
            }

            fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
                match self.get_mut() {
                    Self::Tcp(s) => Pin::new(s).poll_flush(cx),
                    Self::Other(s) => Pin::new(s).poll_flush(cx),
                }
            }

            fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
                match self.get_mut() {
                    Self::Tcp(s) => Pin::new(s).poll_shutdown(cx),
                    Self::Other(s) => Pin::new(s).poll_shutdown(cx),
                }
            }
        }
    };
}

forward_read!(Socket);
forward_write!(Socket);
forward_read!(SocketRead);
forward_write!(SocketWrite);
