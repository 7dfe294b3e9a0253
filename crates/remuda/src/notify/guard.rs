//! Which webhook targets a dispatcher may reach. Unless `allow_private_targets` is set, a
//! target whose host is, or resolves to, a loopback, private, link-local (cloud metadata at
//! 169.254.169.254 included), shared, unspecified, multicast or otherwise reserved address is
//! refused: a job's submitter must not make the worker call into its own network. The
//! addresses checked are the ones connected to (the HTTP client resolves through
//! [`Resolver`]), so a name that changes its answer between check and connect gains nothing.

use super::NotificationConfig;
use reqwest::dns::{Addrs, Name, Resolve, Resolving};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;

/// Why an address may not be targeted, or `None` when it may.
pub(crate) fn forbidden(ip: IpAddr) -> Option<&'static str> {
    match ip {
        IpAddr::V4(v4) => forbidden_v4(v4),
        IpAddr::V6(v6) => match v6.to_ipv4_mapped().or_else(|| embedded_v4(v6)) {
            Some(v4) => forbidden_v4(v4),
            None => forbidden_v6(v6),
        },
    }
}

fn forbidden_v4(ip: Ipv4Addr) -> Option<&'static str> {
    let [a, b, ..] = ip.octets();
    if ip.is_loopback() {
        Some("a loopback address")
    } else if ip.is_private() {
        Some("a private address")
    } else if ip.is_link_local() {
        Some("a link-local address (cloud metadata services live there)")
    } else if a == 100 && (64..128).contains(&b) {
        Some("a shared (carrier-grade NAT) address")
    } else if ip.is_unspecified() || a == 0 {
        Some("an unspecified address")
    } else if ip.is_multicast() || ip.is_broadcast() || a >= 240 {
        Some("a multicast or reserved address")
    } else if (a == 192 && b == 0 && ip.octets()[2] == 0) || (a == 198 && (b & 0xfe) == 18) {
        Some("a reserved (protocol assignment or benchmarking) address")
    } else {
        None
    }
}

fn forbidden_v6(ip: Ipv6Addr) -> Option<&'static str> {
    let first = ip.segments()[0];
    if ip.is_loopback() {
        Some("a loopback address")
    } else if ip.is_unspecified() {
        Some("an unspecified address")
    } else if first & 0xfe00 == 0xfc00 {
        Some("a private (unique local) address")
    } else if first & 0xffc0 == 0xfe80 {
        Some("a link-local address")
    } else if first & 0xffc0 == 0xfec0 {
        Some("a site-local address")
    } else if ip.is_multicast() {
        Some("a multicast address")
    } else if first == 0x64 && ip.segments()[1] == 0xff9b {
        // NAT64 for local use (64:ff9b:1::/48) or of an unknown form
        Some("a NAT64 address for local use")
    } else {
        None
    }
}

/// The IPv4 address an IPv6 one carries: IPv4-compatible (`::a.b.c.d`), NAT64
/// (`64:ff9b::a.b.c.d`) or 6to4 (`2002:aabb:ccdd::/48`).
fn embedded_v4(ip: Ipv6Addr) -> Option<Ipv4Addr> {
    let s = ip.segments();
    let v4 = |hi: u16, lo: u16| Ipv4Addr::new((hi >> 8) as u8, hi as u8, (lo >> 8) as u8, lo as u8);
    let compatible = s[..6].iter().all(|&x| x == 0) && (s[6] != 0 || s[7] > 1);
    let nat64 = s[0] == 0x64 && s[1] == 0xff9b && s[2..6].iter().all(|&x| x == 0);
    if compatible || nat64 {
        Some(v4(s[6], s[7]))
    } else if s[0] == 0x2002 {
        Some(v4(s[1], s[2]))
    } else {
        None
    }
}

/// A refusal: the target's host, the address and why.
#[derive(Debug)]
pub(crate) struct Refused(pub String);

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Refused {}

/// Checks a target URL's host against the allow-list, and, when it is an address, the
/// address itself (names are checked as they resolve, by [`Resolver`]).
pub(crate) fn check_url(config: &NotificationConfig, url: &reqwest::Url) -> Result<(), Refused> {
    let host = url.host_str().unwrap_or_default();
    if !config.allowed_hosts.is_empty()
        && !config
            .allowed_hosts
            .iter()
            .any(|h| h.trim().eq_ignore_ascii_case(host))
    {
        return Err(Refused(format!(
            "host {host} is not in notifications allowed_hosts ({})",
            config.allowed_hosts.join(", ")
        )));
    }
    if config.allow_private_targets {
        return Ok(());
    }
    let literal = match url.host() {
        Some(url::Host::Ipv4(v4)) => Some(IpAddr::V4(v4)),
        Some(url::Host::Ipv6(v6)) => Some(IpAddr::V6(v6)),
        _ => None,
    };
    match literal.and_then(|ip| forbidden(ip).map(|why| (ip, why))) {
        Some((ip, why)) => Err(refusal(host, ip, why)),
        None => Ok(()),
    }
}

fn refusal(host: &str, ip: IpAddr, why: &str) -> Refused {
    Refused(format!(
        "refused: {host} is {ip}, {why}; set notifications allow_private_targets = true to allow it"
    ))
}

/// The HTTP client's name resolution: the system's, with forbidden addresses refused.
pub(crate) struct Resolver {
    pub allow_private: bool,
}

impl Resolve for Resolver {
    fn resolve(&self, name: Name) -> Resolving {
        let allow_private = self.allow_private;
        Box::pin(async move {
            let host = name.as_str().to_string();
            let found: Vec<SocketAddr> =
                tokio::net::lookup_host((host.as_str(), 0)).await?.collect();
            if !allow_private {
                if let Some((ip, why)) = found
                    .iter()
                    .find_map(|a| forbidden(a.ip()).map(|why| (a.ip(), why)))
                {
                    let refused: Box<dyn std::error::Error + Send + Sync> =
                        Box::new(refusal(&host, ip, why));
                    return Err(refused);
                }
            }
            let addrs: Addrs = Box::new(found.into_iter());
            Ok(addrs)
        })
    }
}

/// The resolver for a configuration.
pub(crate) fn resolver(config: &NotificationConfig) -> Arc<Resolver> {
    Arc::new(Resolver {
        allow_private: config.allow_private_targets,
    })
}

/// The refusal inside a request's error, if that is why it failed.
pub(crate) fn refusal_in(error: &(dyn std::error::Error + 'static)) -> Option<String> {
    let mut source = Some(error);
    while let Some(e) = source {
        if let Some(refused) = e.downcast_ref::<Refused>() {
            return Some(refused.0.clone());
        }
        source = e.source();
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_allow_list_admits_only_its_hosts_and_private_literals_stay_refused() {
        let config = NotificationConfig {
            allowed_hosts: vec!["hooks.example.com".into()],
            ..NotificationConfig::default()
        };
        let url = |u: &str| reqwest::Url::parse(u).expect("url");
        assert!(check_url(&config, &url("https://HOOKS.example.com/x")).is_ok());
        let refused =
            check_url(&config, &url("https://evil.example.net/x")).expect_err("not listed");
        assert!(
            refused.0.contains("not in notifications allowed_hosts"),
            "{refused}"
        );
        let open = NotificationConfig::default();
        let refused = check_url(&open, &url("http://[::1]:8080/")).expect_err("loopback");
        assert!(
            refused.0.contains("::1") && refused.0.contains("loopback"),
            "{refused}"
        );
        let allowed = NotificationConfig {
            allow_private_targets: true,
            ..NotificationConfig::default()
        };
        assert!(check_url(&allowed, &url("http://127.0.0.1:8080/")).is_ok());
    }

    #[test]
    fn internal_addresses_are_forbidden_and_public_ones_are_not() {
        for ip in [
            "127.0.0.1",
            "10.1.2.3",
            "172.16.0.1",
            "192.168.1.1",
            "169.254.169.254",
            "100.64.0.1",
            "0.0.0.0",
            "::1",
            "fd00::1",
            "fe80::1",
            "::ffff:127.0.0.1",
            "64:ff9b::a9fe:a9fe",
            "64:ff9b:1::a01:203",
            "::7f00:1",
            "2002:a9fe:a9fe::1",
            "fec0::1",
            "198.18.0.1",
            "192.0.0.8",
        ] {
            let ip: IpAddr = ip.parse().expect("address");
            assert!(forbidden(ip).is_some(), "{ip} should be forbidden");
        }
        for ip in [
            "93.184.215.14",
            "2606:2800:21f:cb07:6820:80da:af6b:8b2c",
            "64:ff9b::5db8:d70e",
            "2002:5db8:d70e::1",
        ] {
            let ip: IpAddr = ip.parse().expect("address");
            assert_eq!(forbidden(ip), None, "{ip}");
        }
    }
}
