//! The rejects file (`--rejects FILE`): every refused row as the file had it, plus a column with
//! every reason, so that the owner fixes those rows only and imports the rejects file alone (the
//! reasons column is left out when it is read). A table's rejects are UTF-8 CSV with a byte-order
//! mark (spreadsheet programs then read the accents right) and the file's delimiter; a JSON Lines
//! file's rejects are JSON Lines, the reasons under the same name. A CSV rejects file's cells that a
//! spreadsheet program would take for a formula are neutralised (`source::neutralised`), and read
//! back as they were when it is imported.

use std::{
    fs::File,
    io::{BufWriter, Write},
    path::{Path, PathBuf},
};

use serde_json::Value;

use super::{
    ClientError,
    source::{Layout, REASONS_COLUMN, Row, neutralised},
};

/// A row that was not imported, and why.
pub(super) struct Refused {
    pub line: u64,
    pub row: Row,
    pub reasons: Vec<String>,
}

enum Out {
    Csv(Box<csv::Writer<BufWriter<File>>>),
    Lines(BufWriter<File>),
}

pub(super) struct Rejects {
    pub path: PathBuf,
    out: Out,
    /// The header's cells before the reasons column.
    columns: usize,
    pub written: u64,
}

fn failed(path: &Path, e: impl std::fmt::Display) -> ClientError {
    ClientError::BadInput(format!("cannot write {}: {e}", path.display()))
}

impl Rejects {
    pub(super) fn create(path: &Path, headers: &[String], layout: &Layout) -> Result<Self, ClientError> {
        let mut file = BufWriter::new(File::create(path).map_err(|e| failed(path, e))?);
        let out = if matches!(layout, Layout::JsonLines) {
            Out::Lines(file)
        } else {
            file.write_all(b"\xEF\xBB\xBF").map_err(|e| failed(path, e))?;
            // Flexible: a refused row may have more or fewer cells than the header (a stray
            // delimiter), and it belongs in this file like any other.
            let mut w = csv::WriterBuilder::new().delimiter(layout.delimiter()).flexible(true).from_writer(file);
            let header = headers.iter().map(|h| neutralised(h)).chain([REASONS_COLUMN.into()]);
            w.write_record(header.map(|c| c.into_owned())).map_err(|e| failed(path, e))?;
            Out::Csv(Box::new(w))
        };
        Ok(Self { path: path.to_path_buf(), out, columns: headers.len(), written: 0 })
    }

    pub(super) fn write(&mut self, refused: &Refused) -> Result<(), ClientError> {
        let reasons = refused.reasons.join("; ");
        let result = match (&mut self.out, &refused.row) {
            (Out::Csv(w), Row::Cells(record)) => {
                w.write_record(shaped(record, self.columns, &reasons)).map_err(|e| e.to_string())
            }
            (Out::Lines(w), Row::Object(object)) => {
                let mut object = object.clone();
                if let Value::Object(o) = &mut object {
                    o.insert(REASONS_COLUMN.to_string(), Value::from(refused.reasons.clone()));
                }
                writeln!(w, "{object}").map_err(|e| e.to_string())
            }
            _ => Err("a row of another file".to_string()),
        };
        result.map_err(|e| failed(&self.path, e))?;
        self.written += 1;
        Ok(())
    }

    pub(super) fn finish(self) -> Result<(), ClientError> {
        let flushed = match self.out {
            Out::Csv(mut w) => w.flush(),
            Out::Lines(mut w) => w.flush(),
        };
        flushed.map_err(|e| failed(&self.path, e))
    }
}

/// A refused row's cells as the rejects file holds them: the reasons in the header's reasons
/// column, the row's cells before it (empty cells where the row was short), and the cells past
/// the header's (a stray delimiter's) after it, so that the row read back still has them and is
/// refused again until they are removed.
fn shaped<'a>(record: &'a csv::StringRecord, columns: usize, reasons: &'a str) -> impl Iterator<Item = String> + 'a {
    let cell = |i: usize| record.get(i).unwrap_or_default();
    let before = (0..columns).map(cell);
    let past = (columns..record.len()).map(cell);
    before.chain([reasons]).chain(past).map(|c| neutralised(c).into_owned())
}
