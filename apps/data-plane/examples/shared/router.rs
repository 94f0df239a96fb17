//! The server's router with a benchmark's extra routes, served in this
//! process on a free loopback port as `data-plane serve` serves it
//! (TCP_NODELAY, the routes built once for every connection). Shared by the
//! benchmarks through `#[path]`.

use axum::serve::ListenerExt;

/// Serves `app` on 127.0.0.1 and answers its base URL.
pub async fn serve(app: axum::Router) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let listener = listener.tap_io(|tcp| {
        let _ = tcp.set_nodelay(true);
    });
    let app = app.into_make_service();
    tokio::spawn(async move { axum::serve(listener, app).await });
    base
}
