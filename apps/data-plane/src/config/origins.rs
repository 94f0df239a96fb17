//! Which browser origins may call `/mcp` (docs/mcp.md, "Browsers and
//! origins"): a request whose `Origin` is not among them is refused 403.

/// The origins a deployment allows when it names none: pages served from
/// this machine, on any port. A deployment behind its own name lists its
/// front ends' origins instead.
pub const LOOPBACK_ORIGINS: [&str; 6] = [
    "http://localhost:*",
    "http://127.0.0.1:*",
    "http://[::1]:*",
    "https://localhost:*",
    "https://127.0.0.1:*",
    "https://[::1]:*",
];

/// `DATA_PLANE_ALLOWED_ORIGINS` read: empty, the loopback origins; `*`,
/// any origin (`None`: no check); else a comma-separated list of
/// `scheme://host[:port]` entries (`:*` for any port, `null` for the
/// browser's opaque origin), each checked here so that a typo stops
/// start-up instead of silently refusing a front end.
pub fn allowed_origins(value: &str) -> anyhow::Result<Option<Vec<String>>> {
    let value = value.trim();
    if value == "*" {
        return Ok(None);
    }
    if value.is_empty() {
        return Ok(Some(LOOPBACK_ORIGINS.map(String::from).to_vec()));
    }
    let mut origins = Vec::new();
    for entry in value.split(',').map(str::trim).filter(|e| !e.is_empty()) {
        origins.push(origin(entry).map_err(|why| {
            anyhow::anyhow!("DATA_PLANE_ALLOWED_ORIGINS: {entry:?} is not an origin: {why}")
        })?);
    }
    anyhow::ensure!(
        !origins.is_empty(),
        "DATA_PLANE_ALLOWED_ORIGINS names no origin (leave it unset for the loopback origins, or `*` for any)"
    );
    Ok(Some(origins))
}

/// One entry, lower-cased: `null`, or a scheme, a host and a port (a
/// number or `*`), with nothing after them. A port left out is written as
/// the scheme's own (443, 80), so the entry means exactly that origin.
fn origin(entry: &str) -> Result<String, &'static str> {
    let entry = entry.to_ascii_lowercase();
    if entry == "null" {
        return Ok(entry);
    }
    let (scheme, rest) = entry
        .split_once("://")
        .ok_or("it needs a scheme, as in https://app.example.com")?;
    if scheme != "http" && scheme != "https" {
        return Err("only http and https origins are sent by browsers");
    }
    if rest.is_empty() || rest.contains(['/', '?', '#', '@']) {
        return Err("an origin is a scheme, a host and a port, without a path, query or user");
    }
    let any_port = entry.ends_with(":*");
    let base = entry.strip_suffix(":*").unwrap_or(&entry);
    if base.contains('*') {
        return Err("`*` stands only for the port (`:*`); hosts have no wildcards");
    }
    let url = url::Url::parse(base).map_err(|_| "it does not parse as scheme://host[:port]")?;
    let Some(host) = url.host_str() else {
        return Err("it has no host");
    };
    // Written again from the parse: the host as the browser sends it
    // (punycode, an IP address in its usual form), and the port.
    if any_port {
        let (_, last) = base.rsplit_once(':').unwrap_or_default();
        if !last.is_empty() && last.chars().all(|c| c.is_ascii_digit()) {
            return Err("it gives a port and `:*` both");
        }
        return Ok(format!("{scheme}://{host}:*"));
    }
    let port = url.port_or_known_default().ok_or("it has no port")?;
    Ok(format!("{scheme}://{host}:{port}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn origins_are_read_checked_and_defaulted_to_this_machine() {
        let loopback = allowed_origins("").unwrap().unwrap();
        assert!(loopback.contains(&"http://localhost:*".to_string()));
        assert_eq!(
            allowed_origins("http://[::1]:8080,http://Example.org,https://bücher.example:*")
                .unwrap()
                .unwrap(),
            [
                "http://[::1]:8080",
                "http://example.org:80",
                "https://xn--bcher-kva.example:*"
            ]
        );
        assert!(allowed_origins(" * ").unwrap().is_none());
        assert_eq!(
            allowed_origins(
                "https://App.example.com, http://localhost:*,null,https://x.example:8443"
            )
            .unwrap()
            .unwrap(),
            [
                "https://app.example.com:443",
                "http://localhost:*",
                "null",
                "https://x.example:8443"
            ]
        );
        for bad in [
            "app.example.com",
            "ftp://files.example.com",
            "https://app.example.com/chat",
            "https://user@app.example.com",
            "https://",
            "https://app.example.com:port",
            "https://*.example.com",
            "https://a.example:443:*",
            " , ",
        ] {
            let e = allowed_origins(bad).unwrap_err().to_string();
            assert!(e.contains("DATA_PLANE_ALLOWED_ORIGINS"), "{bad}: {e}");
        }
    }
}
