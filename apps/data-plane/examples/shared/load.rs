//! wrk as the benchmarks drive it: a Lua script that sends one request
//! (method, bearer token, JSON body) and prints p50, p99, requests/s,
//! failures and requests in one line, and the run that reads it back.
//! Shared by the benchmarks through `#[path]`.

/// What one wrk run measured.
pub struct Figures {
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub rps: f64,
    pub requests: f64,
}

/// Runs wrk against `url` and reads the figures its Lua `done` prints.
pub fn wrk(url: &str, script: &std::path::Path, connections: u32, seconds: u64) -> Figures {
    let threads = if connections < 2 { 1 } else { 2 };
    let out = std::process::Command::new("wrk")
        .args([
            format!("-t{threads}"),
            format!("-c{connections}"),
            format!("-d{seconds}s"),
            "-s".into(),
            script.display().to_string(),
            url.into(),
        ])
        .output()
        .expect("wrk runs (benches/calls.sh installs it)");
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text
        .lines()
        .find_map(|l| l.strip_prefix("RESULT "))
        .unwrap_or_else(|| panic!("wrk printed no result: {text}"));
    let v: Vec<f64> = line
        .split_whitespace()
        .map(|x| x.parse().unwrap())
        .collect();
    assert_eq!(v.len(), 5, "wrk printed {line}");
    assert_eq!(v[3], 0.0, "{url}: {} requests failed or were not 200", v[3]);
    Figures {
        p50_ms: v[0],
        p99_ms: v[1],
        rps: v[2],
        requests: v[4],
    }
}

/// A wrk script sending `method` with the headers and body, and printing
/// p50, p99, requests/s, failures (non-2xx included) and requests in one line.
pub fn script(
    dir: &std::path::Path,
    name: &str,
    method: &str,
    token: Option<&str>,
    body: Option<&str>,
) -> std::path::PathBuf {
    let mut lua = format!("wrk.method = '{method}'\n");
    if let Some(token) = token {
        lua.push_str(&format!(
            "wrk.headers['Authorization'] = 'Bearer {token}'\n"
        ));
    }
    if let Some(body) = body {
        lua.push_str("wrk.headers['Content-Type'] = 'application/json'\n");
        lua.push_str(&format!("wrk.body = [==[{body}]==]\n"));
    }
    lua.push_str(
        r#"local failed = 0
response = function(status, headers, body)
  if status ~= 200 or string.find(body, '"success":false', 1, true) then failed = failed + 1 end
end
done = function(summary, latency, requests)
  local e = summary.errors
  io.write(string.format("RESULT %.3f %.3f %.1f %d %d\n",
    latency:percentile(50) / 1000, latency:percentile(99) / 1000,
    summary.requests / (summary.duration / 1e6),
    e.connect + e.read + e.write + e.status + e.timeout + failed,
    summary.requests))
end
"#,
    );
    let path = dir.join(format!("{name}.lua"));
    std::fs::write(&path, lua).unwrap();
    path
}
