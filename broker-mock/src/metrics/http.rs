//! The metrics endpoint: a minimal HTTP/1.1 server on its own port. It reads a
//! request head of at most [`MAX_HEAD_BYTES`] within [`HEAD_TIMEOUT`], answers
//! `GET /metrics` (a query string is ignored) with the exposition, `404` for
//! another path, `405` for another method and `400` for anything that is not a
//! request head (or is too long), then closes the connection. At most
//! [`MAX_CONNECTIONS`] are served at once; more are closed at once.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{watch, Semaphore};
use tokio::task::JoinHandle;

use super::prometheus::CONTENT_TYPE;

/// Longest request head read (request line and headers).
pub(crate) const MAX_HEAD_BYTES: usize = 8 * 1024;
/// How long a client has to send its request head.
pub(crate) const HEAD_TIMEOUT: Duration = Duration::from_secs(10);
/// Bytes read and dropped after answering, before closing.
const DRAIN_BYTES: usize = 64 * 1024;
/// How long a connection may take to close after its answer.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(2);
/// Connections served at once.
pub(crate) const MAX_CONNECTIONS: usize = 16;

/// Renders the exposition text (called on the blocking pool for each scrape).
pub(crate) type Render = Arc<dyn Fn() -> String + Send + Sync>;

/// Binds `addr` and serves the endpoint until `stop` turns true; returns the
/// bound address and the server's task.
pub(crate) async fn start(
    addr: SocketAddr,
    render: Render,
    mut stop: watch::Receiver<bool>,
) -> std::io::Result<(SocketAddr, JoinHandle<()>)> {
    let listener = TcpListener::bind(addr).await?;
    let bound = listener.local_addr()?;
    let slots = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    let task = tokio::spawn(async move {
        loop {
            tokio::select! {
                _ = stop.changed() => return,
                accepted = listener.accept() => {
                    let Ok((stream, _)) = accepted else {
                        tokio::time::sleep(Duration::from_millis(10)).await;
                        continue;
                    };
                    // Past the limit the stream is dropped, which closes it.
                    let Ok(slot) = slots.clone().try_acquire_owned() else { continue };
                    let render = render.clone();
                    tokio::spawn(async move {
                        let _slot = slot;
                        serve(stream, render).await;
                    });
                }
            }
        }
    });
    tracing::info!(addr = %bound, "metrics endpoint listening");
    Ok((bound, task))
}

/// What a request head asks for.
#[derive(Debug, PartialEq, Eq)]
enum Route {
    Metrics,
    NotFound,
    MethodNotAllowed,
    BadRequest,
}

/// Reads the head (up to its blank line) and routes it; `None` when the client
/// closed or timed out before sending a whole head.
async fn read_route(stream: &mut TcpStream) -> Option<Route> {
    let mut head = Vec::with_capacity(1024);
    let mut chunk = [0u8; 1024];
    let read = async {
        loop {
            if let Some(end) = find_end(&head) {
                return Some(route(&head[..end]));
            }
            if head.len() >= MAX_HEAD_BYTES {
                return Some(Route::BadRequest);
            }
            let want = chunk.len().min(MAX_HEAD_BYTES - head.len());
            match stream.read(&mut chunk[..want]).await {
                Ok(0) | Err(_) => return None,
                Ok(n) => head.extend_from_slice(&chunk[..n]),
            }
        }
    };
    tokio::time::timeout(HEAD_TIMEOUT, read)
        .await
        .ok()
        .flatten()
}

/// The end of the head: the index of its blank line (`\r\n\r\n` or `\n\n`).
fn find_end(head: &[u8]) -> Option<usize> {
    let crlf = head.windows(4).position(|w| w == b"\r\n\r\n");
    let lf = head.windows(2).position(|w| w == b"\n\n");
    match (crlf, lf) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// Routes a request head by its request line (`METHOD SP TARGET SP HTTP/1.x`).
fn route(head: &[u8]) -> Route {
    let Ok(head) = std::str::from_utf8(head) else {
        return Route::BadRequest;
    };
    let line = head.lines().next().unwrap_or("");
    let mut parts = line.split(' ');
    let (Some(method), Some(target), Some(version), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Route::BadRequest;
    };
    let token = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_alphabetic());
    if !token(method) || !target.starts_with('/') || !version.starts_with("HTTP/1.") {
        return Route::BadRequest;
    }
    let path = target.split('?').next().unwrap_or(target);
    match (method, path) {
        ("GET", "/metrics") => Route::Metrics,
        ("GET", _) => Route::NotFound,
        _ => Route::MethodNotAllowed,
    }
}

async fn serve(mut stream: TcpStream, render: Render) {
    let Some(route) = read_route(&mut stream).await else {
        return;
    };
    let (status, content_type, body) = match route {
        Route::Metrics => match tokio::task::spawn_blocking(move || render()).await {
            Ok(text) => ("200 OK", CONTENT_TYPE, text),
            Err(_) => (
                "500 Internal Server Error",
                "text/plain",
                "render failed\n".into(),
            ),
        },
        Route::NotFound => ("404 Not Found", "text/plain", "try /metrics\n".into()),
        Route::MethodNotAllowed => ("405 Method Not Allowed", "text/plain", "GET only\n".into()),
        Route::BadRequest => ("400 Bad Request", "text/plain", "bad request\n".into()),
    };
    let allow = if route == Route::MethodNotAllowed {
        "Allow: GET\r\n"
    } else {
        ""
    };
    let head = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\n{allow}Connection: close\r\n\r\n",
        body.len()
    );
    if stream.write_all(head.as_bytes()).await.is_ok() {
        let _ = stream.write_all(body.as_bytes()).await;
    }
    let _ = stream.shutdown().await;
    // Closing with unread input would reset the connection, and the client might
    // lose the answer: read what it still sends (bounded) until it closes too.
    let drain = async {
        let mut sink = [0u8; 1024];
        let mut left = DRAIN_BYTES;
        while left > 0 {
            match stream.read(&mut sink).await {
                Ok(0) | Err(_) => return,
                Ok(n) => left = left.saturating_sub(n),
            }
        }
    };
    let _ = tokio::time::timeout(DRAIN_TIMEOUT, drain).await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_lines_are_routed() {
        for (head, want) in [
            (&b"GET /metrics HTTP/1.1\r\nHost: x"[..], Route::Metrics),
            (b"GET /metrics?name=x HTTP/1.0", Route::Metrics),
            (b"GET / HTTP/1.1", Route::NotFound),
            (b"POST /metrics HTTP/1.1", Route::MethodNotAllowed),
            (b"GET /metrics", Route::BadRequest),
            (b"GET metrics HTTP/1.1", Route::BadRequest),
            (b"GET /metrics HTTP/2 extra", Route::BadRequest),
            (b"\xff\xfe /metrics HTTP/1.1", Route::BadRequest),
            (b"G3T /metrics HTTP/1.1", Route::BadRequest),
            (b"", Route::BadRequest),
        ] {
            assert_eq!(route(head), want, "{:?}", String::from_utf8_lossy(head));
        }
    }

    #[test]
    fn the_head_ends_at_its_blank_line() {
        assert_eq!(find_end(b"GET / HTTP/1.1\r\n\r\nbody"), Some(14));
        assert_eq!(find_end(b"GET / HTTP/1.1\n\n"), Some(14));
        assert_eq!(find_end(b"GET / HTTP/1.1\r\n"), None);
    }
}
