//! Reading what people have: CSV in any common delimiter and encoding, JSON Lines, and the first
//! (or a named) sheet of an `.xlsx`/`.ods` workbook. Tabular rows come out as cells with their
//! line in the file (the sheet's row number for a workbook; the header is line 1). Every kind is
//! streamed within the limits of [`caps`]: a row past one comes out refused, with its reason.

use std::{
    fs::File,
    io::{BufRead, BufReader, Read},
    path::{Path, PathBuf},
};

use encoding_rs::Encoding;
use serde_json::Value;

use super::{ClientError, caps, csv_rows::CsvRows, workbook::Sheet};

/// The column a rejects file adds with a row's reasons; a file that has it (a rejects file being
/// imported again) has it left out, and its cells are read back as [`neutralised`] wrote them.
pub(super) const REASONS_COLUMN: &str = "import_errors";

/// A cell of a rejects file, safe to open in a spreadsheet program (OWASP's advice against CSV
/// injection): one that begins with `=`, `+`, `-`, `@`, a tab or a carriage return (a formula to
/// such a program), or with the `'` this adds, gets a `'` before it, which [`restored`] takes off
/// again when the rejects file is imported.
pub(super) fn neutralised(cell: &str) -> std::borrow::Cow<'_, str> {
    match cell.chars().next() {
        Some('=' | '+' | '-' | '@' | '\t' | '\r' | '\'') => format!("'{cell}").into(),
        _ => cell.into(),
    }
}

/// A rejects file's cell as the original file had it (see [`neutralised`]).
fn restored(cell: &str) -> &str {
    cell.strip_prefix('\'').unwrap_or(cell)
}

/// How a file is read, as given or as found.
#[derive(Clone, Debug, Default)]
pub(super) struct ReadOptions {
    pub delimiter: Option<u8>,
    pub encoding: Option<&'static Encoding>,
    pub sheet: Option<String>,
    /// The decimal separator a workbook's numbers are written with (they are text in a CSV).
    pub decimal: Option<char>,
}

/// What was found out about the file.
#[derive(Clone, Debug, PartialEq)]
pub(super) enum Layout {
    Csv { encoding: &'static str, encoding_detected: bool, delimiter: u8, delimiter_detected: bool },
    Sheet { sheet: String },
    JsonLines,
}

impl Layout {
    pub(super) fn describe(&self) -> String {
        match self {
            Layout::Csv { encoding, encoding_detected, delimiter, delimiter_detected } => format!(
                "CSV, encoding {encoding} ({}), delimiter {} ({})",
                if *encoding_detected { "detected" } else { "given" },
                delimiter_name(*delimiter),
                if *delimiter_detected { "detected" } else { "given" }
            ),
            Layout::Sheet { sheet } => format!("workbook, sheet {sheet:?}"),
            Layout::JsonLines => "JSON Lines".to_string(),
        }
    }

    pub(super) fn delimiter(&self) -> u8 {
        match self {
            Layout::Csv { delimiter, .. } => *delimiter,
            _ => b',',
        }
    }
}

pub(super) fn delimiter_name(d: u8) -> String {
    match d {
        b'\t' => "tab".to_string(),
        d => format!("{:?}", d as char),
    }
}

enum Body {
    /// The file as UTF-8, streamed.
    Csv {
        rows: Box<CsvRows>,
        skip: Option<usize>,
    },
    Sheet {
        sheet: Sheet,
        skip: Option<usize>,
    },
    Lines {
        lines: BufReader<File>,
        line: u64,
    },
}

/// A file's rows.
pub(super) struct Table {
    pub path: PathBuf,
    pub layout: Layout,
    /// The header row's cells (empty for JSON Lines), the reasons column left out.
    pub headers: Vec<String>,
    body: Body,
}

/// One row: cells of a table, or an object of a JSON Lines file.
pub(super) enum Row {
    Cells(csv::StringRecord),
    Object(Value),
    /// A row past a limit of [`caps`], refused with the reason: its cells within the limits (an
    /// empty object for a JSON Lines line).
    TooLarge(Box<Row>, String),
}

pub(super) fn kind_of_file(path: &Path) -> FileKind {
    match path.extension().and_then(|e| e.to_str()).map(str::to_ascii_lowercase).as_deref() {
        Some("xlsx" | "xlsm" | "ods") => FileKind::Sheet,
        Some("xls" | "xlsb" | "numbers") => FileKind::Unread,
        Some("jsonl" | "ndjson" | "json") => FileKind::JsonLines,
        _ => FileKind::Csv,
    }
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) enum FileKind {
    Csv,
    Sheet,
    JsonLines,
    /// A binary workbook (`.xls`, `.xlsb`, `.numbers`): saved as `.xlsx`, `.ods` or CSV, it is read.
    Unread,
}

fn cannot_read(path: &Path, e: impl std::fmt::Display) -> ClientError {
    ClientError::BadInput(format!("cannot read {}: {e}", path.display()))
}

impl Table {
    pub(super) fn open(path: &Path, opts: &ReadOptions) -> Result<Self, ClientError> {
        match kind_of_file(path) {
            FileKind::JsonLines => {
                let file = File::open(path).map_err(|e| cannot_read(path, e))?;
                Ok(Self {
                    path: path.to_path_buf(),
                    layout: Layout::JsonLines,
                    headers: Vec::new(),
                    body: Body::Lines { lines: BufReader::new(file), line: 0 },
                })
            }
            FileKind::Sheet => open_sheet(path, opts),
            FileKind::Csv => open_csv(path, opts),
            FileKind::Unread => Err(ClientError::BadInput(format!(
                "{}: a binary workbook is not read; save the sheet as .xlsx, .ods or CSV",
                path.display()
            ))),
        }
    }

    /// The next row and its line.
    pub(super) fn next_row(&mut self) -> Option<Result<(u64, Row), ClientError>> {
        let in_file = |e: &dyn std::fmt::Display| ClientError::BadInput(format!("{}: {e}", self.path.display()));
        let (line, record, reason, skip) = match &mut self.body {
            Body::Lines { lines, line } => return next_object(lines, line),
            Body::Sheet { sheet, skip } => match sheet.next_row()? {
                Ok((line, record, reason)) => (line, record, reason, *skip),
                Err(e) => return Some(Err(in_file(&e))),
            },
            Body::Csv { rows, skip } => match rows.next_record()? {
                Ok((line, record, reason)) => (line, record, reason, *skip),
                Err(e) => return Some(Err(in_file(&e))),
            },
        };
        let cells = Row::Cells(without(record, skip));
        Some(Ok((
            line,
            match reason {
                Some(why) => Row::TooLarge(Box::new(cells), why),
                None => cells,
            },
        )))
    }

    /// Rows left to read, by a pass of its own (for the progress bar).
    pub(super) fn count_rows(path: &Path, opts: &ReadOptions) -> Result<u64, ClientError> {
        let mut table = Self::open(path, opts)?;
        let mut n = 0;
        while let Some(row) = table.next_row() {
            row?;
            n += 1;
        }
        Ok(n)
    }
}

fn next_object(lines: &mut BufReader<File>, line: &mut u64) -> Option<Result<(u64, Row), ClientError>> {
    loop {
        *line += 1;
        let at = *line;
        let mut text = Vec::new();
        let limit = caps::ROW_BYTES as u64 + 1;
        match lines.by_ref().take(limit).read_until(b'\n', &mut text) {
            Ok(0) => return None,
            Ok(_) => {}
            Err(e) => return Some(Err(ClientError::BadInput(format!("line {at}: {e}")))),
        }
        if text.len() as u64 == limit && text.last() != Some(&b'\n') {
            let mut length = text.len() as u64;
            loop {
                match lines.fill_buf() {
                    Ok([]) => break,
                    Ok(buf) => {
                        let (n, end) = memchr::memchr(b'\n', buf).map_or((buf.len(), false), |i| (i + 1, true));
                        length += n as u64;
                        lines.consume(n);
                        if end {
                            break;
                        }
                    }
                    Err(e) => return Some(Err(ClientError::BadInput(format!("line {at}: {e}")))),
                }
            }
            let why = format!("the line holds {length} bytes, more than the {} a row may hold", caps::ROW_BYTES);
            return Some(Ok((at, Row::TooLarge(Box::new(Row::Object(Value::Object(Default::default()))), why))));
        }
        let Ok(text) = std::str::from_utf8(&text) else {
            return Some(Err(ClientError::BadInput(format!("line {at}: not UTF-8"))));
        };
        if text.trim().is_empty() {
            continue;
        }
        return Some(match serde_json::from_str::<Value>(text) {
            Ok(Value::Object(mut o)) => {
                o.remove(REASONS_COLUMN);
                Ok((at, Row::Object(Value::Object(o))))
            }
            Ok(_) => Err(ClientError::BadInput(format!("line {at}: not a JSON object"))),
            Err(e) => Err(ClientError::BadInput(format!("line {at}: not JSON: {e}"))),
        });
    }
}

/// Turns a file in another encoding into UTF-8 as it is read; a byte sequence the encoding does not
/// have is an error, not a replacement character.
struct Decoding {
    inner: File,
    decoder: encoding_rs::Decoder,
    input: Vec<u8>,
    start: usize,
    end: usize,
    eof: bool,
}

impl Read for Decoding {
    fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
        use encoding_rs::DecoderResult;
        loop {
            if self.start == self.end && !self.eof {
                self.end = self.inner.read(&mut self.input)?;
                self.start = 0;
                self.eof = self.end == 0;
            }
            let (result, read, written) =
                self.decoder.decode_to_utf8_without_replacement(&self.input[self.start..self.end], out, self.eof);
            self.start += read;
            match result {
                DecoderResult::Malformed(..) => {
                    return Err(std::io::Error::other(format!(
                        "the file is not valid {}",
                        self.decoder.encoding().name()
                    )));
                }
                DecoderResult::OutputFull if written == 0 => {
                    return Err(std::io::Error::other("a read too small to decode into"));
                }
                DecoderResult::InputEmpty if written == 0 && !self.eof => continue,
                _ => return Ok(written),
            }
        }
    }
}

/// What a pass over a file found of UTF-8.
#[derive(Debug, PartialEq)]
enum Utf8 {
    Valid,
    /// No valid sequence of more than one byte: a file in a single-byte encoding.
    Not,
    /// UTF-8 but for some bytes: the first such byte's line and offset, and how many.
    Mostly {
        line: u64,
        byte: u64,
        bad: u64,
    },
}

/// Reads the whole file in chunks, looking at every byte sequence.
fn utf8_of(path: &Path) -> std::io::Result<Utf8> {
    let mut file = File::open(path)?;
    let mut buf = vec![0u8; 256 * 1024];
    let (mut carried, mut offset, mut lines) = (0usize, 0u64, 0u64);
    let (mut first_bad, mut bad, mut multibyte) = (None, 0u64, false);
    loop {
        let n = file.read(&mut buf[carried..])?;
        let filled = carried + n;
        let mut at = 0;
        while at < filled {
            match std::str::from_utf8(&buf[at..filled]) {
                Ok(text) => {
                    multibyte |= !text.is_ascii();
                    at = filled;
                }
                Err(e) => {
                    let valid = at + e.valid_up_to();
                    multibyte |= !buf[at..valid].is_ascii();
                    let Some(len) = e.error_len() else { break };
                    if first_bad.is_none() {
                        let line = lines + memchr::memchr_iter(b'\n', &buf[..valid]).count() as u64 + 1;
                        first_bad = Some((line, offset + valid as u64));
                    }
                    bad += 1;
                    at = valid + len;
                }
            }
        }
        if n == 0 {
            // What is left is a character the file cuts off.
            bad += u64::from(at < filled);
            if first_bad.is_none() && at < filled {
                first_bad =
                    Some((lines + memchr::memchr_iter(b'\n', &buf[..at]).count() as u64 + 1, offset + at as u64));
            }
            break;
        }
        // A character cut by the chunk's end: keep its bytes for the next chunk.
        lines += memchr::memchr_iter(b'\n', &buf[..at]).count() as u64;
        offset += at as u64;
        buf.copy_within(at..filled, 0);
        carried = filled - at;
    }
    Ok(match first_bad {
        None => Utf8::Valid,
        Some(_) if !multibyte => Utf8::Not,
        Some((line, byte)) => Utf8::Mostly { line, byte, bad },
    })
}

/// The encoding of a file: a byte-order mark decides, then UTF-8 if every byte sequence is valid
/// UTF-8, else Windows-1252 (what spreadsheet programs write on Windows; it also reads ISO-8859-1)
/// when no sequence of the file is UTF-8 of more than one byte. A file that is UTF-8 but for some
/// bytes is refused, naming the first: read as Windows-1252 its every accent would be mangled, so
/// the user names the encoding. Also says whether it was detected, and whether the file was found
/// to be valid UTF-8.
fn sniff_encoding(
    path: &Path,
    given: Option<&'static Encoding>,
) -> Result<(&'static Encoding, bool, bool), ClientError> {
    if let Some(e) = given {
        return Ok((e, false, false));
    }
    let mut head = [0u8; 3];
    let mut file = File::open(path).map_err(|e| cannot_read(path, e))?;
    let mut n = 0;
    while n < head.len() {
        match file.read(&mut head[n..]).map_err(|e| cannot_read(path, e))? {
            0 => break,
            m => n += m,
        }
    }
    if let Some((encoding, _)) = Encoding::for_bom(&head[..n]) {
        return Ok((encoding, true, false));
    }
    match utf8_of(path).map_err(|e| cannot_read(path, e))? {
        Utf8::Valid => Ok((encoding_rs::UTF_8, true, true)),
        Utf8::Not => Ok((encoding_rs::WINDOWS_1252, true, false)),
        Utf8::Mostly { line, byte, bad } => Err(ClientError::BadInput(format!(
            "{}: the file is UTF-8 but for {bad} byte sequence(s), the first at line {line} (byte {byte}); \
             fix those bytes, or name the encoding with --encoding (e.g. windows-1252 reads every byte as that)",
            path.display()
        ))),
    }
}

/// The file as UTF-8 without a byte-order mark; `checked`: the file was found to be valid UTF-8
/// with no mark (it is then read as it is, else through a decoder that refuses what is not).
fn text_reader(path: &Path, encoding: &'static Encoding, checked: bool) -> std::io::Result<Box<dyn Read>> {
    let file = File::open(path)?;
    if encoding == encoding_rs::UTF_8 && checked {
        return Ok(Box::new(BufReader::with_capacity(64 * 1024, file)));
    }
    Ok(Box::new(Decoding {
        inner: file,
        decoder: encoding.new_decoder_with_bom_removal(),
        input: vec![0; 64 * 1024],
        start: 0,
        end: 0,
        eof: false,
    }))
}

/// The first 64 KiB of the file as UTF-8, for finding its delimiter.
fn head_of(path: &Path, encoding: &'static Encoding, checked: bool) -> std::io::Result<Vec<u8>> {
    let mut head = Vec::with_capacity(64 * 1024);
    text_reader(path, encoding, checked)?.take(64 * 1024).read_to_end(&mut head)?;
    Ok(head)
}

/// The delimiter of the first lines: the candidate found on the header that most lines have as
/// often as the header has it.
pub(super) fn detect_delimiter(data: &[u8]) -> u8 {
    const CANDIDATES: [u8; 4] = [b',', b';', b'\t', b'|'];
    let lines: Vec<[usize; 4]> = quoted_lines(data, 50)
        .into_iter()
        .map(|line| CANDIDATES.map(|c| line.iter().filter(|&&b| b == c).count()))
        .collect();
    let Some(header) = lines.first() else { return b',' };
    let score = |i: usize| {
        let agreeing = lines.iter().filter(|counts| counts[i] == header[i]).count();
        (header[i] > 0, agreeing, header[i])
    };
    (0..CANDIDATES.len()).max_by_key(|&i| score(i)).filter(|&i| header[i] > 0).map_or(b',', |i| CANDIDATES[i])
}

/// Up to `max` lines, with quoted text left out (a delimiter inside quotes does not count).
fn quoted_lines(data: &[u8], max: usize) -> Vec<Vec<u8>> {
    let mut lines = Vec::new();
    let mut current = Vec::new();
    let mut quoted = false;
    for &b in data {
        match b {
            b'"' => quoted = !quoted,
            b'\n' if !quoted => {
                lines.push(std::mem::take(&mut current));
                if lines.len() == max {
                    return lines;
                }
            }
            _ if !quoted => current.push(b),
            _ => {}
        }
    }
    if !current.is_empty() {
        lines.push(current);
    }
    lines
}

fn open_csv(path: &Path, opts: &ReadOptions) -> Result<Table, ClientError> {
    let (encoding, encoding_detected, checked) = sniff_encoding(path, opts.encoding)?;
    let (delimiter, delimiter_detected) = match opts.delimiter {
        Some(d) => (d, false),
        None => (detect_delimiter(&head_of(path, encoding, checked).map_err(|e| cannot_read(path, e))?), true),
    };
    let text = text_reader(path, encoding, checked).map_err(|e| cannot_read(path, e))?;
    let mut rows = CsvRows::new(text, delimiter);
    let header = match rows.next_record() {
        None => csv::StringRecord::new(),
        Some(Ok((_, header, None))) => header,
        Some(Ok((_, _, Some(why)))) => return Err(ClientError::BadInput(format!("{}: header: {why}", path.display()))),
        Some(Err(e)) => return Err(ClientError::BadInput(format!("{}: {e}", path.display()))),
    };
    let (headers, skip) = headers_of(&header);
    Ok(Table {
        path: path.to_path_buf(),
        layout: Layout::Csv { encoding: encoding.name(), encoding_detected, delimiter, delimiter_detected },
        headers,
        body: Body::Csv { rows: Box::new(rows), skip },
    })
}

fn open_sheet(path: &Path, opts: &ReadOptions) -> Result<Table, ClientError> {
    let sheet = Sheet::open(path, opts.sheet.clone(), opts.decimal.unwrap_or('.'))
        .map_err(|e| ClientError::BadInput(format!("{}: {e}", path.display())))?;
    let (headers, skip) = headers_of(&sheet.header);
    Ok(Table {
        path: path.to_path_buf(),
        layout: Layout::Sheet { sheet: sheet.name.clone() },
        headers,
        body: Body::Sheet { sheet, skip },
    })
}

/// The header's names, trimmed, without the reasons column of a rejects file; and where that was.
fn headers_of(header: &csv::StringRecord) -> (Vec<String>, Option<usize>) {
    let skip = header.iter().position(|h| h.trim() == REASONS_COLUMN);
    (without(header.clone(), skip).iter().map(|h| h.trim().to_string()).collect(), skip)
}

/// A row without the cell at `skip`.
/// A record of a file as the import reads it: for a rejects file (`skip`, where its reasons column
/// is), without that column and with its cells [`restored`].
fn without(record: csv::StringRecord, skip: Option<usize>) -> csv::StringRecord {
    match skip {
        Some(i) => record.iter().enumerate().filter(|(j, _)| *j != i).map(|(_, c)| restored(c)).collect(),
        None => record,
    }
}

/// Which byte a delimiter names: one character, or `tab`.
pub(super) fn delimiter_of(text: &str) -> Option<u8> {
    match text {
        "tab" | "\\t" | "\t" => Some(b'\t'),
        d if d.len() == 1 => d.bytes().next(),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_delimiter_is_the_one_every_line_agrees_on() {
        assert_eq!(detect_delimiter(b"a;b;c\n1;2,5;3\n4;5;6\n"), b';');
        assert_eq!(detect_delimiter(b"a,b,c\n1,\"x;y;z\",3\n"), b',');
        assert_eq!(detect_delimiter(b"a\tb\n1\t2\n"), b'\t');
        assert_eq!(detect_delimiter(b"a|b\n1|2\n"), b'|');
        assert_eq!(detect_delimiter(b"only\n1\n"), b',');
    }

    fn read_as_text(bytes: &[u8], given: Option<&'static Encoding>) -> Result<(String, &'static str), String> {
        let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
        let path = dir.path().join("f.csv");
        std::fs::write(&path, bytes).map_err(|e| e.to_string())?;
        let (encoding, _, checked) = sniff_encoding(&path, given).map_err(|e| e.to_string())?;
        let mut text = String::new();
        text_reader(&path, encoding, checked)
            .and_then(|mut r| r.read_to_string(&mut text))
            .map_err(|e| e.to_string())?;
        Ok((text, encoding.name()))
    }

    #[test]
    fn encodings_are_told_apart() {
        assert_eq!(read_as_text(b"J\xfcrgen", None), Ok(("Jürgen".into(), "windows-1252")));
        let bom = [&[0xEF, 0xBB, 0xBF][..], "Jürgen".as_bytes()].concat();
        assert_eq!(read_as_text(&bom, None), Ok(("Jürgen".into(), "UTF-8")));
        let utf16: Vec<u8> = [0xFF, 0xFE].into_iter().chain("Jü\n".encode_utf16().flat_map(u16::to_le_bytes)).collect();
        assert_eq!(read_as_text(&utf16, None), Ok(("Jü\n".into(), "UTF-16LE")));
        assert!(read_as_text(b"ok \xff", Some(encoding_rs::UTF_8)).unwrap_err().contains("not valid UTF-8"));
        // A character cut by the validator's chunk boundary is still UTF-8.
        let long = "ü".repeat(200_000);
        assert_eq!(read_as_text(long.as_bytes(), None).map(|(_, e)| e), Ok("UTF-8"));
    }
}

#[cfg(test)]
mod rejects_cells {
    use super::*;

    #[test]
    fn a_neutralised_cell_is_restored_as_it_was() {
        for cell in ["=1+2", "+49 170", "-5", "@SUM(A1)", "\tx", "\rx", "'quoted", "''", "plain", "", "a=b"] {
            let written = neutralised(cell);
            assert!(!written.starts_with(['=', '+', '-', '@', '\t', '\r']), "{written:?}");
            assert_eq!(restored(&written), cell);
        }
    }
}
