//! Configuration from the environment (see docs/configuration.md). Defaults are the documented ones
//! (openapi.yaml: 120 requests a minute, a 24 h idempotency window; a 24 h roll grace).

use std::{env, net::SocketAddr, time::Duration};

use anyhow::{Context as _, bail};

/// Everything the service reads from its environment.
#[derive(Clone, Debug)]
pub struct Config {
    /// `DATABASE_URL`: `sqlite://gymapi.db?mode=rwc` (default) or `postgres://...`.
    pub database_url: String,
    /// `REDIS_URL`: when unset, rate limits and idempotency live in process.
    pub redis_url: Option<String>,
    /// `GYMAPI_REDIS_PREFIX`, default `gymapi:`: prefix of every Redis key, so deployments (and test
    /// runs) can share one Redis.
    pub redis_prefix: String,
    /// `GYMAPI_REDIS_TIMEOUT_MS`, default 250: the longest a request waits for Redis.
    pub redis_timeout: Duration,
    /// `GYMAPI_BIND`, default `127.0.0.1:8080`.
    pub bind: SocketAddr,
    /// `GYMAPI_PUBLIC_URL`: the absolute base of list links, e.g. `https://api.example.com`. When
    /// unset, links are relative (`/api/v1/members?page=2...`), or built from `X-Forwarded-Proto`
    /// and `X-Forwarded-Host` (else `Host`) of a request that came through a trusted proxy.
    pub public_url: Option<String>,
    /// `GYMAPI_TRUSTED_PROXIES`: addresses and networks (`10.0.0.0/8, ::1`) whose forwarding
    /// headers are believed. None by default: a client's `Host` never reaches a link.
    pub trusted_proxies: Vec<Network>,
    /// `GYMAPI_RATE_LIMIT_PER_MINUTE`, default 120.
    pub rate_limit_per_minute: u32,
    /// `GYMAPI_DEVICE_RATE_LIMIT_PER_MINUTE`, default 600: the device API's budget per key.
    pub device_rate_limit_per_minute: u32,
    /// `GYMAPI_DOOR_COMMAND_TTL_SECS`, default 30: how long a door command may be handed out.
    pub door_command_ttl: Duration,
    /// `GYMAPI_PAYMENT_RESERVATION_SECS`, default 120: how long a card terminal holds a payment it
    /// took before it is offered again.
    pub payment_reservation: Duration,
    /// `GYMAPI_IDEMPOTENCY_TTL_SECS`, default 86,400.
    pub idempotency_ttl: Duration,
    /// `GYMAPI_IDEMPOTENCY_LOCK_SECS`, default 60: how long a keyed write that never finished (its
    /// server died) holds its key; a retry meanwhile answers 409.
    pub idempotency_lock: Duration,
    /// `GYMAPI_KEY_ROLL_GRACE_SECS`, default 86,400.
    pub key_roll_grace: Duration,
    /// How often events past the 30 days they are kept are removed: every 10 minutes.
    pub event_sweep_every: Duration,
    /// `GYMAPI_WEBHOOK_ALLOW_PRIVATE=1` allows http and private addresses (development, tests).
    pub webhook_allow_private: bool,
    /// `GYMAPI_WEBHOOK_RETRY_SCHEDULE`, seconds separated by commas.
    pub webhook_retry_schedule: Vec<Duration>,
    /// `GYMAPI_WEBHOOK_DISPATCH=0` keeps `serve` from sending webhooks (when `gymapi worker`
    /// processes do it); default on.
    pub webhook_dispatch: bool,
    /// `GYMAPI_WEBHOOK_POLL_MS`, default 200: how often an idle dispatcher looks for due
    /// deliveries. A write in the same process wakes its dispatcher at once; a `gymapi worker`
    /// learns of the servers' writes by looking.
    pub webhook_poll: Duration,
    /// `GYMAPI_WEBHOOK_PROXY=http://[user:password@]host:port`: the egress proxy webhooks go
    /// through (`CONNECT` to the address the dispatcher checked). Unset: webhooks connect directly,
    /// whatever `HTTPS_PROXY` and the like say.
    pub webhook_proxy: Option<url::Url>,
    /// `GYMAPI_LOG_FORMAT=json` for JSON lines (default: human-readable).
    pub log_json: bool,
    /// `GYMAPI_HEADER_TIMEOUT_SECS`, default 30: how long a connection may take to send a request's
    /// head once the server waits for one (so also how long it may stay idle between requests).
    pub header_timeout: Duration,
    /// `GYMAPI_BODY_TIMEOUT_SECS`, default 30: how long a request's body may take to arrive.
    pub body_timeout: Duration,
    /// `GYMAPI_MAX_CONNECTIONS`, default 10,000 (or what the process's open-file limit leaves): one
    /// more is answered 503 and closed.
    pub max_connections: usize,
    /// `GYMAPI_LONG_POLLS_PER_KEY`, default 100: how many device long polls one key may have
    /// waiting on a server at once.
    pub long_polls_per_key: usize,
    /// `GYMAPI_LONG_POLLS_PER_GYM`, default 500: how many device long polls a gym (its keys, live
    /// and test) may have waiting on a server at once; never more than a tenth of
    /// `max_connections` ([`Config::long_polls_per_gym`]).
    pub long_polls_per_gym: usize,
    /// `GYMAPI_METRICS_TOKEN`: `GET /metrics` wants `Authorization: Bearer <token>`; unset, it
    /// answers 404 (metrics are off).
    pub metrics_token: Option<String>,
}

pub const DEFAULT_DATABASE_URL: &str = "sqlite://gymapi.db?mode=rwc";

impl Default for Config {
    fn default() -> Self {
        Self {
            database_url: DEFAULT_DATABASE_URL.to_string(),
            redis_url: None,
            redis_prefix: "gymapi:".into(),
            redis_timeout: Duration::from_millis(250),
            bind: SocketAddr::from(([127, 0, 0, 1], 8080)),
            public_url: None,
            trusted_proxies: Vec::new(),
            rate_limit_per_minute: 120,
            device_rate_limit_per_minute: 600,
            door_command_ttl: Duration::from_secs(30),
            payment_reservation: Duration::from_secs(120),
            idempotency_ttl: Duration::from_secs(24 * 3600),
            idempotency_lock: Duration::from_secs(60),
            key_roll_grace: Duration::from_secs(24 * 3600),
            event_sweep_every: Duration::from_secs(600),
            webhook_allow_private: false,
            webhook_retry_schedule: [5, 300, 1800, 7200, 18000, 36000, 36000]
                .into_iter()
                .map(Duration::from_secs)
                .collect(),
            webhook_dispatch: true,
            webhook_poll: Duration::from_millis(200),
            webhook_proxy: None,
            log_json: false,
            header_timeout: Duration::from_secs(30),
            body_timeout: Duration::from_secs(30),
            max_connections: 10_000,
            long_polls_per_key: 100,
            long_polls_per_gym: 500,
            metrics_token: None,
        }
    }
}

impl Config {
    /// The long polls a gym may have waiting on a server at once: `long_polls_per_gym`, but never
    /// more than a tenth of the server's connections, so one gym cannot take them all.
    pub fn long_polls_per_gym(&self) -> usize {
        self.long_polls_per_gym.min(self.max_connections / 10).max(1)
    }
}

/// Files kept for everything but client connections: the database's and Redis's connections, the
/// log, the SQLite file.
pub const RESERVED_FILES: usize = 64;

/// The process's soft limit of open files (Linux's `/proc/self/limits`), if it can be read.
pub fn open_files_limit() -> Option<usize> {
    let limits = std::fs::read_to_string("/proc/self/limits").ok()?;
    let line = limits.lines().find(|l| l.starts_with("Max open files"))?;
    line.split_whitespace().nth(3)?.parse().ok()
}

/// The nodes `REDIS_URL` names: one URL, or a Redis Cluster's nodes separated by commas.
pub fn redis_nodes(url: &str) -> Vec<&str> {
    url.split(',').map(str::trim).filter(|u| !u.is_empty()).collect()
}

fn var(name: &str) -> Option<String> {
    env::var(name).ok().filter(|v| !v.trim().is_empty())
}

fn parse_secs(name: &str, value: &str) -> anyhow::Result<Duration> {
    let secs: u64 =
        value.trim().parse().with_context(|| format!("{name} must be a whole number of seconds, got {value:?}"))?;
    Ok(Duration::from_secs(secs))
}

fn positive(name: &str, value: &str) -> anyhow::Result<u32> {
    value
        .trim()
        .parse()
        .ok()
        .filter(|n| *n >= 1)
        .with_context(|| format!("{name} must be a positive integer, got {value:?}"))
}

impl Config {
    /// Reads the environment; every malformed value is an error naming the variable.
    pub fn from_env() -> anyhow::Result<Self> {
        let mut c = Self::default();
        if let Some(v) = var("DATABASE_URL") {
            c.database_url = v;
        }
        c.redis_url = var("REDIS_URL");
        if let Some(v) = var("GYMAPI_REDIS_PREFIX") {
            c.redis_prefix = v;
        }
        if let Some(v) = var("GYMAPI_REDIS_TIMEOUT_MS") {
            let ms: u64 = v
                .trim()
                .parse()
                .ok()
                .filter(|n| *n >= 1)
                .with_context(|| format!("GYMAPI_REDIS_TIMEOUT_MS must be a positive integer, got {v:?}"))?;
            c.redis_timeout = Duration::from_millis(ms);
        }
        if let Some(v) = var("GYMAPI_BIND") {
            c.bind = v.parse().with_context(|| format!("GYMAPI_BIND must be host:port, got {v:?}"))?;
        }
        c.public_url = var("GYMAPI_PUBLIC_URL").map(|u| u.trim_end_matches('/').to_string());
        if let Some(v) = var("GYMAPI_TRUSTED_PROXIES") {
            c.trusted_proxies = v
                .split(',')
                .map(str::trim)
                .filter(|n| !n.is_empty())
                .map(|n| {
                    n.parse().with_context(|| format!("GYMAPI_TRUSTED_PROXIES: {n:?} is not an address or a network"))
                })
                .collect::<anyhow::Result<_>>()?;
        }
        if let Some(v) = var("GYMAPI_RATE_LIMIT_PER_MINUTE") {
            c.rate_limit_per_minute = positive("GYMAPI_RATE_LIMIT_PER_MINUTE", &v)?;
        }
        if let Some(v) = var("GYMAPI_DEVICE_RATE_LIMIT_PER_MINUTE") {
            c.device_rate_limit_per_minute = positive("GYMAPI_DEVICE_RATE_LIMIT_PER_MINUTE", &v)?;
        }
        if let Some(v) = var("GYMAPI_DOOR_COMMAND_TTL_SECS") {
            c.door_command_ttl = Duration::from_secs(positive("GYMAPI_DOOR_COMMAND_TTL_SECS", &v)?.into());
        }
        if let Some(v) = var("GYMAPI_PAYMENT_RESERVATION_SECS") {
            c.payment_reservation = Duration::from_secs(positive("GYMAPI_PAYMENT_RESERVATION_SECS", &v)?.into());
        }
        if let Some(v) = var("GYMAPI_IDEMPOTENCY_TTL_SECS") {
            c.idempotency_ttl = parse_secs("GYMAPI_IDEMPOTENCY_TTL_SECS", &v)?;
        }
        if let Some(v) = var("GYMAPI_IDEMPOTENCY_LOCK_SECS") {
            c.idempotency_lock = Duration::from_secs(positive("GYMAPI_IDEMPOTENCY_LOCK_SECS", &v)?.into());
        }
        if let Some(v) = var("GYMAPI_KEY_ROLL_GRACE_SECS") {
            c.key_roll_grace = parse_secs("GYMAPI_KEY_ROLL_GRACE_SECS", &v)?;
        }
        if let Some(v) = var("GYMAPI_WEBHOOK_ALLOW_PRIVATE") {
            c.webhook_allow_private = matches!(v.trim(), "1" | "true" | "yes");
        }
        if let Some(v) = var("GYMAPI_WEBHOOK_RETRY_SCHEDULE") {
            c.webhook_retry_schedule =
                v.split(',').map(|s| parse_secs("GYMAPI_WEBHOOK_RETRY_SCHEDULE", s)).collect::<anyhow::Result<_>>()?;
            if c.webhook_retry_schedule.is_empty() {
                bail!("GYMAPI_WEBHOOK_RETRY_SCHEDULE must list at least one delay");
            }
        }
        if let Some(v) = var("GYMAPI_WEBHOOK_DISPATCH") {
            c.webhook_dispatch = !matches!(v.trim(), "0" | "false" | "no" | "off");
        }
        if let Some(v) = var("GYMAPI_WEBHOOK_POLL_MS") {
            c.webhook_poll = Duration::from_millis(positive("GYMAPI_WEBHOOK_POLL_MS", &v)?.into());
        }
        if let Some(v) = var("GYMAPI_WEBHOOK_PROXY").filter(|v| !v.trim().is_empty()) {
            let url =
                url::Url::parse(v.trim()).map_err(|e| anyhow::anyhow!("GYMAPI_WEBHOOK_PROXY is not a URL ({e})"))?;
            if url.scheme() != "http" || url.host_str().is_none() {
                bail!("GYMAPI_WEBHOOK_PROXY must be an http://host:port URL of a proxy that tunnels with CONNECT");
            }
            c.webhook_proxy = Some(url);
        }
        c.log_json = var("GYMAPI_LOG_FORMAT").is_some_and(|v| v == "json");
        if let Some(v) = var("GYMAPI_HEADER_TIMEOUT_SECS") {
            c.header_timeout = Duration::from_secs(positive("GYMAPI_HEADER_TIMEOUT_SECS", &v)?.into());
        }
        if let Some(v) = var("GYMAPI_BODY_TIMEOUT_SECS") {
            c.body_timeout = Duration::from_secs(positive("GYMAPI_BODY_TIMEOUT_SECS", &v)?.into());
        }
        if let Some(v) = var("GYMAPI_LONG_POLLS_PER_KEY") {
            c.long_polls_per_key = positive("GYMAPI_LONG_POLLS_PER_KEY", &v)? as usize;
        }
        if let Some(v) = var("GYMAPI_LONG_POLLS_PER_GYM") {
            c.long_polls_per_gym = positive("GYMAPI_LONG_POLLS_PER_GYM", &v)? as usize;
        }
        c.metrics_token = var("GYMAPI_METRICS_TOKEN");
        let files = open_files_limit();
        c.max_connections = match var("GYMAPI_MAX_CONNECTIONS") {
            Some(v) => positive("GYMAPI_MAX_CONNECTIONS", &v)? as usize,
            None => files.map_or(10_000, |n| n.saturating_sub(RESERVED_FILES).clamp(16, 10_000)),
        };
        Ok(c)
    }
}

/// An address or a network (`10.0.0.0/8`, `2001:db8::/32`, `127.0.0.1`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Network {
    addr: std::net::IpAddr,
    prefix: u8,
}

impl std::str::FromStr for Network {
    type Err = anyhow::Error;

    fn from_str(s: &str) -> anyhow::Result<Self> {
        let (addr, prefix) = s.split_once('/').map_or((s, None), |(a, p)| (a, Some(p)));
        let addr: std::net::IpAddr = addr.trim().parse()?;
        let max = if addr.is_ipv4() { 32 } else { 128 };
        let prefix = match prefix {
            Some(p) => p.trim().parse::<u8>().ok().filter(|p| *p <= max).context("the prefix is out of range")?,
            None => max,
        };
        Ok(Self { addr, prefix })
    }
}

impl Network {
    pub fn contains(&self, ip: std::net::IpAddr) -> bool {
        let ip = match ip {
            std::net::IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, std::net::IpAddr::V4),
            v4 => v4,
        };
        match (self.addr, ip) {
            (std::net::IpAddr::V4(a), std::net::IpAddr::V4(b)) => {
                let mask = u32::MAX.checked_shl(32 - u32::from(self.prefix)).unwrap_or(0);
                u32::from(a) & mask == u32::from(b) & mask
            }
            (std::net::IpAddr::V6(a), std::net::IpAddr::V6(b)) => {
                let mask = u128::MAX.checked_shl(128 - u32::from(self.prefix)).unwrap_or(0);
                u128::from(a) & mask == u128::from(b) & mask
            }
            _ => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Network;

    #[test]
    fn networks_hold_their_addresses() {
        let net: Network = "10.0.0.0/8".parse().unwrap();
        assert!(net.contains("10.1.2.3".parse().unwrap()));
        assert!(net.contains("::ffff:10.1.2.3".parse().unwrap()), "an IPv4 peer seen as IPv6");
        assert!(!net.contains("11.0.0.1".parse().unwrap()));
        let one: Network = "::1".parse().unwrap();
        assert!(one.contains("::1".parse().unwrap()) && !one.contains("::2".parse().unwrap()));
        let all: Network = "0.0.0.0/0".parse().unwrap();
        assert!(all.contains("192.0.2.1".parse().unwrap()));
        assert!("10.0.0.0/33".parse::<Network>().is_err() && "host".parse::<Network>().is_err());
    }
}
