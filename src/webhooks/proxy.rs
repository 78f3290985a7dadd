//! Webhooks through an egress proxy, only when one is named by `GYMAPI_WEBHOOK_PROXY`
//! (proxy variables of the environment are ignored).
//!
//! A proxy that is told a name resolves it itself, past the address guard. So the dispatcher
//! resolves the receiver's name here, checks every address as it does without a proxy, and asks
//! the proxy to `CONNECT` to the checked address (`CONNECT 203.0.113.7:443`), never to the name.
//! Through that tunnel it speaks TLS to the receiver with the name as SNI and checks the
//! certificate against the name, then sends the request with the name in `Host`.

use std::{net::SocketAddr, sync::Arc, time::Duration};

use anyhow::{Context as _, bail};
use base64::{Engine as _, engine::general_purpose::STANDARD as B64};
use bytes::Bytes;
use http_body_util::{BodyExt as _, Full};
use hyper_util::rt::TokioIo;
use tokio::{
    io::{AsyncRead, AsyncReadExt as _, AsyncWrite, AsyncWriteExt as _},
    net::TcpStream,
};

use super::is_public;

/// How long the proxy has to accept the connection and answer the `CONNECT`.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// The longest answer to a `CONNECT` read.
const PROXY_HEAD_BYTES: usize = 8 * 1024;

/// The proxy, and the TLS the dispatcher speaks through it.
pub struct ViaProxy {
    /// `host:port` of the proxy.
    proxy: String,
    /// `Proxy-Authorization` for a proxy URL with a user name.
    authorization: Option<String>,
    tls: tokio_rustls::TlsConnector,
    allow_private: bool,
}

/// What a receiver answered: its status and the first bytes of its body.
pub struct Answer {
    pub status: u16,
    pub excerpt: Vec<u8>,
}

trait Io: AsyncRead + AsyncWrite + Unpin + Send {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send> Io for T {}

impl ViaProxy {
    /// For `http://[user:password@]host:port` (the proxy is asked to tunnel with `CONNECT`).
    pub fn new(proxy: &url::Url, allow_private: bool) -> anyhow::Result<Self> {
        if proxy.scheme() != "http" {
            bail!("GYMAPI_WEBHOOK_PROXY must be an http:// URL of a proxy that tunnels with CONNECT");
        }
        let host = proxy.host_str().context("GYMAPI_WEBHOOK_PROXY has no host")?;
        let port = proxy.port_or_known_default().unwrap_or(80);
        let authorization = (!proxy.username().is_empty()).then(|| {
            let decode = |s: &str| url::form_urlencoded::parse(format!("x={s}").as_bytes()).map(|(_, v)| v).collect();
            let (user, password): (String, String) = (decode(proxy.username()), decode(proxy.password().unwrap_or("")));
            format!("Basic {}", B64.encode(format!("{user}:{password}")))
        });
        let roots = rustls::RootCertStore { roots: webpki_roots::TLS_SERVER_ROOTS.to_vec() };
        let config = rustls::ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
            .with_safe_default_protocol_versions()?
            .with_root_certificates(roots)
            .with_no_client_auth();
        Ok(Self {
            proxy: format!("{host}:{port}"),
            authorization,
            tls: tokio_rustls::TlsConnector::from(Arc::new(config)),
            allow_private,
        })
    }

    /// POSTs `body` to `target` through the proxy, reading at most `excerpt_limit` bytes of the
    /// answer's body. The caller bounds the time it takes.
    pub async fn post(
        &self,
        target: &url::Url,
        headers: &[(&'static str, String)],
        body: Bytes,
        excerpt_limit: usize,
    ) -> Result<Answer, String> {
        let host = target.host_str().ok_or("the URL has no host")?;
        let port = target.port_or_known_default().ok_or("the URL has no port")?;
        let mut tunnel = Err(format!("{host} resolves to no address"));
        for address in self.checked_addresses(host, port).await? {
            tunnel = self.tunnel(address).await;
            if tunnel.is_ok() {
                break;
            }
        }
        let tunnel = tunnel?;
        let stream: Box<dyn Io> = if target.scheme() == "https" {
            let name = rustls::pki_types::ServerName::try_from(host.trim_matches(['[', ']']).to_string())
                .map_err(|e| format!("{host} is not a name TLS can check ({e})"))?;
            Box::new(self.tls.connect(name, tunnel).await.map_err(|e| format!("TLS with {host}: {e}"))?)
        } else {
            Box::new(tunnel)
        };
        exchange(stream, target, headers, body, excerpt_limit).await
    }

    /// The receiver's addresses, resolved here and checked as the dispatcher checks every address:
    /// one that is not public refuses them all.
    async fn checked_addresses(&self, host: &str, port: u16) -> Result<Vec<SocketAddr>, String> {
        let bare = host.trim_matches(['[', ']']);
        let addrs: Vec<SocketAddr> = tokio::net::lookup_host((bare, port))
            .await
            .map_err(|e| format!("{host} could not be resolved: {e}"))?
            .collect();
        if !self.allow_private && addrs.iter().any(|a| !is_public(a.ip())) {
            return Err(format!("{host} resolves to an address that is not public"));
        }
        Ok(addrs)
    }

    /// A connection through the proxy to `to`, once the proxy answered 200 to its `CONNECT`.
    async fn tunnel(&self, to: SocketAddr) -> Result<TcpStream, String> {
        let connect = async {
            let mut s = TcpStream::connect(&self.proxy).await.map_err(|e| format!("the webhook proxy: {e}"))?;
            let mut ask = format!("CONNECT {to} HTTP/1.1\r\nHost: {to}\r\n");
            if let Some(a) = &self.authorization {
                ask.push_str(&format!("Proxy-Authorization: {a}\r\n"));
            }
            ask.push_str("\r\n");
            s.write_all(ask.as_bytes()).await.map_err(|e| format!("the webhook proxy: {e}"))?;
            let head = read_head(&mut s).await?;
            let status_line = head.lines().next().unwrap_or_default();
            match status_line.split_whitespace().nth(1) {
                Some("200") => Ok(s),
                _ => Err(format!("the webhook proxy refused to connect to {to}: {status_line}")),
            }
        };
        tokio::time::timeout(CONNECT_TIMEOUT, connect)
            .await
            .map_err(|_| "the webhook proxy did not answer in time".to_string())?
    }
}

/// The proxy's answer up to its blank line. Nothing follows it before the tunnel's first bytes,
/// which are the dispatcher's to send.
async fn read_head(s: &mut TcpStream) -> Result<String, String> {
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        if head.len() >= PROXY_HEAD_BYTES {
            return Err("the webhook proxy's answer is too long".into());
        }
        match s.read(&mut byte).await {
            Ok(0) => return Err("the webhook proxy closed the connection".into()),
            Ok(_) => head.push(byte[0]),
            Err(e) => return Err(format!("the webhook proxy: {e}")),
        }
    }
    Ok(String::from_utf8_lossy(&head).into_owned())
}

/// One HTTP/1.1 request over `stream`, and the status and first bytes of its answer.
async fn exchange(
    stream: Box<dyn Io>,
    target: &url::Url,
    headers: &[(&'static str, String)],
    body: Bytes,
    excerpt_limit: usize,
) -> Result<Answer, String> {
    let (mut sender, connection) =
        hyper::client::conn::http1::handshake(TokioIo::new(stream)).await.map_err(|e| e.to_string())?;
    let driving = tokio::spawn(connection);
    let authority = &target[url::Position::BeforeHost..url::Position::AfterPort];
    let path = &target[url::Position::BeforePath..url::Position::AfterQuery];
    let mut request = hyper::Request::post(path)
        .header(hyper::header::HOST, authority)
        .header(hyper::header::USER_AGENT, super::USER_AGENT);
    for (name, value) in headers {
        request = request.header(*name, value);
    }
    let request = request.body(Full::new(body)).map_err(|e| e.to_string())?;
    let answer = sender.send_request(request).await.map_err(|e| e.to_string());
    let answer = match answer {
        Ok(a) => a,
        Err(e) => {
            driving.abort();
            return Err(e);
        }
    };
    let status = answer.status().as_u16();
    let mut body = answer.into_body();
    let mut excerpt = Vec::new();
    while excerpt.len() < excerpt_limit {
        match body.frame().await {
            Some(Ok(frame)) => {
                if let Some(data) = frame.data_ref() {
                    excerpt.extend_from_slice(&data[..data.len().min(excerpt_limit - excerpt.len())]);
                }
            }
            _ => break,
        }
    }
    driving.abort();
    Ok(Answer { status, excerpt })
}
