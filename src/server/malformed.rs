//! Requests hyper cannot parse, answered in JSON like every other refusal.
//!
//! When a request is not HTTP/1.1 it can read (a bare CR, a NUL, two `Content-Length`s, a
//! `Transfer-Encoding` it does not know, TLS bytes on the plain port, a URI past its limit), hyper
//! answers by itself, before any service sees a request: a status line, `connection: close`,
//! `content-length: 0`, and it closes the connection. Its answer has no body and no request id,
//! and hyper offers no way to shape it. So each connection's writes pass through [`Answering`],
//! which recognises that answer (a 4xx or 5xx head with an empty body and without the
//! `x-request-id` every response of the service carries) and sends in its place the same status
//! with the JSON error body, a new `X-Request-Id` and `Connection: close`, logging one line.

use std::{
    io,
    pin::Pin,
    task::{Context, Poll, ready},
};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// The longest head of hyper's own answer (a status line and three short headers).
const HEAD_AT_MOST: usize = 256;

/// A connection whose refusals of unreadable requests are rewritten into JSON.
pub struct Answering<S> {
    inner: S,
    /// The JSON answer being sent in place of hyper's, and how much of it is sent.
    replacing: Option<(Vec<u8>, usize)>,
}

impl<S> Answering<S> {
    pub fn new(inner: S) -> Self {
        Self { inner, replacing: None }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Answering<S> {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Answering<S> {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        let this = &mut *self;
        if this.replacing.is_none() {
            this.replacing = replacement(buf).map(|answer| (answer, 0));
        }
        let Some((answer, sent)) = &mut this.replacing else {
            return Pin::new(&mut this.inner).poll_write(cx, buf);
        };
        while *sent < answer.len() {
            match ready!(Pin::new(&mut this.inner).poll_write(cx, &answer[*sent..])) {
                Ok(0) => return Poll::Ready(Err(io::ErrorKind::WriteZero.into())),
                Ok(n) => *sent += n,
                Err(e) => return Poll::Ready(Err(e)),
            }
        }
        // hyper's bytes count as written: the connection closes after them.
        this.replacing = None;
        Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

/// The JSON answer to send instead of `written`, when `written` is hyper's own refusal.
fn replacement(written: &[u8]) -> Option<Vec<u8>> {
    if !written.starts_with(b"HTTP/1.1 ") {
        return None;
    }
    let end = memchr::memmem::find(written, b"\r\n\r\n")?;
    let head = std::str::from_utf8(written.get(..end).filter(|h| h.len() <= HEAD_AT_MOST)?).ok()?;
    let lowered = head.to_ascii_lowercase();
    if lowered.contains("\r\nx-request-id:") || !lowered.contains("\r\ncontent-length: 0") {
        return None;
    }
    let status_line = head.lines().next()?;
    let status: u16 = status_line.get(9..12)?.parse().ok()?;
    let (kind, message) = match status {
        414 => ("uri_too_long", "The request's URI is longer than the server reads."),
        431 => ("request_header_fields_too_large", "The request's head is larger than the server reads."),
        400..=499 => (
            "bad_request",
            "The request is not HTTP/1.1 the server can read: a malformed request line or header, \
             conflicting or unknown framing headers, or not HTTP at all.",
        ),
        _ => return None,
    };
    let id = uuid::Uuid::now_v7();
    tracing::info!(request_id = %id, status, "a request that is not readable HTTP was refused");
    let body = crate::errors::error_body(kind, message);
    let mut answer = format!(
        "{status_line}\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\
         x-request-id: {id}\r\nconnection: close\r\n\r\n",
        body.len()
    )
    .into_bytes();
    answer.extend_from_slice(&body);
    Some(answer)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_hypers_own_refusals_are_replaced() {
        let hyper = b"HTTP/1.1 400 Bad Request\r\nconnection: close\r\ncontent-length: 0\r\ndate: Sat, 28 Nov 2026 00:51:45 GMT\r\n\r\n";
        let answer = String::from_utf8(replacement(hyper).unwrap_or_default()).unwrap_or_default();
        assert!(answer.starts_with("HTTP/1.1 400 Bad Request\r\n"), "{answer}");
        assert!(answer.contains("x-request-id: ") && answer.ends_with("}"), "{answer}");
        let ours =
            b"HTTP/1.1 404 Not Found\r\ncontent-type: application/json\r\nx-request-id: 1\r\ncontent-length: 0\r\n\r\n";
        assert!(replacement(ours).is_none());
        let ok = b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n";
        assert!(replacement(ok).is_none());
        assert!(replacement(b"{\"data\": []}").is_none());
    }
}
