//! Reading what people have: CSV in any common delimiter and encoding, JSON Lines, and the first
//! (or a named) sheet of an `.xlsx`/`.ods` workbook. Tabular rows come out as cells with their
//! line in the file (the sheet's row number for a workbook; the header is line 1).

use std::{
    fs::File,
    io::{BufRead, BufReader},
    path::{Path, PathBuf},
};

use calamine::{Data, Reader};
use encoding_rs::Encoding;
use serde_json::Value;

use super::ClientError;

/// The column a rejects file adds with a row's reasons; a file that has it (a rejects file being
/// imported again) has it left out.
pub(super) const REASONS_COLUMN: &str = "import_errors";

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
    /// The decoded file, read whole: line numbers come from byte offsets (the csv crate's own
    /// count is off by one on CRLF files, which most spreadsheet exports are).
    Csv {
        reader: csv::Reader<std::io::Cursor<Vec<u8>>>,
        scanned: usize,
        line: u64,
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
            Body::Csv { reader, scanned, line, skip } => {
                let mut record = csv::StringRecord::new();
                match reader.read_record(&mut record) {
                    Ok(false) => None,
                    Err(e) => Some(Err(ClientError::BadInput(format!("{}: {e}", self.path.display())))),
                    Ok(true) => {
                        advance_line(reader.get_ref().get_ref(), &record, scanned, line);
                        if let Some(i) = *skip {
                            record = record.iter().enumerate().filter(|(j, _)| *j != i).map(|(_, c)| c).collect();
                        }
                        Some(Ok((*line, Row::Cells(record))))
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

/// Moves `line` to the line the record starts on.
fn advance_line(data: &[u8], record: &csv::StringRecord, scanned: &mut usize, line: &mut u64) {
    let mut start = record.position().map_or(*scanned, |p| usize::try_from(p.byte()).unwrap_or(*scanned));
    // After a CRLF the reported start is the LF; the record begins past it.
    while data.get(start).is_some_and(|b| matches!(b, b'\r' | b'\n')) {
        start += 1;
    }
    if let Some(skipped) = data.get(*scanned..start) {
        *line += memchr::memchr_iter(b'\n', skipped).count() as u64;
        *scanned = start;
    }
}

/// The text of a file: a byte-order mark decides, then UTF-8 if the bytes are valid UTF-8, else
/// Windows-1252 (what spreadsheet programs write on Windows; it also reads ISO-8859-1).
pub(super) fn decode(
    bytes: Vec<u8>,
    given: Option<&'static Encoding>,
) -> Result<(Vec<u8>, &'static Encoding, bool), String> {
    if let Some(encoding) = given {
        let (text, had_errors) = encoding.decode_with_bom_removal(&bytes);
        if had_errors {
            return Err(format!("the file is not valid {}", encoding.name()));
        }
        return Ok((text.into_owned().into_bytes(), encoding, false));
    }
    if let Some((encoding, bom)) = Encoding::for_bom(&bytes) {
        if encoding == encoding_rs::UTF_8 {
            let mut bytes = bytes;
            bytes.drain(..bom);
            return match String::from_utf8(bytes) {
                Ok(text) => Ok((text.into_bytes(), encoding, true)),
                Err(e) => Err(format!("the file starts as UTF-8 but is not: {}", e.utf8_error())),
            };
        }
        let (text, had_errors) = encoding.decode_with_bom_removal(&bytes);
        if had_errors {
            return Err(format!("the file starts as {} but is not", encoding.name()));
        }
        return Ok((text.into_owned().into_bytes(), encoding, true));
    }
    match String::from_utf8(bytes) {
        Ok(text) => Ok((text.into_bytes(), encoding_rs::UTF_8, true)),
        Err(e) => {
            let (text, _) = encoding_rs::WINDOWS_1252.decode_without_bom_handling(e.as_bytes());
            Ok((text.into_owned().into_bytes(), encoding_rs::WINDOWS_1252, true))
        }
    }
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
    let bytes = std::fs::read(path).map_err(|e| cannot_read(path, e))?;
    let (data, encoding, encoding_detected) =
        decode(bytes, opts.encoding).map_err(|e| ClientError::BadInput(format!("{}: {e}", path.display())))?;
    let (delimiter, delimiter_detected) = match opts.delimiter {
        Some(d) => (d, false),
        None => (detect_delimiter(&data), true),
    };
    let mut reader =
        csv::ReaderBuilder::new().delimiter(delimiter).flexible(false).from_reader(std::io::Cursor::new(data));
    let header = reader.headers().map_err(|e| ClientError::BadInput(format!("{}: {e}", path.display())))?;
    let mut headers: Vec<String> = header.iter().map(|h| h.trim().to_string()).collect();
    let skip = headers.iter().position(|h| h == REASONS_COLUMN);
    if let Some(i) = skip {
        headers.remove(i);
    }
    Ok(Table {
        path: path.to_path_buf(),
        layout: Layout::Csv { encoding: encoding.name(), encoding_detected, delimiter, delimiter_detected },
        headers,
        body: Body::Csv { reader, scanned: 0, line: 1, skip },
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
    let mut headers: Vec<String> = header.iter().map(|h| h.trim().to_string()).collect();
    let skip = headers.iter().position(|h| h == REASONS_COLUMN);
    if let Some(i) = skip {
        headers.remove(i);
    }
    let rows: Vec<(u64, csv::StringRecord)> = rows
        .filter(|(_, r)| r.iter().any(|c| !c.is_empty()))
        .map(|(line, r)| {
            let r = r.iter().enumerate().filter(|(j, _)| Some(*j) != skip).map(|(_, c)| c).collect();
            (line, r)
        })
        .collect();
    Ok(Table {
        path: path.to_path_buf(),
        layout: Layout::Sheet { sheet },
        headers,
        body: Body::Sheet { rows: rows.into_iter() },
    })
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

    #[test]
    fn encodings_are_told_apart() {
        let latin = b"J\xfcrgen".to_vec();
        let (text, enc, detected) = decode(latin, None).unwrap();
        assert_eq!((String::from_utf8(text).unwrap().as_str(), enc.name(), detected), ("Jürgen", "windows-1252", true));
        let bom = [&[0xEF, 0xBB, 0xBF][..], "Jürgen".as_bytes()].concat();
        assert_eq!(decode(bom, None).unwrap().0, "Jürgen".as_bytes());
        let utf16: Vec<u8> = [0xFF, 0xFE].into_iter().chain("Jü".encode_utf16().flat_map(u16::to_le_bytes)).collect();
        let (text, enc, _) = decode(utf16, None).unwrap();
        assert_eq!((text.as_slice(), enc.name()), ("Jü".as_bytes(), "UTF-16LE"));
        assert!(decode(b"\xff\xfe\x00".to_vec(), Some(encoding_rs::UTF_8)).is_err());
    }
}
