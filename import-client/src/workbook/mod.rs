//! `.xlsx`/`.xlsm` and `.ods` sheets, streamed: the sheet is read on a thread of its own, row by
//! row, into a channel of [`QUEUED`] rows, so memory holds a few rows and, for `.xlsx`, the shared
//! strings, whatever the file. Every limit is checked while reading ([`caps`]): a cell or a row past
//! its limit comes out as a row refused with its reason; a file past a limit of its own stops with
//! a message naming it. Nothing is expanded that the file does not hold: an empty cell or row
//! repeated a million times costs nothing, a full one counts against the rows' limit.

mod ods;
mod xlsx;
mod xml;

use std::{
    fs::File,
    io::{BufReader, Read, Seek, SeekFrom},
    path::Path,
    sync::mpsc::{Receiver, SyncSender, sync_channel},
};

use super::caps;

/// Rows read ahead of the import.
const QUEUED: usize = 16;

/// A row of a sheet: its line (the sheet's row number), its cells, and why it is refused when a
/// cell or the row is past its limit (the cells past it are then left empty).
pub(super) type SheetRow = (u64, csv::StringRecord, Option<String>);

enum Message {
    Header { sheet: String, header: csv::StringRecord },
    Row(SheetRow),
    Failed(String),
}

/// A sheet being read.
pub(super) struct Sheet {
    pub name: String,
    pub header: csv::StringRecord,
    rows: Receiver<Message>,
}

impl Sheet {
    /// Opens `path` and reads up to its header row (the first row with a cell in it), on a thread
    /// that goes on reading as rows are taken.
    pub(super) fn open(path: &Path, sheet: Option<String>, decimal: char) -> Result<Self, String> {
        let ods = path.extension().is_some_and(|e| e.eq_ignore_ascii_case("ods"));
        let archive = open_archive(path)?;
        let (tx, rx) = sync_channel(QUEUED);
        std::thread::spawn(move || {
            let mut rows = Emitter { tx, sheet: String::new(), header: None, produced: 0, cells: 0 };
            let read = if ods {
                ods::read(archive, sheet.as_deref(), decimal, &mut rows)
            } else {
                xlsx::read(archive, sheet.as_deref(), decimal, &mut rows)
            };
            let failure = match read {
                Err(Stop::Failed(why)) => Some(why),
                Ok(()) if rows.header.is_none() => Some(format!("sheet {:?} is empty", rows.sheet)),
                _ => None,
            };
            if let Some(why) = failure {
                let _ = rows.tx.send(Message::Failed(why));
            }
        });
        match rx.recv() {
            Ok(Message::Header { sheet, header }) => Ok(Self { name: sheet, header, rows: rx }),
            Ok(Message::Failed(why)) => Err(why),
            Ok(Message::Row(_)) | Err(_) => Err("the sheet could not be read".to_string()),
        }
    }

    /// The next row below the header; an error ends the sheet.
    pub(super) fn next_row(&mut self) -> Option<Result<SheetRow, String>> {
        match self.rows.recv().ok()? {
            Message::Row(row) => Some(Ok(row)),
            Message::Failed(why) => Some(Err(why)),
            Message::Header { .. } => Some(Err("a second header".to_string())),
        }
    }
}

/// Why reading stopped early.
enum Stop {
    /// The file is past a limit of its own, or broken.
    Failed(String),
    /// Nobody takes rows any more.
    Gone,
}

impl<E: std::fmt::Display> From<E> for Stop {
    fn from(e: E) -> Self {
        Stop::Failed(e.to_string())
    }
}

/// A cell's text as it is read: kept up to [`caps::CELL_BYTES`], then only counted.
#[derive(Default)]
struct Text {
    text: String,
    over: Option<u64>,
}

impl Text {
    fn push(&mut self, s: &str) {
        match &mut self.over {
            Some(n) => *n += s.len() as u64,
            None if self.text.len() + s.len() > caps::CELL_BYTES => {
                self.over = Some((self.text.len() + s.len()) as u64);
                self.text = String::new();
            }
            None => self.text.push_str(s),
        }
    }

    fn finish(self) -> Cell {
        match self.over {
            Some(n) => Cell::TooLong(n),
            None => Cell::Text(self.text),
        }
    }
}

/// A cell read.
#[derive(Clone)]
enum Cell {
    Text(String),
    /// Longer than [`caps::CELL_BYTES`]: this many bytes.
    TooLong(u64),
    /// Left out: the row's cells before it hold [`caps::ROW_BYTES`] already.
    RowFull,
}

/// A row's cells by column (from 0), in order, within [`caps::COLUMNS`] and [`caps::ROW_BYTES`].
#[derive(Default)]
struct RowCells {
    cells: Vec<(u32, Cell)>,
    bytes: usize,
}

impl RowCells {
    /// Adds a cell; one past the last column, or not after the cell before, is left out (a cell
    /// past the last column makes the row wider than any header, so it is refused for that).
    fn push(&mut self, col: u32, cell: Cell) {
        if (col as usize) >= caps::COLUMNS || self.cells.last().is_some_and(|(last, _)| *last >= col) {
            return;
        }
        let cell = match cell {
            Cell::Text(t) if self.bytes + t.len() > caps::ROW_BYTES => Cell::RowFull,
            Cell::Text(t) => {
                self.bytes += t.len();
                Cell::Text(t)
            }
            other => other,
        };
        self.cells.push((col, cell));
    }

    fn clear(&mut self) {
        self.cells.clear();
        self.bytes = 0;
    }

    fn next_column(&self) -> u32 {
        self.cells.last().map_or(0, |(col, _)| col + 1)
    }
}

impl Cell {
    fn is_empty(&self) -> bool {
        matches!(self, Cell::Text(t) if t.is_empty())
    }
}

/// Turns a parser's rows into the header and the records, under the limits, and queues them.
struct Emitter {
    tx: SyncSender<Message>,
    sheet: String,
    /// The header's first column and its width, once it is read.
    header: Option<(u32, usize)>,
    produced: u64,
    cells: u64,
}

fn column_name(col: u32) -> String {
    let mut n = col + 1;
    let mut name = Vec::new();
    while n > 0 {
        name.push(b'A' + ((n - 1) % 26) as u8);
        n = (n - 1) / 26;
    }
    name.reverse();
    String::from_utf8_lossy(&name).into_owned()
}

impl Emitter {
    /// One row of the sheet: its number (from 1) and its cells.
    fn row(&mut self, line: u64, cells: &RowCells) -> Result<(), Stop> {
        let cells = &cells.cells;
        let Some(last) = cells.iter().rposition(|(_, c)| !c.is_empty()) else { return Ok(()) };
        let cells = &cells[..=last];
        let Some((first, width)) = self.header else { return self.header_row(line, cells) };
        self.produced += 1;
        if self.produced > caps::SHEET_ROWS {
            return Err(Stop::Failed(format!(
                "sheet {:?} has more than {} rows (row {line})",
                self.sheet,
                caps::SHEET_ROWS
            )));
        }
        self.cells += cells.iter().filter(|(_, c)| !c.is_empty()).count() as u64;
        if self.cells > caps::SHEET_CELLS {
            return Err(Stop::Failed(format!(
                "sheet {:?} has more than {} cells with something in them (row {line})",
                self.sheet,
                caps::SHEET_CELLS
            )));
        }
        let mut record = vec![String::new(); width];
        let mut problems = Vec::new();
        for (col, cell) in cells.iter().filter(|(col, _)| *col >= first) {
            let at = (col - first) as usize;
            let text = match cell {
                Cell::TooLong(n) => {
                    problems.push(format!(
                        "cell {}{line} holds {n} bytes, more than the {} a cell may hold",
                        column_name(*col),
                        caps::CELL_BYTES
                    ));
                    continue;
                }
                Cell::RowFull => {
                    problems.push(format!("the row holds more than the {} bytes a row may hold", caps::ROW_BYTES));
                    break;
                }
                Cell::Text(t) if t.is_empty() => continue,
                Cell::Text(t) => t,
            };
            if at >= record.len() {
                record.resize(at + 1, String::new());
            }
            record[at] = text.clone();
        }
        let reason = (!problems.is_empty()).then(|| problems.join("; "));
        self.send(Message::Row((line, record.into_iter().collect(), reason)))
    }

    fn header_row(&mut self, line: u64, cells: &[(u32, Cell)]) -> Result<(), Stop> {
        let full = || format!("the header row holds more than the {} bytes a row may hold", caps::ROW_BYTES);
        let first = cells.iter().find(|(_, c)| !c.is_empty()).map_or(0, |(col, _)| *col);
        let last = cells.last().map_or(0, |(col, _)| *col);
        let width = (last - first) as usize + 1;
        let mut header = vec![String::new(); width];
        for (col, cell) in cells.iter().filter(|(col, _)| *col >= first) {
            match cell {
                Cell::TooLong(n) => {
                    return Err(Stop::Failed(format!(
                        "the header cell {}{line} holds {n} bytes, more than the {} a cell may hold",
                        column_name(*col),
                        caps::CELL_BYTES
                    )));
                }
                Cell::RowFull => return Err(Stop::Failed(full())),
                Cell::Text(t) => header[(col - first) as usize] = t.clone(),
            }
        }
        self.header = Some((first, width));
        let sheet = self.sheet.clone();
        self.send(Message::Header { sheet, header: header.into_iter().collect() })
    }

    fn send(&self, message: Message) -> Result<(), Stop> {
        self.tx.send(message).map_err(|_| Stop::Gone)
    }
}

/// A zip archive whose directory has been checked before it is read (its entries and size are
/// limited: the zip reader holds the whole directory in memory).
fn open_archive(path: &Path) -> Result<zip::ZipArchive<File>, String> {
    let mut file = File::open(path).map_err(|e| e.to_string())?;
    let len = file.seek(SeekFrom::End(0)).map_err(|e| e.to_string())?;
    let tail_len = len.min(22 + 65_535);
    file.seek(SeekFrom::Start(len - tail_len)).map_err(|e| e.to_string())?;
    let mut tail = Vec::with_capacity(tail_len as usize);
    (&mut file).take(tail_len).read_to_end(&mut tail).map_err(|e| e.to_string())?;
    let end = tail.windows(4).rposition(|w| w == b"PK\x05\x06").ok_or("not a workbook (no zip directory)")?;
    let record = &tail[end..];
    if record.len() < 22 {
        return Err("not a workbook (its zip directory is cut off)".into());
    }
    let entries = u16::from_le_bytes([record[10], record[11]]);
    let size = u32::from_le_bytes([record[12], record[13], record[14], record[15]]);
    if usize::from(entries) > caps::ZIP_ENTRIES || size as usize > caps::ZIP_DIRECTORY_BYTES {
        return Err(format!(
            "the workbook's zip directory lists {entries} entries in {size} bytes; a workbook may have at most \
             {} entries in {} bytes",
            caps::ZIP_ENTRIES,
            caps::ZIP_DIRECTORY_BYTES
        ));
    }
    file.seek(SeekFrom::Start(0)).map_err(|e| e.to_string())?;
    zip::ZipArchive::new(file).map_err(|e| format!("not a workbook: {e}"))
}

/// A part of the workbook being read.
type Part<'a> = xml::Reader<BufReader<Limited<zip::read::ZipFile<'a, File>>>>;

/// A part of the workbook, decompressed as it is read, at most [`caps::PART_BYTES`].
fn part<'a>(archive: &'a mut zip::ZipArchive<File>, name: &str) -> Result<Option<Part<'a>>, String> {
    match archive.by_name(name) {
        Ok(f) => Ok(Some(xml::Reader::new(
            BufReader::with_capacity(64 * 1024, Limited { inner: f, left: caps::PART_BYTES, what: name.to_string() }),
            name,
        ))),
        Err(zip::result::ZipError::FileNotFound) => Ok(None),
        Err(e) => Err(format!("{name}: {e}")),
    }
}

/// A reader that fails past a number of bytes (a zip bomb decompresses to far more than it says).
struct Limited<R> {
    inner: R,
    left: u64,
    what: String,
}

impl<R: Read> Read for Limited<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.left = self.left.checked_sub(n as u64).ok_or_else(|| {
            std::io::Error::other(format!(
                "{} decompresses to more than {} bytes, the most a part of a workbook may hold",
                self.what,
                caps::PART_BYTES
            ))
        })?;
        Ok(n)
    }
}

/// A number as the text a CSV export would have held: whole numbers without a fraction, other
/// numbers with the file's decimal separator.
fn number_text(f: f64, decimal: char) -> String {
    if f.fract() == 0.0 && f.abs() < 1e15 {
        format!("{}", f as i64)
    } else {
        f.to_string().replace('.', &decimal.to_string())
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn columns_are_named_as_spreadsheets_name_them() {
        assert_eq!(super::column_name(0), "A");
        assert_eq!(super::column_name(25), "Z");
        assert_eq!(super::column_name(26), "AA");
        assert_eq!(super::column_name(16_383), "XFD");
    }
}
