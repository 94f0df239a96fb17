//! For tests: a real HTTP/1.1 server on 127.0.0.1 serving scripted replies
//! (pages, redirects, slow and endless bodies; built on the test kit's
//! bare-socket server), and a resolver that answers
//! from a table and counts its lookups, so tests reach nothing but loopback.

// Test support reports failure by panicking, like the tests that use it.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use data_plane_testkit::http::{Chunk, Request, Response, Server};

use crate::fetch::{Lookup, Resolve};

/// How a reply's body is sent.
#[derive(Debug, Clone)]
pub enum Body {
    /// All at once, with its Content-Length.
    Bytes(Vec<u8>),
    /// `chunk` every `every`, `count` times, without a Content-Length (the
    /// body ends when the connection closes).
    Trickle {
        chunk: Vec<u8>,
        every: Duration,
        count: usize,
    },
    /// `chunk` repeated without end and without a Content-Length.
    Endless(Vec<u8>),
}

/// One scripted reply.
#[derive(Debug, Clone)]
pub struct Reply {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Body,
}

impl Reply {
    /// 200 with this Content-Type (none when empty) and body.
    pub fn ok(content_type: &str, body: impl Into<Vec<u8>>) -> Reply {
        let headers = if content_type.is_empty() {
            Vec::new()
        } else {
            vec![("Content-Type".to_string(), content_type.to_string())]
        };
        Reply {
            status: 200,
            headers,
            body: Body::Bytes(body.into()),
        }
    }

    /// A redirect to `location`, as written (relative or absolute).
    pub fn redirect(status: u16, location: &str) -> Reply {
        Reply {
            status,
            headers: vec![("Location".to_string(), location.to_string())],
            body: Body::Bytes(Vec::new()),
        }
    }

    pub fn status(status: u16) -> Reply {
        Reply {
            status,
            headers: vec![("Content-Type".to_string(), "text/plain".to_string())],
            body: Body::Bytes(format!("status {status}").into_bytes()),
        }
    }

    pub fn with_body(mut self, body: Body) -> Reply {
        self.body = body;
        self
    }

    pub fn with_header(mut self, name: &str, value: &str) -> Reply {
        self.headers.push((name.to_string(), value.to_string()));
        self
    }
}

/// A request as the server saw it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Seen {
    pub path: String,
    pub host: Option<String>,
}

/// A server on 127.0.0.1:0; stops when dropped.
#[derive(Debug)]
pub struct LocalServer {
    server: Server,
    seen: Arc<Mutex<Vec<Seen>>>,
}

impl LocalServer {
    /// Serves each path (with its query) from the table; other paths get 404.
    pub async fn start(routes: Vec<(&str, Reply)>) -> LocalServer {
        let routes: HashMap<String, Reply> = routes
            .into_iter()
            .map(|(p, r)| (p.to_string(), r))
            .collect();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let log = seen.clone();
        let server = Server::start(move |request: Request| {
            log.lock().unwrap().push(Seen {
                path: request.path.clone(),
                host: request.header("host").map(str::to_string),
            });
            routes
                .get(&request.path)
                .cloned()
                .unwrap_or_else(|| Reply::status(404))
                .into_response()
        })
        .await;
        LocalServer { server, seen }
    }

    pub fn addr(&self) -> SocketAddr {
        self.server.addr()
    }

    pub fn port(&self) -> u16 {
        self.server.addr().port()
    }

    /// `http://127.0.0.1:PORT{path}`.
    pub fn url(&self, path: &str) -> String {
        self.server.url(path)
    }

    /// Every request so far, in order.
    pub fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }
}

impl Reply {
    fn into_response(self) -> Response {
        match self.body {
            Body::Bytes(bytes) => Response::whole(self.status, self.headers, bytes),
            Body::Trickle {
                chunk,
                every,
                count,
            } => Response::chunks(
                self.status,
                self.headers,
                (0..count).flat_map(move |_| [Chunk::Bytes(chunk.clone()), Chunk::Pause(every)]),
            ),
            Body::Endless(chunk) => Response::chunks(
                self.status,
                self.headers,
                std::iter::repeat(Chunk::Bytes(chunk)),
            ),
        }
    }
}

/// A resolver answering from a table; each name may have a list of
/// answers, given out one per lookup (the last one repeats), to play a
/// rebinding DNS server. Counts every lookup.
#[derive(Debug, Default)]
pub struct FakeDns {
    answers: HashMap<String, Vec<Vec<IpAddr>>>,
    lookups: Mutex<Vec<String>>,
}

impl FakeDns {
    pub fn new() -> FakeDns {
        FakeDns::default()
    }

    /// `name` resolves to `ips` on every lookup.
    pub fn with(self, name: &str, ips: &[&str]) -> FakeDns {
        self.with_sequence(name, &[ips])
    }

    /// `name` resolves to the first answer on the first lookup, the second
    /// on the second, and so on; the last repeats.
    pub fn with_sequence(mut self, name: &str, answers: &[&[&str]]) -> FakeDns {
        let answers = answers
            .iter()
            .map(|ips| ips.iter().map(|ip| ip.parse().unwrap()).collect())
            .collect();
        self.answers.insert(name.to_string(), answers);
        self
    }

    /// The names looked up so far, in order.
    pub fn lookups(&self) -> Vec<String> {
        self.lookups.lock().unwrap().clone()
    }
}

impl Resolve for FakeDns {
    fn lookup<'a>(&'a self, host: &'a str, _port: u16) -> Lookup<'a> {
        Box::pin(async move {
            let n = {
                let mut lookups = self.lookups.lock().unwrap();
                lookups.push(host.to_string());
                lookups.iter().filter(|h| *h == host).count()
            };
            match self.answers.get(host) {
                Some(answers) => Ok(answers[(n - 1).min(answers.len() - 1)].clone()),
                None => Err(std::io::Error::new(
                    std::io::ErrorKind::NotFound,
                    format!("no such host {host}"),
                )),
            }
        })
    }
}
