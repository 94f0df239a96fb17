//! HAProxy, as `make setup` installs it from Debian, in front of server
//! processes on loopback, with the configuration the deployment ships
//! (`docker/haproxy.cfg`): what the multi-replica tests and benchmarks
//! reach the servers through.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// How many replicas `docker/haproxy.cfg` names.
pub const REPLICAS: usize = 3;

/// The `haproxy` binary: on `PATH`, else where Debian puts it.
pub fn haproxy() -> Option<PathBuf> {
    let on_path = std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|dir| dir.join("haproxy"))
            .find(|p| p.is_file())
    });
    on_path.or_else(|| {
        let debian = PathBuf::from("/usr/sbin/haproxy");
        debian.is_file().then_some(debian)
    })
}

/// The shipped configuration.
pub fn config() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../docker/haproxy.cfg")
}

/// HAProxy on an address of its own; stopped when dropped.
pub struct Balancer {
    child: Child,
    addr: SocketAddr,
}

impl Balancer {
    /// Starts HAProxy in front of `replicas` (at most [`REPLICAS`]; fewer
    /// fill the configuration's places by repeating the last), its log
    /// (one line a request) appended to `log`; answers once it accepts
    /// connections. Panics, saying how to install it, when HAProxy is
    /// missing.
    pub fn start(replicas: &[SocketAddr], log: &std::path::Path) -> Balancer {
        assert!(
            (1..=REPLICAS).contains(&replicas.len()),
            "the configuration has {REPLICAS} places"
        );
        let binary =
            haproxy().expect("HAProxy is missing: `make setup` installs it (Debian's haproxy)");
        let addr = crate::unused_addr();
        let mut command = Command::new(binary);
        command
            .arg("-db") // stays in the foreground, a child of the test
            .arg("-f")
            .arg(config())
            .env("DATA_PLANE_LB_BIND", addr.to_string())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(
                std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(log)
                    .unwrap(),
            );
        for place in 0..REPLICAS {
            let replica = replicas[place.min(replicas.len() - 1)];
            command.env(
                format!("DATA_PLANE_REPLICA_{}", place + 1),
                replica.to_string(),
            );
        }
        let mut child = command.spawn().unwrap();
        let until = Instant::now() + Duration::from_secs(10);
        while std::net::TcpStream::connect(addr).is_err() {
            if let Some(status) = child.try_wait().unwrap() {
                panic!(
                    "HAProxy exited ({status}); its log: {}",
                    std::fs::read_to_string(log).unwrap_or_default()
                );
            }
            assert!(
                Instant::now() < until,
                "HAProxy did not listen on {addr} in 10 s"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        Balancer { child, addr }
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://host:port`.
    pub fn base(&self) -> String {
        format!("http://{}", self.addr)
    }
}

impl Drop for Balancer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
