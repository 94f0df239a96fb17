//! The SSRF guard as a table: URLs and addresses refused or allowed, with the
//! reason expected, including numeric host forms, IPv6 forms that carry an
//! IPv4 address, names a scripted DNS resolves, and the allow-list. Nothing
//! here connects anywhere: `Fetcher::resolve` decides without a request.

// A failed unwrap is a failed test, with the value in the message.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use data_plane_web::WebError;
use data_plane_web::fetch::{FetchConfig, Fetcher};
use data_plane_web::guard::{self, AllowList};
use data_plane_web::testing::FakeDns;

fn dns() -> FakeDns {
    FakeDns::new()
        .with("public.test", &["93.184.215.14"])
        .with("public6.test", &["2606:4700:4700::1111"])
        .with("evil.test", &["10.0.0.1"])
        .with("meta.test", &["169.254.169.254"])
        .with("mixed.test", &["93.184.215.14", "127.0.0.1"])
        .with("mapped.test", &["::ffff:192.168.0.1"])
        .with("wiki.corp", &["10.9.9.9"])
        .with("other.corp", &["10.9.9.9"])
        .with("docs.intra", &["192.168.5.5"])
        .with("intra", &["192.168.5.5"])
}

fn fetcher(allow: &str) -> Fetcher {
    let config = FetchConfig {
        allow: allow.parse().unwrap(),
        ..FetchConfig::default()
    };
    Fetcher::with_resolver(config, Arc::new(dns()))
}

/// `expected` is `ok`, or `refused: TEXT`, `invalid: TEXT` or `network: TEXT`
/// where TEXT must appear in the error's message.
async fn check(fetcher: &Fetcher, url: &str, expected: &str) {
    let outcome = match guard::parse_url(url) {
        Ok(parsed) => fetcher.resolve(&parsed).await,
        Err(e) => Err(e),
    };
    let got = match &outcome {
        Ok(_) => "ok".to_string(),
        Err(e @ WebError::Blocked { .. }) => format!("refused: {e}"),
        Err(e @ WebError::InvalidUrl { .. }) => format!("invalid: {e}"),
        Err(e @ WebError::Network { .. }) => format!("network: {e}"),
        Err(e) => format!("other: {e}"),
    };
    let (kind, text) = expected.split_once(": ").unwrap_or((expected, ""));
    assert!(
        got.starts_with(kind) && got.contains(text),
        "{url}: expected {expected:?}, got {got:?}"
    );
}

#[tokio::test]
async fn addresses_and_numeric_hosts() {
    let f = fetcher("");
    let cases = [
        // IPv4 special ranges.
        ("http://0.0.0.0/", "refused: \"this network\""),
        ("http://0.1.2.3/", "refused: \"this network\""),
        (
            "http://10.0.0.1/",
            "refused: private network address (10.0.0.0/8)",
        ),
        ("http://10.255.255.255/", "refused: 10.0.0.0/8"),
        ("http://100.64.0.1/", "refused: carrier-grade NAT"),
        ("http://100.127.255.255/", "refused: carrier-grade NAT"),
        ("http://100.100.100.200/", "refused: cloud metadata"),
        (
            "http://127.0.0.1/",
            "refused: 127.0.0.1 is not a public address: loopback",
        ),
        ("http://127.255.255.254:8080/x", "refused: loopback"),
        (
            "http://169.254.169.254/latest/meta-data/",
            "refused: cloud metadata endpoint",
        ),
        (
            "http://169.254.170.2/v2/credentials",
            "refused: cloud metadata endpoint",
        ),
        ("http://169.254.0.1/", "refused: link-local"),
        ("http://172.16.0.1/", "refused: 172.16.0.0/12"),
        ("http://172.31.255.255/", "refused: 172.16.0.0/12"),
        ("http://192.0.0.9/", "refused: 192.0.0.0/24"),
        ("http://192.0.2.1/", "refused: documentation"),
        ("http://192.168.1.1/", "refused: 192.168.0.0/16"),
        ("http://198.18.0.1/", "refused: benchmarking"),
        ("http://198.19.255.255/", "refused: benchmarking"),
        ("http://198.51.100.7/", "refused: documentation"),
        ("http://203.0.113.9/", "refused: documentation"),
        ("http://224.0.0.1/", "refused: multicast"),
        ("http://239.255.255.250/", "refused: multicast"),
        ("http://240.0.0.1/", "refused: reserved"),
        ("http://255.255.255.255/", "refused: broadcast"),
        // Numeric forms the URL standard turns into dotted quads.
        (
            "http://127.1/",
            "refused: 127.0.0.1 is not a public address",
        ),
        (
            "http://2130706433/",
            "refused: 127.0.0.1 is not a public address",
        ),
        (
            "http://0x7f000001/",
            "refused: 127.0.0.1 is not a public address",
        ),
        (
            "http://0177.0.0.1/",
            "refused: 127.0.0.1 is not a public address",
        ),
        (
            "http://0x7f.0.0.1/",
            "refused: 127.0.0.1 is not a public address",
        ),
        (
            "http://017700000001/",
            "refused: 127.0.0.1 is not a public address",
        ),
        (
            "http://3232235777/",
            "refused: 192.168.1.1 is not a public address",
        ),
        (
            "http://0xa9.0xfe.0xa9.0xfe/",
            "refused: 169.254.169.254 is not a public address: cloud metadata",
        ),
        ("http://0251.0376.0251.0376/", "refused: cloud metadata"),
        ("http://169.254.43518/", "refused: cloud metadata"),
        ("http://0/", "refused: 0.0.0.0 is not a public address"),
        // IPv6, and IPv6 forms judged by the IPv4 address they carry.
        ("http://[::]/", "refused: unspecified"),
        ("http://[::1]/", "refused: loopback address (::1)"),
        (
            "http://[::ffff:127.0.0.1]/",
            "refused: loopback address (127.0.0.0/8)",
        ),
        (
            "http://[::ffff:7f00:1]/",
            "refused: loopback address (127.0.0.0/8)",
        ),
        ("http://[::ffff:a9fe:a9fe]/", "refused: cloud metadata"),
        (
            "http://[::127.0.0.1]/",
            "refused: loopback address (127.0.0.0/8)",
        ),
        ("http://[::10.0.0.1]/", "refused: 10.0.0.0/8"),
        ("http://[64:ff9b::a00:1]/", "refused: 10.0.0.0/8"),
        ("http://[64:ff9b:1::1]/", "refused: local-use NAT64"),
        ("http://[2002:a9fe:a9fe::1]/", "refused: cloud metadata"),
        ("http://[2002:c0a8:101::1]/", "refused: 192.168.0.0/16"),
        ("http://[2001::1]/", "refused: Teredo"),
        (
            "http://[2001:db8::1]/",
            "refused: documentation address (2001:db8::/32)",
        ),
        ("http://[100::1]/", "refused: discard-only"),
        ("http://[fc00::1]/", "refused: unique local"),
        ("http://[fd12:3456::1]/", "refused: unique local"),
        ("http://[fd00:ec2::254]/", "refused: cloud metadata"),
        (
            "http://[fe80::1]/",
            "refused: link-local address (fe80::/10)",
        ),
        ("http://[fec0::1]/", "refused: site-local"),
        ("http://[ff02::1]/", "refused: multicast address (ff00::/8)"),
        // Public addresses, including neighbours of refused ranges.
        ("http://93.184.215.14/", "ok"),
        ("https://1.1.1.1/dns-query", "ok"),
        ("http://134744072/", "ok"),
        ("http://9.255.255.255/", "ok"),
        ("http://11.0.0.0/", "ok"),
        ("http://100.63.255.255/", "ok"),
        ("http://100.128.0.0/", "ok"),
        ("http://126.255.255.255/", "ok"),
        ("http://128.0.0.0/", "ok"),
        ("http://169.253.255.255/", "ok"),
        ("http://169.255.0.0/", "ok"),
        ("http://172.15.255.255/", "ok"),
        ("http://172.32.0.0/", "ok"),
        ("http://192.167.255.255/", "ok"),
        ("http://192.169.0.0/", "ok"),
        ("http://198.20.0.0/", "ok"),
        ("http://223.255.255.255/", "ok"),
        ("http://[2606:4700:4700::1111]/", "ok"),
        ("http://[::ffff:8.8.8.8]/", "ok"),
        ("http://[64:ff9b::808:808]/", "ok"),
        ("http://[2002:808:808::1]/", "ok"),
    ];
    for (url, expected) in cases {
        check(&f, url, expected).await;
    }
}

#[tokio::test]
async fn url_forms() {
    let f = fetcher("");
    let cases = [
        (
            "ftp://public.test/file",
            "invalid: scheme \"ftp\" is not allowed",
        ),
        ("file:///etc/passwd", "invalid: scheme \"file\""),
        ("gopher://public.test/", "invalid: scheme \"gopher\""),
        ("javascript:alert(1)", "invalid: scheme \"javascript\""),
        ("data:text/html,<h1>hi</h1>", "invalid: scheme \"data\""),
        ("ws://public.test/", "invalid: scheme \"ws\""),
        ("http://user:secret@public.test/", "invalid: credentials"),
        ("http://user@public.test/", "invalid: credentials"),
        ("https://:pw@public.test/", "invalid: credentials"),
        ("public.test/page", "invalid: relative URL without a base"),
        ("http://", "invalid: empty host"),
        ("http://1.2.3.4.5/", "invalid"),
        ("http://[::1/", "invalid"),
        (
            "http://localhost/",
            "refused: localhost is a loopback host name",
        ),
        ("http://LOCALHOST./admin", "refused: loopback host name"),
        ("http://app.localhost/", "refused: loopback host name"),
        (
            "http://metadata.google.internal/computeMetadata/v1/",
            "refused: cloud metadata",
        ),
        ("http://metadata.goog/", "refused: cloud metadata"),
        ("  https://public.test/page#section  ", "ok"),
        ("HTTP://PUBLIC.TEST/", "ok"),
    ];
    for (url, expected) in cases {
        check(&f, url, expected).await;
    }
}

#[tokio::test]
async fn names_are_judged_by_every_address_they_resolve_to() {
    let f = fetcher("");
    let cases = [
        ("http://public.test/", "ok"),
        ("https://public6.test/", "ok"),
        (
            "http://evil.test/",
            "refused: evil.test resolves to 10.0.0.1, which is not a public address: private network",
        ),
        (
            "http://meta.test/latest/meta-data/",
            "refused: meta.test resolves to 169.254.169.254",
        ),
        (
            "http://mixed.test/",
            "refused: mixed.test resolves to 127.0.0.1",
        ),
        (
            "http://mapped.test/",
            "refused: mapped.test resolves to ::ffff:192.168.0.1, which is not a public address",
        ),
        (
            "http://nowhere.test/",
            "network: cannot resolve nowhere.test",
        ),
    ];
    for (url, expected) in cases {
        check(&f, url, expected).await;
    }
}

#[tokio::test]
async fn the_allow_list_opens_named_hosts_and_networks_only() {
    let f = fetcher("127.0.0.1, 10.1.0.0/16, wiki.corp, *.intra, [fd00::1]");
    let cases = [
        ("http://127.0.0.1:8080/", "ok"),
        ("http://[::ffff:127.0.0.1]/", "ok"),
        ("http://127.0.0.2/", "refused: loopback"),
        ("http://10.1.2.3/", "ok"),
        ("http://10.2.0.1/", "refused: 10.0.0.0/8"),
        ("http://[fd00::1]/", "ok"),
        ("http://[fd00::2]/", "refused: unique local"),
        ("http://wiki.corp/", "ok"),
        ("http://WIKI.corp./", "ok"),
        (
            "http://other.corp/",
            "refused: other.corp resolves to 10.9.9.9",
        ),
        ("http://docs.intra/", "ok"),
        ("http://intra/", "refused: intra resolves to 192.168.5.5"),
        ("http://169.254.169.254/", "refused: cloud metadata"),
        ("http://localhost/", "refused: loopback host name"),
        ("ftp://wiki.corp/", "invalid: scheme"),
    ];
    for (url, expected) in cases {
        check(&f, url, expected).await;
    }
}

#[test]
fn allow_list_entries_are_checked_when_read() {
    let check = |raw: &str, expected: Result<(), &str>| {
        let got = raw
            .parse::<AllowList>()
            .map(|_| ())
            .map_err(|e| e.to_string());
        match expected {
            Ok(()) => assert!(got.is_ok(), "{raw:?}: {got:?}"),
            Err(text) => {
                let message = got.expect_err(raw);
                assert!(message.contains(text), "{raw:?}: {message}");
            }
        }
    };
    check("", Ok(()));
    check(" , ", Ok(()));
    check("127.0.0.1,::1,10.0.0.0/8,fd00::/8,wiki.corp,*.corp", Ok(()));
    check("[fd00::]/8", Ok(()));
    check("10.0.0.0/33", Err("\"10.0.0.0/33\": not a CIDR network"));
    check("wiki corp", Err("\"wiki corp\": not a host name"));
    check("http://wiki.corp/", Err("not a host name"));
    check("wiki.corp:8080", Err("not a host name"));
    check("*.", Err("not a host name"));
    assert!("".parse::<AllowList>().unwrap().is_empty());
}
