//! Helpers that several crates' tests share, written once: where the local
//! embedding model lives (and, with the `embed` feature, the model itself),
//! a bare-socket HTTP/1.1 server for fakes, HAProxy in front of server
//! processes, and a loopback port where nothing listens.

// Test support reports failure by panicking, like the tests that use it.
#![allow(clippy::unwrap_used, clippy::expect_used)]

pub mod balancer;
pub mod http;
mod model;

#[cfg(feature = "embed")]
pub use model::embedder;
pub use model::model_dir;

use std::net::SocketAddr;

/// An address on 127.0.0.1 where nothing listens (a port just given back).
pub fn unused_addr() -> SocketAddr {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap()
}
