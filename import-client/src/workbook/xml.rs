//! A streaming reader of the XML a workbook is made of, bounded whatever the file holds: a tag is
//! at most [`TAG_BYTES`], text comes in chunks (its reader keeps what it needs, up to its own cap),
//! and nothing is expanded but the five predefined entities and character references (a document
//! type declaration is refused, so no entity can grow). Names are compared without their prefix.

use std::io::{BufRead, ErrorKind};

/// The longest tag (`<...>` with its attributes) read.
pub(super) const TAG_BYTES: usize = 64 * 1024;
/// Text comes out in chunks of about this many bytes.
const CHUNK: usize = 8 * 1024;

#[derive(Debug, PartialEq)]
pub(super) enum Event {
    /// `<name ...>`; `empty` for `<name .../>`.
    Open {
        name: String,
        attrs: Vec<(String, String)>,
        empty: bool,
    },
    Close {
        name: String,
    },
    Text(String),
    Eof,
}

impl Event {
    /// The value of the attribute whose name, without its prefix, is `local`.
    pub(super) fn attr(attrs: &[(String, String)], local: &str) -> Option<String> {
        attrs.iter().find(|(n, _)| local_name(n) == local).map(|(_, v)| v.clone())
    }
}

pub(super) fn local_name(name: &str) -> &str {
    name.rsplit_once(':').map_or(name, |(_, l)| l)
}

pub(super) struct Reader<R> {
    inner: R,
    /// Text read but not yet given out (an entity or a character cut by a chunk's end waits here).
    text: Vec<u8>,
    what: String,
}

fn malformed(what: &str, why: impl std::fmt::Display) -> std::io::Error {
    std::io::Error::new(ErrorKind::InvalidData, format!("{what} is not well-formed XML: {why}"))
}

impl<R: BufRead> Reader<R> {
    /// `what` names the part in messages, e.g. `xl/worksheets/sheet1.xml`.
    pub(super) fn new(inner: R, what: &str) -> Self {
        Self { inner, text: Vec::new(), what: what.to_string() }
    }

    pub(super) fn next(&mut self) -> std::io::Result<Event> {
        loop {
            let (found, used) = {
                let buf = match self.inner.fill_buf() {
                    Ok(b) => b,
                    Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                    Err(e) => return Err(e),
                };
                if buf.is_empty() {
                    return if self.text.is_empty() { Ok(Event::Eof) } else { self.flush_text(true) };
                }
                match memchr::memchr(b'<', buf) {
                    Some(i) => {
                        self.text.extend_from_slice(&buf[..i]);
                        (true, i)
                    }
                    None => {
                        let take = buf.len().min(CHUNK);
                        self.text.extend_from_slice(&buf[..take]);
                        (false, take)
                    }
                }
            };
            self.inner.consume(used);
            if found && !self.text.is_empty() {
                return self.flush_text(true);
            }
            if !found {
                if self.text.len() >= CHUNK
                    && let Event::Text(t) = self.flush_text(false)?
                    && !t.is_empty()
                {
                    return Ok(Event::Text(t));
                }
                continue;
            }
            if let Some(event) = self.tag()? {
                return Ok(event);
            }
        }
    }

    /// The text gathered so far, decoded; `all`: a tag follows, so nothing is cut.
    fn flush_text(&mut self, all: bool) -> std::io::Result<Event> {
        let keep_from = if all { self.text.len() } else { cut_point(&self.text) };
        let rest = self.text.split_off(keep_from);
        let chunk = std::mem::replace(&mut self.text, rest);
        let raw = String::from_utf8(chunk).map_err(|_| malformed(&self.what, "text that is not UTF-8"))?;
        Ok(Event::Text(unescape(&raw).map_err(|e| malformed(&self.what, e))?))
    }

    /// Reads one tag from its `<`; `None` for what carries nothing (a declaration, a comment).
    fn tag(&mut self) -> std::io::Result<Option<Event>> {
        let mut raw = Vec::new();
        let limit = (TAG_BYTES + 1) as u64;
        let n = std::io::Read::take(&mut self.inner, limit).read_until(b'>', &mut raw)?;
        if n as u64 >= limit {
            return Err(malformed(&self.what, format!("a tag longer than {TAG_BYTES} bytes")));
        }
        if raw.last() != Some(&b'>') {
            return Err(malformed(&self.what, "it ends inside a tag"));
        }
        // Comments and CDATA may hold '>' before their end.
        while (raw.starts_with(b"<!--") && !raw.ends_with(b"-->"))
            || (raw.starts_with(b"<![CDATA[") && !raw.ends_with(b"]]>"))
        {
            let more = std::io::Read::take(&mut self.inner, limit).read_until(b'>', &mut raw)?;
            if more == 0 || raw.len() > TAG_BYTES {
                return Err(malformed(&self.what, format!("a comment or CDATA longer than {TAG_BYTES} bytes")));
            }
        }
        let raw = String::from_utf8(raw).map_err(|_| malformed(&self.what, "a tag that is not UTF-8"))?;
        let inner = &raw[1..raw.len() - 1];
        if let Some(cdata) = inner.strip_prefix("![CDATA[").and_then(|c| c.strip_suffix("]]")) {
            return Ok(Some(Event::Text(cdata.to_string())));
        }
        if inner.starts_with("!DOCTYPE") || inner.starts_with("!doctype") {
            return Err(malformed(&self.what, "a document type declaration"));
        }
        if inner.starts_with('?') || inner.starts_with('!') {
            return Ok(None);
        }
        if let Some(name) = inner.strip_prefix('/') {
            return Ok(Some(Event::Close { name: name.trim().to_string() }));
        }
        let (body, empty) = match inner.strip_suffix('/') {
            Some(b) => (b, true),
            None => (inner, false),
        };
        let name_end = body.find(|c: char| c.is_ascii_whitespace()).unwrap_or(body.len());
        let attrs = attributes(&body[name_end..]).map_err(|e| malformed(&self.what, e))?;
        Ok(Some(Event::Open { name: body[..name_end].to_string(), attrs, empty }))
    }
}

/// Where a chunk of text may end: not inside an entity (one longer than 32 bytes is left to fail as
/// malformed), nor inside a UTF-8 character.
fn cut_point(text: &[u8]) -> usize {
    let mut end = text.len();
    if let Some(amp) = memchr::memrchr(b'&', text)
        && !text[amp..].contains(&b';')
        && text.len() - amp <= 32
    {
        end = amp;
    }
    match std::str::from_utf8(&text[..end]) {
        Err(e) if e.error_len().is_none() => e.valid_up_to(),
        _ => end,
    }
}

fn attributes(mut s: &str) -> Result<Vec<(String, String)>, String> {
    let mut attrs = Vec::new();
    loop {
        s = s.trim_start();
        if s.is_empty() {
            return Ok(attrs);
        }
        let eq = s.find('=').ok_or("an attribute without a value")?;
        let name = s[..eq].trim().to_string();
        let rest = s[eq + 1..].trim_start();
        let quote = rest.chars().next().filter(|c| *c == '"' || *c == '\'').ok_or("an unquoted attribute")?;
        let close = rest[1..].find(quote).ok_or("an attribute without its closing quote")?;
        attrs.push((name, unescape(&rest[1..1 + close])?));
        s = &rest[close + 2..];
    }
}

/// Text with its entities and character references replaced.
pub(super) fn unescape(s: &str) -> Result<String, String> {
    if !s.contains('&') {
        return Ok(s.to_string());
    }
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(amp) = rest.find('&') {
        out.push_str(&rest[..amp]);
        let semi = rest[amp..].find(';').ok_or("an '&' that starts no entity")? + amp;
        let entity = &rest[amp + 1..semi];
        let c = match entity {
            "lt" => '<',
            "gt" => '>',
            "amp" => '&',
            "quot" => '"',
            "apos" => '\'',
            _ => {
                let code = match entity.strip_prefix("#x").or_else(|| entity.strip_prefix("#X")) {
                    Some(hex) => u32::from_str_radix(hex, 16).ok(),
                    None => entity.strip_prefix('#').and_then(|d| d.parse().ok()),
                };
                code.and_then(char::from_u32).ok_or_else(|| format!("an unknown entity &{entity};"))?
            }
        };
        out.push(c);
        rest = &rest[semi + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn events(xml: &str, buffer: usize) -> Vec<Event> {
        let mut r = Reader::new(std::io::BufReader::with_capacity(buffer, xml.as_bytes()), "t.xml");
        let mut out = Vec::new();
        loop {
            match r.next() {
                Ok(Event::Eof) => return out,
                Ok(Event::Text(t)) => match out.last_mut() {
                    Some(Event::Text(prev)) => prev.push_str(&t),
                    _ => out.push(Event::Text(t)),
                },
                Ok(e) => out.push(e),
                Err(e) => panic!("{e}"),
            }
        }
    }

    #[test]
    fn tags_text_and_entities_come_out_whole_whatever_the_buffer() {
        let xml = "<?xml version=\"1.0\"?><!-- a > b --><a x='1' y=\"&lt;2&gt;\"><b/>Jü&amp;rgen &#x263A;&#65;<![CDATA[<c>]]></a>";
        for buffer in [1, 2, 3, 7, 64] {
            let e = events(xml, buffer);
            assert_eq!(
                e,
                vec![
                    Event::Open {
                        name: "a".into(),
                        attrs: vec![("x".into(), "1".into()), ("y".into(), "<2>".into())],
                        empty: false
                    },
                    Event::Open { name: "b".into(), attrs: vec![], empty: true },
                    Event::Text("Jü&rgen ☺A<c>".into()),
                    Event::Close { name: "a".into() },
                ],
                "buffer {buffer}"
            );
        }
    }

    #[test]
    fn what_could_grow_is_refused() {
        let long = format!("<a b=\"{}\"/>", "x".repeat(TAG_BYTES));
        let doctype = "<!DOCTYPE lolz [<!ENTITY lol \"lol\">]><a>&lol;</a>";
        for xml in [long.as_str(), doctype, "<a>&lol;</a>", "<a"] {
            let mut r = Reader::new(xml.as_bytes(), "t.xml");
            let failed = (0..10).map(|_| r.next()).find_map(Result::err);
            assert!(failed.is_some(), "{}", &xml[..xml.len().min(40)]);
        }
    }
}
