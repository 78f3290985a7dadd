//! Reading what people have: CSV in any common delimiter and encoding, JSON Lines, and the first
//! (or a named) sheet of an `.xlsx`/`.ods` workbook. Tabular rows come out as cells with their
//! line in the file (the sheet's row number for a workbook; the header is line 1).

use std::{
    fs::File,
    io::{BufRead, BufReader, Read},
    path::{Path, PathBuf},
};

use calamine::{Data, Reader};
use encoding_rs::Encoding;
use serde_json::Value;

use super::ClientError;

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
    /// The file as UTF-8, streamed: line numbers come from the offsets of its newlines (the csv
    /// crate's own count is off by one on CRLF files, which most spreadsheet exports are).
    Csv {
        reader: csv::Reader<Counting>,
        newlines: Newlines,
        skip: Option<usize>,
    },
    Sheet {
        rows: std::vec::IntoIter<(u64, csv::StringRecord)>,
    },
    Lines {
        lines: std::io::Lines<BufReader<File>>,
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
}

pub(super) fn kind_of_file(path: &Path) -> FileKind {
    match path.extension().and_then(|e| e.to_str()).map(str::to_ascii_lowercase).as_deref() {
        Some("xlsx" | "xlsm" | "xls" | "xlsb" | "ods") => FileKind::Sheet,
        Some("jsonl" | "ndjson" | "json") => FileKind::JsonLines,
        _ => FileKind::Csv,
    }
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) enum FileKind {
    Csv,
    Sheet,
    JsonLines,
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
                    body: Body::Lines { lines: BufReader::new(file).lines(), line: 0 },
                })
            }
            FileKind::Sheet => open_sheet(path, opts),
            FileKind::Csv => open_csv(path, opts),
        }
    }

    /// The next row and its line.
    pub(super) fn next_row(&mut self) -> Option<Result<(u64, Row), ClientError>> {
        match &mut self.body {
            Body::Lines { lines, line } => next_object(lines, line),
            Body::Sheet { rows } => rows.next().map(|(line, record)| Ok((line, Row::Cells(record)))),
            Body::Csv { reader, newlines, skip } => {
                let mut record = csv::StringRecord::new();
                match reader.read_record(&mut record) {
                    Ok(false) => None,
                    Err(e) => Some(Err(ClientError::BadInput(format!("{}: {e}", self.path.display())))),
                    Ok(true) => {
                        let line = 1 + newlines.before(record.position().map_or(0, csv::Position::byte));
                        Some(Ok((line, Row::Cells(without(record, *skip)))))
                    }
                }
            }
        }
    }

    /// Rows left to read, by a cheap pass of its own (for the progress bar).
    pub(super) fn count_rows(path: &Path, opts: &ReadOptions) -> Result<u64, ClientError> {
        let mut table = Self::open(path, opts)?;
        if let Body::Sheet { rows } = &table.body {
            return Ok(rows.len() as u64);
        }
        if let Body::Csv { reader, .. } = &mut table.body {
            let mut record = csv::ByteRecord::new();
            let mut n = 0;
            while reader.read_byte_record(&mut record).map_err(|e| cannot_read(path, e))? {
                n += 1;
            }
            return Ok(n);
        }
        let mut n = 0;
        while let Some(row) = table.next_row() {
            row?;
            n += 1;
        }
        Ok(n)
    }
}

fn next_object(lines: &mut std::io::Lines<BufReader<File>>, line: &mut u64) -> Option<Result<(u64, Row), ClientError>> {
    loop {
        let text = match lines.next()? {
            Ok(t) => t,
            Err(e) => return Some(Err(ClientError::BadInput(format!("line {}: {e}", *line + 1)))),
        };
        *line += 1;
        if text.trim().is_empty() {
            continue;
        }
        return Some(match serde_json::from_str::<Value>(&text) {
            Ok(Value::Object(mut o)) => {
                o.remove(REASONS_COLUMN);
                Ok((*line, Row::Object(Value::Object(o))))
            }
            Ok(_) => Err(ClientError::BadInput(format!("line {line}: not a JSON object"))),
            Err(e) => Err(ClientError::BadInput(format!("line {line}: not JSON: {e}"))),
        });
    }
}

/// The offsets of the newlines read ahead of the csv reader, and how many it has passed.
#[derive(Clone, Default)]
pub(super) struct Newlines(std::sync::Arc<std::sync::Mutex<(std::collections::VecDeque<u64>, u64)>>);

impl Newlines {
    /// Newlines before the record that starts at `offset` (after a CRLF the csv reader reports
    /// the record at the LF, which belongs to the line before).
    fn before(&self, offset: u64) -> u64 {
        let Ok(mut guard) = self.0.lock() else { return 0 };
        let (pending, passed) = &mut *guard;
        while pending.front().is_some_and(|&n| n <= offset) {
            pending.pop_front();
            *passed += 1;
        }
        *passed
    }
}

/// A reader that notes where its newlines are.
pub(super) struct Counting {
    inner: Box<dyn Read>,
    offset: u64,
    newlines: Newlines,
}

impl Read for Counting {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        if let Ok(mut guard) = self.newlines.0.lock() {
            guard.0.extend(memchr::memchr_iter(b'\n', &buf[..n]).map(|i| self.offset + i as u64));
        }
        self.offset += n as u64;
        Ok(n)
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

/// Whether the whole file is UTF-8, read in chunks.
fn is_utf8(path: &Path) -> std::io::Result<bool> {
    let mut file = File::open(path)?;
    let mut buf = vec![0u8; 256 * 1024];
    let mut carried = 0;
    loop {
        let n = file.read(&mut buf[carried..])?;
        let filled = carried + n;
        match std::str::from_utf8(&buf[..filled]) {
            Ok(_) => carried = 0,
            // A character cut by the chunk's end: keep its bytes for the next chunk.
            Err(e) if e.error_len().is_none() && n > 0 => {
                let valid = e.valid_up_to();
                buf.copy_within(valid..filled, 0);
                carried = filled - valid;
            }
            Err(_) => return Ok(false),
        }
        if n == 0 {
            return Ok(carried == 0);
        }
    }
}

/// The encoding of a file: a byte-order mark decides, then UTF-8 if every byte sequence is valid
/// UTF-8, else Windows-1252 (what spreadsheet programs write on Windows; it also reads ISO-8859-1).
/// Also says whether it was detected, and whether the file was found to be valid UTF-8.
fn sniff_encoding(path: &Path, given: Option<&'static Encoding>) -> std::io::Result<(&'static Encoding, bool, bool)> {
    if let Some(e) = given {
        return Ok((e, false, false));
    }
    let mut head = [0u8; 3];
    let mut file = File::open(path)?;
    let mut n = 0;
    while n < head.len() {
        match file.read(&mut head[n..])? {
            0 => break,
            m => n += m,
        }
    }
    if let Some((encoding, _)) = Encoding::for_bom(&head[..n]) {
        return Ok((encoding, true, false));
    }
    let utf8 = is_utf8(path)?;
    Ok((if utf8 { encoding_rs::UTF_8 } else { encoding_rs::WINDOWS_1252 }, true, utf8))
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
    let (encoding, encoding_detected, checked) =
        sniff_encoding(path, opts.encoding).map_err(|e| cannot_read(path, e))?;
    let (delimiter, delimiter_detected) = match opts.delimiter {
        Some(d) => (d, false),
        None => (detect_delimiter(&head_of(path, encoding, checked).map_err(|e| cannot_read(path, e))?), true),
    };
    let newlines = Newlines::default();
    let text = text_reader(path, encoding, checked).map_err(|e| cannot_read(path, e))?;
    let counting = Counting { inner: text, offset: 0, newlines: newlines.clone() };
    let mut reader = csv::ReaderBuilder::new().delimiter(delimiter).flexible(false).from_reader(counting);
    let header = reader.headers().map_err(|e| ClientError::BadInput(format!("{}: {e}", path.display())))?;
    let (headers, skip) = headers_of(header);
    Ok(Table {
        path: path.to_path_buf(),
        layout: Layout::Csv { encoding: encoding.name(), encoding_detected, delimiter, delimiter_detected },
        headers,
        body: Body::Csv { reader, newlines, skip },
    })
}

fn open_sheet(path: &Path, opts: &ReadOptions) -> Result<Table, ClientError> {
    let mut book = calamine::open_workbook_auto(path).map_err(|e| cannot_read(path, e))?;
    let names = book.sheet_names();
    let sheet = match &opts.sheet {
        Some(s) if names.contains(s) => s.clone(),
        Some(s) => {
            return Err(ClientError::BadInput(format!(
                "{}: no sheet named {s:?} (sheets: {})",
                path.display(),
                names.join(", ")
            )));
        }
        None => names.first().cloned().ok_or_else(|| cannot_read(path, "the workbook has no sheet"))?,
    };
    let range = book.worksheet_range(&sheet).map_err(|e| cannot_read(path, e))?;
    let first_line = range.start().map_or(1, |(row, _)| u64::from(row) + 1);
    let decimal = opts.decimal.unwrap_or('.');
    let mut rows = range.rows().enumerate().map(|(i, cells)| {
        let record: csv::StringRecord = cells.iter().map(|c| cell_text(c, decimal)).collect();
        (first_line + i as u64, record)
    });
    let Some((_, header)) = rows.next() else {
        return Err(ClientError::BadInput(format!("{}: sheet {sheet:?} is empty", path.display())));
    };
    let (headers, skip) = headers_of(&header);
    let rows: Vec<(u64, csv::StringRecord)> =
        rows.filter(|(_, r)| r.iter().any(|c| !c.is_empty())).map(|(line, r)| (line, without(r, skip))).collect();
    Ok(Table {
        path: path.to_path_buf(),
        layout: Layout::Sheet { sheet },
        headers,
        body: Body::Sheet { rows: rows.into_iter() },
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

/// A workbook cell as the text a CSV export would have held: whole numbers without a fraction,
/// other numbers with the file's decimal separator, dates as ISO 8601.
fn cell_text(cell: &Data, decimal: char) -> String {
    match cell {
        Data::Empty => String::new(),
        Data::String(s) | Data::DateTimeIso(s) | Data::DurationIso(s) => s.clone(),
        Data::Int(i) => i.to_string(),
        Data::Float(f) if f.fract() == 0.0 && f.abs() < 1e15 => format!("{}", *f as i64),
        Data::Float(f) => f.to_string().replace('.', &decimal.to_string()),
        Data::Bool(b) => b.to_string(),
        Data::DateTime(d) => match d.as_datetime() {
            Some(t) if t.time() == chrono::NaiveTime::MIN => t.format("%Y-%m-%d").to_string(),
            Some(t) => t.format("%Y-%m-%dT%H:%M:%S").to_string(),
            None => d.to_string(),
        },
        Data::Error(e) => format!("#{e:?}"),
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

    #[test]
    fn lines_count_newlines_before_the_record() {
        let newlines = Newlines::default();
        if let Ok(mut g) = newlines.0.lock() {
            g.0.extend([5, 11, 20]);
        }
        assert_eq!(newlines.before(6), 1);
        assert_eq!(newlines.before(11), 2, "a record reported at the LF of a CRLF");
        assert_eq!(newlines.before(30), 3);
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
