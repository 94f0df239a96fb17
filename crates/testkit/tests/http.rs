//! The kit's server as a client on a bare socket sees it: the request it
//! parsed, the response's framing, and what it reports when a body is cut.

// Tests fail loudly on the first broken step; that is what unwrap is for here.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::{Arc, Mutex};
use std::time::Duration;

use data_plane_testkit::http::{Chunk, Handler, Request, Response, Server};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Sends `request` as is and reads until the server closes.
async fn exchange(server: &Server, request: &str) -> String {
    let mut socket = TcpStream::connect(server.addr()).await.unwrap();
    socket.write_all(request.as_bytes()).await.unwrap();
    let mut out = Vec::new();
    socket.read_to_end(&mut out).await.unwrap();
    String::from_utf8(out).unwrap()
}

#[derive(Default)]
struct Recorder {
    requests: Mutex<Vec<Request>>,
    finished: Mutex<Vec<bool>>,
}

struct Fake(Arc<Recorder>, fn() -> Response);

impl Handler for Fake {
    fn respond(&self, request: Request) -> Response {
        self.0.requests.lock().unwrap().push(request);
        (self.1)()
    }

    fn finished(&self, complete: bool) {
        self.0.finished.lock().unwrap().push(complete);
    }
}

#[tokio::test]
async fn reads_the_request_and_frames_a_whole_body() {
    let recorder = Arc::new(Recorder::default());
    let server = Server::start(Fake(recorder.clone(), || {
        Response::whole(201, vec![("x-fake".into(), "yes".into())], "made")
    }))
    .await;
    let reply = exchange(
        &server,
        "POST /things?a=1 HTTP/1.1\r\nHost: example.test\r\nContent-Length: 5\r\n\r\nhello",
    )
    .await;
    assert_eq!(
        reply,
        "HTTP/1.1 201 Scripted\r\nx-fake: yes\r\ncontent-length: 4\r\nconnection: close\r\n\r\nmade"
    );
    let request = recorder.requests.lock().unwrap()[0].clone();
    assert_eq!(request.method, "POST");
    assert_eq!(request.path, "/things?a=1");
    assert_eq!(request.header("host"), Some("example.test"));
    assert_eq!(request.body, b"hello");
    assert_eq!(*recorder.finished.lock().unwrap(), [true]);
}

#[tokio::test]
async fn chunks_arrive_in_order_and_a_drop_cuts_the_body() {
    let recorder = Arc::new(Recorder::default());
    let server = Server::start(Fake(recorder.clone(), || {
        Response::chunks(
            200,
            vec![("content-length".into(), "100".into())],
            [
                Chunk::Bytes(b"one ".to_vec()),
                Chunk::Pause(Duration::from_millis(20)),
                Chunk::Bytes(b"two".to_vec()),
                Chunk::Drop,
                Chunk::Bytes(b"never".to_vec()),
            ],
        )
    }))
    .await;
    let reply = exchange(&server, "GET / HTTP/1.1\r\n\r\n").await;
    assert!(reply.starts_with("HTTP/1.1 200 OK\r\n"), "{reply}");
    assert!(reply.ends_with("\r\n\r\none two"), "{reply}");
    assert_eq!(*recorder.finished.lock().unwrap(), [false]);
}
