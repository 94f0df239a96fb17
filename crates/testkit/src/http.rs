//! A small HTTP/1.1 server on a bare tokio socket, for fakes of the servers
//! our crates talk to: it reads one request per connection (method, path,
//! headers, a Content-Length body), asks a [`Handler`] for the response and
//! writes it whole or in timed chunks, noticing when the client hangs up
//! before the end. Every connection closes after its response, so each
//! request is one connection a test can watch.
//!
//! No HTTP framework: the crates whose `testing` feature builds on this must
//! stay free of servers (scripts/check_layers.sh).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};

/// The most a request's head may take before the connection is dropped.
const MAX_HEAD: usize = 64 * 1024;

/// A request as the server read it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    pub method: String,
    /// The request target as sent: path and query.
    pub path: String,
    /// In order, names as sent.
    pub headers: Vec<(String, String)>,
    /// `Content-Length` bytes (none without the header).
    pub body: Vec<u8>,
}

impl Request {
    /// The first header called `name`, compared without regard to case.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// A part of a body sent in chunks.
#[derive(Debug, Clone)]
pub enum Chunk {
    /// Written and flushed.
    Bytes(Vec<u8>),
    /// Waits before the next chunk (ends early when the client hangs up).
    Pause(Duration),
    /// Sends nothing more and holds the connection open until the client closes it.
    Hang,
    /// Drops the connection here, mid-body.
    Drop,
}

/// How a response's body is sent.
pub enum Body {
    /// All at once, with its `Content-Length`.
    Whole(Vec<u8>),
    /// Chunk by chunk, without a `Content-Length`: the body ends when the
    /// connection closes. The iterator may be endless.
    Chunks(Box<dyn Iterator<Item = Chunk> + Send>),
}

impl std::fmt::Debug for Body {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Body::Whole(bytes) => f.debug_tuple("Whole").field(&bytes.len()).finish(),
            Body::Chunks(_) => f.write_str("Chunks(..)"),
        }
    }
}

/// One response.
#[derive(Debug)]
pub enum Response {
    /// A status line, these headers plus `connection: close` (and
    /// `content-length` for a whole body), then the body.
    Http {
        status: u16,
        headers: Vec<(String, String)>,
        body: Body,
    },
    /// These bytes as the whole response, status line included (or not).
    Raw(Vec<u8>),
    /// Nothing for this long (less if the client hangs up), then the response:
    /// a server slow to answer at all.
    Delayed(Duration, Box<Response>),
}

impl Response {
    /// `status` with this whole body and headers.
    pub fn whole(
        status: u16,
        headers: Vec<(String, String)>,
        body: impl Into<Vec<u8>>,
    ) -> Response {
        Response::Http {
            status,
            headers,
            body: Body::Whole(body.into()),
        }
    }

    /// `status` with these headers, the body sent as `chunks`.
    pub fn chunks(
        status: u16,
        headers: Vec<(String, String)>,
        chunks: impl IntoIterator<Item = Chunk, IntoIter: Send + 'static>,
    ) -> Response {
        Response::Http {
            status,
            headers,
            body: Body::Chunks(Box::new(chunks.into_iter())),
        }
    }
}

/// What a fake does with each request.
pub trait Handler: Send + Sync + 'static {
    fn respond(&self, request: Request) -> Response;

    /// Called after each response: `complete` is false when the client
    /// hung up first, or the response ended on [`Chunk::Hang`] or [`Chunk::Drop`].
    fn finished(&self, complete: bool) {
        let _ = complete;
    }
}

impl<F> Handler for F
where
    F: Fn(Request) -> Response + Send + Sync + 'static,
{
    fn respond(&self, request: Request) -> Response {
        self(request)
    }
}

/// A server on 127.0.0.1:0; stops accepting when dropped.
#[derive(Debug)]
pub struct Server {
    addr: SocketAddr,
    task: tokio::task::JoinHandle<()>,
}

impl Server {
    /// Listens on 127.0.0.1:0 and answers every request with `handler`.
    pub async fn start(handler: impl Handler) -> Server {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let handler = Arc::new(handler);
        let task = tokio::spawn(async move {
            while let Ok((socket, _)) = listener.accept().await {
                tokio::spawn(serve(socket, handler.clone()));
            }
        });
        Server { addr, task }
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://127.0.0.1:PORT{path}`.
    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn serve<H: Handler>(socket: TcpStream, handler: Arc<H>) {
    let (mut reader, mut writer) = socket.into_split();
    let Some(request) = read_request(&mut reader).await else {
        return;
    };
    let response = handler.respond(request);
    let complete = write_response(&mut reader, &mut writer, response).await;
    if complete {
        let _ = writer.shutdown().await;
    }
    handler.finished(complete);
}

/// Writes the response; false when it did not reach its end.
async fn write_response(
    reader: &mut OwnedReadHalf,
    writer: &mut OwnedWriteHalf,
    response: Response,
) -> bool {
    let (status, headers, body) = match response {
        Response::Raw(bytes) => return writer.write_all(&bytes).await.is_ok(),
        Response::Delayed(d, response) => {
            tokio::select! {
                _ = tokio::time::sleep(d) => {}
                _ = closed(reader) => return false,
            }
            return Box::pin(write_response(reader, writer, *response)).await;
        }
        Response::Http {
            status,
            headers,
            body,
        } => (status, headers, body),
    };
    let reason = if status == 200 { "OK" } else { "Scripted" };
    let mut head = format!("HTTP/1.1 {status} {reason}\r\n");
    for (name, value) in &headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    if let Body::Whole(bytes) = &body {
        head.push_str(&format!("content-length: {}\r\n", bytes.len()));
    }
    head.push_str("connection: close\r\n\r\n");
    if writer.write_all(head.as_bytes()).await.is_err() {
        return false;
    }
    let chunks = match body {
        Body::Whole(bytes) => return writer.write_all(&bytes).await.is_ok(),
        Body::Chunks(chunks) => chunks,
    };
    for chunk in chunks {
        match chunk {
            Chunk::Bytes(bytes) => {
                if writer.write_all(&bytes).await.is_err() || writer.flush().await.is_err() {
                    return false;
                }
            }
            Chunk::Pause(d) => {
                tokio::select! {
                    _ = tokio::time::sleep(d) => {}
                    _ = closed(reader) => return false,
                }
            }
            Chunk::Hang => {
                closed(reader).await;
                return false;
            }
            Chunk::Drop => return false,
        }
    }
    true
}

/// Resolves when the client closes its side.
async fn closed(reader: &mut OwnedReadHalf) {
    let mut buf = [0u8; 256];
    loop {
        match reader.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
    }
}

/// One request, its body framed by Content-Length; None when the client
/// closes first or sends a head that is too long or not HTTP.
async fn read_request(reader: &mut OwnedReadHalf) -> Option<Request> {
    let mut buf = Vec::new();
    let mut tmp = [0u8; 8192];
    let header_end = loop {
        if let Some(pos) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break pos + 4;
        }
        if buf.len() > MAX_HEAD {
            return None;
        }
        let n = reader.read(&mut tmp).await.ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&tmp[..n]);
    };
    let head = String::from_utf8_lossy(&buf[..header_end]).to_string();
    let mut lines = head.split("\r\n");
    let mut start = lines.next()?.split(' ');
    let method = start.next()?.to_string();
    let path = start.next()?.to_string();
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
        .collect();
    let mut request = Request {
        method,
        path,
        headers,
        body: buf[header_end..].to_vec(),
    };
    let length: usize = request
        .header("content-length")
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    while request.body.len() < length {
        let n = reader.read(&mut tmp).await.ok()?;
        if n == 0 {
            return None;
        }
        request.body.extend_from_slice(&tmp[..n]);
    }
    request.body.truncate(length);
    Some(request)
}
