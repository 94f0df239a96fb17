//! The SSRF guard: which URLs and addresses may be fetched.
//!
//! Three layers, each naming its reason: the URL's form ([`check_url`]:
//! scheme, credentials, host), the host name ([`blocked_name`]: names that
//! only ever mean this machine or a cloud's metadata service), and every
//! address the host resolves to ([`classify`]). A deployment that must reach
//! internal hosts lists them in an [`AllowList`].

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::str::FromStr;

use ipnet::IpNet;
use url::{Host, Url};

use crate::WebError;

/// Why an address may not be fetched, or `None` when it is an ordinary
/// public unicast address.
///
/// IPv6 forms that embed an IPv4 address (IPv4-mapped, IPv4-compatible,
/// NAT64, 6to4) are judged by that IPv4 address, so `::ffff:10.0.0.1` is as
/// private as `10.0.0.1`.
pub fn classify(ip: IpAddr) -> Option<&'static str> {
    match ip {
        IpAddr::V4(v4) => classify_v4(v4),
        IpAddr::V6(v6) => classify_v6(v6),
    }
}

/// Cloud metadata services: AWS, GCP, Azure, OpenStack and Oracle share
/// 169.254.169.254; ECS task metadata, Alibaba and AWS's IPv6 endpoint differ.
const METADATA_V4: [Ipv4Addr; 3] = [
    Ipv4Addr::new(169, 254, 169, 254),
    Ipv4Addr::new(169, 254, 170, 2),
    Ipv4Addr::new(100, 100, 100, 200),
];
const METADATA_V6: [Ipv6Addr; 1] = [Ipv6Addr::new(0xfd00, 0x0ec2, 0, 0, 0, 0, 0, 0x254)];

fn in_v4(ip: Ipv4Addr, net: [u8; 4], prefix: u32) -> bool {
    let mask = if prefix == 0 {
        0
    } else {
        u32::MAX << (32 - prefix)
    };
    u32::from(ip) & mask == u32::from(Ipv4Addr::from(net)) & mask
}

fn in_v6(ip: Ipv6Addr, net: Ipv6Addr, prefix: u32) -> bool {
    let mask = if prefix == 0 {
        0
    } else {
        u128::MAX << (128 - prefix)
    };
    u128::from(ip) & mask == u128::from(net) & mask
}

fn classify_v4(ip: Ipv4Addr) -> Option<&'static str> {
    if METADATA_V4.contains(&ip) {
        return Some("cloud metadata endpoint");
    }
    let table: [([u8; 4], u32, &'static str); 16] = [
        ([0, 0, 0, 0], 8, "\"this network\" address (0.0.0.0/8)"),
        ([10, 0, 0, 0], 8, "private network address (10.0.0.0/8)"),
        (
            [100, 64, 0, 0],
            10,
            "shared carrier-grade NAT address (100.64.0.0/10)",
        ),
        ([127, 0, 0, 0], 8, "loopback address (127.0.0.0/8)"),
        ([169, 254, 0, 0], 16, "link-local address (169.254.0.0/16)"),
        (
            [172, 16, 0, 0],
            12,
            "private network address (172.16.0.0/12)",
        ),
        (
            [192, 0, 0, 0],
            24,
            "IETF protocol assignment (192.0.0.0/24)",
        ),
        ([192, 0, 2, 0], 24, "documentation address (192.0.2.0/24)"),
        (
            [192, 88, 99, 0],
            24,
            "6to4 relay anycast address (192.88.99.0/24)",
        ),
        (
            [192, 168, 0, 0],
            16,
            "private network address (192.168.0.0/16)",
        ),
        ([198, 18, 0, 0], 15, "benchmarking address (198.18.0.0/15)"),
        (
            [198, 51, 100, 0],
            24,
            "documentation address (198.51.100.0/24)",
        ),
        (
            [203, 0, 113, 0],
            24,
            "documentation address (203.0.113.0/24)",
        ),
        ([224, 0, 0, 0], 4, "multicast address (224.0.0.0/4)"),
        (
            [255, 255, 255, 255],
            32,
            "broadcast address (255.255.255.255)",
        ),
        ([240, 0, 0, 0], 4, "reserved address (240.0.0.0/4)"),
    ];
    table
        .iter()
        .find(|(net, prefix, _)| in_v4(ip, *net, *prefix))
        .map(|(_, _, reason)| *reason)
}

fn classify_v6(ip: Ipv6Addr) -> Option<&'static str> {
    if METADATA_V6.contains(&ip) {
        return Some("cloud metadata endpoint");
    }
    if ip.is_unspecified() {
        return Some("unspecified address (::)");
    }
    if ip.is_loopback() {
        return Some("loopback address (::1)");
    }
    let segments = ip.segments();
    let octets = ip.octets();
    let tail_v4 = Ipv4Addr::new(octets[12], octets[13], octets[14], octets[15]);
    // Forms that carry an IPv4 address reach that IPv4 host, so they are
    // judged by it.
    if let Some(v4) = ip.to_ipv4_mapped() {
        return classify_v4(v4);
    }
    if segments[..6] == [0; 6] {
        // IPv4-compatible (::a.b.c.d), deprecated but still routed by some stacks.
        return classify_v4(tail_v4);
    }
    if in_v6(ip, Ipv6Addr::new(0x64, 0xff9b, 0, 0, 0, 0, 0, 0), 96) {
        return classify_v4(tail_v4);
    }
    if in_v6(ip, Ipv6Addr::new(0x2002, 0, 0, 0, 0, 0, 0, 0), 16) {
        let embedded = Ipv4Addr::new(octets[2], octets[3], octets[4], octets[5]);
        return classify_v4(embedded);
    }
    let table: [(Ipv6Addr, u32, &'static str); 9] = [
        (
            Ipv6Addr::new(0x64, 0xff9b, 1, 0, 0, 0, 0, 0),
            48,
            "local-use NAT64 address (64:ff9b:1::/48)",
        ),
        (
            Ipv6Addr::new(0x100, 0, 0, 0, 0, 0, 0, 0),
            64,
            "discard-only address (100::/64)",
        ),
        (
            Ipv6Addr::new(0x2001, 0, 0, 0, 0, 0, 0, 0),
            32,
            "Teredo tunnel address (2001::/32)",
        ),
        (
            Ipv6Addr::new(0x2001, 0x2, 0, 0, 0, 0, 0, 0),
            48,
            "benchmarking address (2001:2::/48)",
        ),
        (
            Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 0),
            32,
            "documentation address (2001:db8::/32)",
        ),
        (
            Ipv6Addr::new(0xfc00, 0, 0, 0, 0, 0, 0, 0),
            7,
            "unique local address (fc00::/7)",
        ),
        (
            Ipv6Addr::new(0xfe80, 0, 0, 0, 0, 0, 0, 0),
            10,
            "link-local address (fe80::/10)",
        ),
        (
            Ipv6Addr::new(0xfec0, 0, 0, 0, 0, 0, 0, 0),
            10,
            "site-local address (fec0::/10)",
        ),
        (
            Ipv6Addr::new(0xff00, 0, 0, 0, 0, 0, 0, 0),
            8,
            "multicast address (ff00::/8)",
        ),
    ];
    table
        .iter()
        .find(|(net, prefix, _)| in_v6(ip, *net, *prefix))
        .map(|(_, _, reason)| *reason)
}

/// Host names refused before any lookup: they name this machine or a cloud
/// metadata service wherever they are resolved.
pub fn blocked_name(host: &str) -> Option<&'static str> {
    let host = normalise_name(host);
    if host == "localhost" || host.ends_with(".localhost") {
        return Some("loopback host name");
    }
    if matches!(
        host.as_str(),
        "metadata.google.internal" | "metadata.goog" | "metadata" | "instance-data"
    ) || host.ends_with(".metadata.google.internal")
    {
        return Some("cloud metadata endpoint");
    }
    None
}

fn normalise_name(host: &str) -> String {
    host.trim_end_matches('.').to_ascii_lowercase()
}

/// The host of a URL that passed [`check_url`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// An address written in the URL (in any numeric form the URL standard
    /// accepts: `http://2130706433/` is `127.0.0.1`).
    Ip(IpAddr),
    /// A name to resolve, lowercase as the URL standard leaves it.
    Name(String),
}

/// Checks a URL's form: http or https, no credentials, a host. Returns what
/// to resolve. Says nothing yet about where the host leads.
pub fn check_url(url: &Url) -> Result<Target, WebError> {
    let invalid = |reason: &str| WebError::InvalidUrl {
        url: url.to_string(),
        reason: reason.to_string(),
    };
    match url.scheme() {
        "http" | "https" => {}
        other => {
            return Err(invalid(&format!(
                "scheme {other:?} is not allowed, only http and https"
            )));
        }
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err(invalid("credentials in the url are not allowed"));
    }
    match url.host() {
        None => Err(invalid("the url has no host")),
        Some(Host::Ipv4(v4)) => Ok(Target::Ip(IpAddr::V4(v4))),
        Some(Host::Ipv6(v6)) => Ok(Target::Ip(IpAddr::V6(v6))),
        Some(Host::Domain("")) => Err(invalid("the url has no host")),
        Some(Host::Domain(name)) => Ok(Target::Name(name.to_string())),
    }
}

/// Parses a URL as the fetcher does, with the reason when it does not parse.
pub fn parse_url(raw: &str) -> Result<Url, WebError> {
    Url::parse(raw.trim()).map_err(|e| WebError::InvalidUrl {
        url: raw.to_string(),
        reason: e.to_string(),
    })
}

/// Hosts and networks a deployment allows despite the guard, from
/// `DATA_PLANE_FETCH_ALLOW`: comma-separated host names (`wiki.corp`, or
/// `*.corp` for every name under it), addresses (`10.1.2.3`) and CIDR
/// networks (`10.0.0.0/8`, `fd00::/8`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AllowList {
    names: Vec<String>,
    suffixes: Vec<String>,
    nets: Vec<IpNet>,
}

impl AllowList {
    /// Allows nothing: the guard's full rules apply.
    pub fn none() -> AllowList {
        AllowList::default()
    }

    /// Whether the host name is listed; a listed name is fetched whatever
    /// addresses it resolves to (the deployment vouches for it).
    pub fn allows_name(&self, host: &str) -> bool {
        let host = normalise_name(host);
        self.names.contains(&host)
            || self
                .suffixes
                .iter()
                .any(|s| host.len() > s.len() && host.ends_with(s.as_str()))
    }

    /// Whether the address lies in a listed network.
    pub fn allows_ip(&self, ip: IpAddr) -> bool {
        let ip = ip.to_canonical();
        self.nets.iter().any(|n| n.contains(&ip))
    }

    pub fn is_empty(&self) -> bool {
        self.names.is_empty() && self.suffixes.is_empty() && self.nets.is_empty()
    }
}

impl FromStr for AllowList {
    type Err = WebError;

    fn from_str(s: &str) -> Result<AllowList, WebError> {
        let mut list = AllowList::default();
        for entry in s.split(',').map(str::trim).filter(|e| !e.is_empty()) {
            let bad = |reason: &str| {
                WebError::Config(format!("fetch allow-list entry {entry:?}: {reason}"))
            };
            if entry
                .split_once('/')
                .is_some_and(|(addr, _)| addr.trim_matches(['[', ']']).parse::<IpAddr>().is_ok())
            {
                let (addr, prefix) = entry.split_once('/').unwrap_or((entry, ""));
                let net: IpNet = format!("{}/{prefix}", addr.trim_matches(['[', ']']))
                    .parse()
                    .map_err(|_| bad("not a CIDR network such as 10.0.0.0/8"))?;
                list.nets.push(net.trunc());
            } else if let Ok(ip) = entry.trim_matches(['[', ']']).parse::<IpAddr>() {
                list.nets.push(IpNet::from(ip.to_canonical()));
            } else if let Some(rest) = entry.strip_prefix("*.") {
                let name = valid_name(rest).ok_or_else(|| bad("not a host name"))?;
                list.suffixes.push(format!(".{name}"));
            } else {
                let name = valid_name(entry).ok_or_else(|| bad("not a host name"))?;
                list.names.push(name);
            }
        }
        Ok(list)
    }
}

/// A host name as the URL standard would normalise it, or `None` when it is
/// not one.
fn valid_name(raw: &str) -> Option<String> {
    let url = Url::parse(&format!("http://{raw}/")).ok()?;
    match url.host() {
        Some(Host::Domain(d)) if !d.is_empty() && url.port().is_none() && url.path() == "/" => {
            Some(normalise_name(d))
        }
        _ => None,
    }
}

/// Checks one address a URL leads to; `Ok` when it is public or allowed.
pub fn check_ip(url: &Url, ip: IpAddr, allow: &AllowList) -> Result<(), WebError> {
    if allow.allows_ip(ip) {
        return Ok(());
    }
    match classify(ip) {
        None => Ok(()),
        Some(reason) => Err(WebError::Blocked {
            url: url.to_string(),
            reason: format!("{ip} is not a public address: {reason}"),
        }),
    }
}
