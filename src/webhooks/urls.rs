//! Where a webhook may go: public addresses only, checked again at every attempt.

use std::net::IpAddr;

/// Whether an address is on the public internet (not loopback, private, link-local, shared,
/// documentation, multicast or unspecified).
pub fn is_public(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => {
            let [a, b, ..] = v4.octets();
            !(v4.is_private()
                || v4.is_loopback()
                || v4.is_link_local()
                || v4.is_broadcast()
                || v4.is_documentation()
                || v4.is_unspecified()
                || v4.is_multicast()
                || a == 0
                || (a == 100 && (64..128).contains(&b)) // shared address space (CGNAT)
                || (a == 198 && (b == 18 || b == 19)) // benchmarking
                || a >= 240)
        }
        IpAddr::V6(v6) => {
            if let Some(embedded) = embedded_ipv4(v6) {
                return embedded.iter().all(|v4| is_public(IpAddr::V4(*v4)));
            }
            let [first, second, ..] = v6.segments();
            !(v6.is_loopback()
                || v6.is_unspecified()
                || v6.is_multicast()
                || (first & 0xfe00) == 0xfc00 // unique local
                || (first & 0xffc0) == 0xfe80 // link local
                || (first & 0xffc0) == 0xfec0 // site local (deprecated)
                || (first == 0x0100 && v6.segments()[1..4] == [0, 0, 0]) // discard only
                || (first == 0x0064 && second == 0xff9b) // NAT64 for local use (64:ff9b:1::/48)
                || (first == 0x2001 && second == 0x0db8)) // documentation
        }
    }
}

/// The IPv4 addresses an IPv6 address stands for, where it is one of the forms that carry one:
/// IPv4-compatible (`::a.b.c.d`, deprecated; `::` and `::1` excepted), IPv4-mapped
/// (`::ffff:a.b.c.d`), IPv4-translated (`::ffff:0:a.b.c.d`), NAT64 (`64:ff9b::/96`), 6to4
/// (`2002:AABB:CCDD::/16`) and Teredo (`2001:0::/32`: its server, and its client with the bits
/// inverted). An address of these forms is public only when every address it carries is.
fn embedded_ipv4(v6: std::net::Ipv6Addr) -> Option<Vec<std::net::Ipv4Addr>> {
    use std::net::Ipv4Addr;
    let s = v6.segments();
    let v4 = |hi: u16, lo: u16| Ipv4Addr::from((u32::from(hi) << 16) | u32::from(lo));
    match s {
        [0, 0, 0, 0, 0, 0, 0, 0 | 1] => None,
        [0, 0, 0, 0, 0, 0 | 0xffff, hi, lo] | [0, 0, 0, 0, 0xffff, 0, hi, lo] | [0x64, 0xff9b, 0, 0, 0, 0, hi, lo] => {
            Some(vec![v4(hi, lo)])
        }
        [0x2002, hi, lo, ..] => Some(vec![v4(hi, lo)]),
        [0x2001, 0, server_hi, server_lo, _, _, hi, lo] => Some(vec![v4(server_hi, server_lo), v4(!hi, !lo)]),
        _ => None,
    }
}

/// Checks an endpoint URL as written: `https` (or `http` when private targets are allowed), a host,
/// and, for an IP literal, a public address. Names are checked again at every send.
pub fn check_url(url: &str, allow_private: bool) -> Result<url::Url, String> {
    let u = url::Url::parse(url).map_err(|e| format!("not a URL ({e})"))?;
    match u.scheme() {
        "https" => {}
        "http" if allow_private => {}
        _ => return Err("the URL must start with https://".into()),
    }
    let host = u.host().ok_or("the URL has no host")?;
    let literal = match host {
        url::Host::Ipv4(ip) => Some(IpAddr::V4(ip)),
        url::Host::Ipv6(ip) => Some(IpAddr::V6(ip)),
        url::Host::Domain(_) => None,
    };
    if let Some(ip) = literal
        && !allow_private
        && !is_public(ip)
    {
        return Err(format!("{ip} is not a public address"));
    }
    if !u.username().is_empty() || u.password().is_some() {
        return Err("the URL must not carry credentials".into());
    }
    Ok(u)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_public_addresses_are_public() {
        for ip in [
            "127.0.0.1",
            "10.1.2.3",
            "192.168.0.1",
            "169.254.169.254",
            "100.64.0.1",
            "::1",
            "fd00::1",
            "::ffff:10.0.0.1",
            "0.0.0.0",
            "::127.0.0.1",
            "::7f00:1",
            "::ffff:0:10.0.0.1",
            "64:ff9b::192.168.1.1",
            "64:ff9b:1::1",
            "2002:7f00:1::1",
            "2002:a9fe:a9fe::",
            "2001:0:4136:e378:8000:63bf:f5ff:fffe", // Teredo, client 10.0.0.1
            "2001:0:a00:1::5efe:1:1",               // Teredo, server 10.0.0.1
            "fec0::1",
        ] {
            assert!(!is_public(ip.parse().unwrap()), "{ip}");
        }
        for ip in ["93.184.216.34", "2606:4700::1111", "1.1.1.1", "64:ff9b::1.1.1.1", "2002:101:101::1"] {
            assert!(is_public(ip.parse().unwrap()), "{ip}");
        }
        assert!(check_url("http://example.com/hook", false).is_err());
        assert!(check_url("https://10.0.0.1/hook", false).is_err());
        assert!(check_url("https://user:pw@example.com/", false).is_err());
        assert!(check_url("https://example.com/hook", false).is_ok());
        assert!(check_url("http://127.0.0.1:9/hook", true).is_ok());
    }
}
