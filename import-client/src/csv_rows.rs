//! CSV records read field by field, so that memory holds one record within the limits whatever
//! the file: a field longer than [`caps::CELL_BYTES`] is counted, not kept, and refuses its
//! record, as do a record past [`caps::ROW_BYTES`] or [`caps::COLUMNS`]. Lines are counted as
//! the bytes go by (a quoted field's newlines included), so a record's line is where it starts.

use std::io::Read;

use csv_core::ReadFieldResult;

use super::caps;

/// One record: its line, its fields, and why it is refused when it is past a limit (the fields past
/// it are then left empty).
pub(super) type Record = (u64, csv::StringRecord, Option<String>);

pub(super) struct CsvRows {
    input: Box<dyn Read>,
    core: csv_core::Reader,
    buf: Vec<u8>,
    start: usize,
    end: usize,
    eof: bool,
    /// Newlines before `buf[start]`.
    newlines: u64,
    field: Vec<u8>,
}

impl CsvRows {
    pub(super) fn new(input: Box<dyn Read>, delimiter: u8) -> Self {
        Self {
            input,
            core: csv_core::ReaderBuilder::new().delimiter(delimiter).build(),
            buf: vec![0; 64 * 1024],
            start: 0,
            end: 0,
            eof: false,
            newlines: 0,
            field: vec![0; caps::CELL_BYTES],
        }
    }

    fn fill(&mut self) -> std::io::Result<()> {
        if self.start == self.end && !self.eof {
            self.end = loop {
                match self.input.read(&mut self.buf) {
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                    other => break other?,
                }
            };
            self.start = 0;
            self.eof = self.end == 0;
        }
        Ok(())
    }

    fn advance(&mut self, n: usize) {
        self.newlines += memchr::memchr_iter(b'\n', &self.buf[self.start..self.start + n]).count() as u64;
        self.start += n;
    }

    /// Skips the line ends before a record (blank lines, and the LF of a CRLF).
    fn skip_line_ends(&mut self) -> std::io::Result<()> {
        loop {
            self.fill()?;
            let blank = self.buf[self.start..self.end].iter().take_while(|&&b| b == b'\n' || b == b'\r').count();
            self.advance(blank);
            if self.start < self.end || self.eof {
                return Ok(());
            }
        }
    }

    pub(super) fn next_record(&mut self) -> Option<std::io::Result<Record>> {
        self.read_record().transpose()
    }

    fn read_record(&mut self) -> std::io::Result<Option<Record>> {
        self.skip_line_ends()?;
        let line = 1 + self.newlines;
        let (mut fields, mut problems, mut bytes) = (Vec::new(), Vec::<String>::new(), 0usize);
        // Cells read, kept or not: past the last column kept, `fields` stops growing.
        let (mut out, mut over, mut cells) = (0usize, 0u64, 0usize);
        loop {
            self.fill()?;
            let (result, nin, nout) = self.core.read_field(&self.buf[self.start..self.end], &mut self.field[out..]);
            self.advance(nin);
            out += nout;
            match result {
                ReadFieldResult::InputEmpty => {}
                ReadFieldResult::OutputFull => {
                    over += out as u64;
                    out = 0;
                }
                ReadFieldResult::End => return Ok(None),
                ReadFieldResult::Field { record_end } => {
                    let column = cells;
                    cells += 1;
                    let text = if over > 0 {
                        refuse(
                            &mut problems,
                            format!(
                                "column {} holds {} bytes, more than the {} a cell may hold",
                                column + 1,
                                over + out as u64,
                                caps::CELL_BYTES
                            ),
                        );
                        String::new()
                    } else if bytes + out > caps::ROW_BYTES {
                        if bytes <= caps::ROW_BYTES {
                            problems
                                .push(format!("the row holds more than the {} bytes a row may hold", caps::ROW_BYTES));
                        }
                        String::new()
                    } else {
                        String::from_utf8(self.field[..out].to_vec())
                            .map_err(|_| std::io::Error::other(format!("line {line}: a field that is not UTF-8")))?
                    };
                    bytes = bytes.saturating_add(out);
                    (out, over) = (0, 0);
                    if column < caps::COLUMNS {
                        fields.push(text);
                    } else if column == caps::COLUMNS {
                        problems.push(format!("the row has more than {} cells", caps::COLUMNS));
                    }
                    if record_end {
                        let reason = (!problems.is_empty()).then(|| said(&problems, cells));
                        return Ok(Some((line, fields.into_iter().collect(), reason)));
                    }
                }
            }
        }
    }
}

/// How many cells' problems a row's reason names; the rest are counted.
const PROBLEMS_NAMED: usize = 5;

/// Adds a cell's problem to a row's, while fewer than [`PROBLEMS_NAMED`] are named (a row of a
/// million oversized cells is refused in one sentence).
fn refuse(problems: &mut Vec<String>, problem: String) {
    if problems.len() < PROBLEMS_NAMED {
        problems.push(problem);
    } else if problems.len() == PROBLEMS_NAMED {
        problems.push("and more cells like these".to_string());
    }
}

/// A row's reason: its problems, and how many cells it has where it has too many.
fn said(problems: &[String], cells: usize) -> String {
    let reason = problems.join("; ");
    if cells > caps::COLUMNS { format!("{reason} ({cells} cells)") } else { reason }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn records(text: &str, chunk: usize) -> Vec<(u64, Vec<String>, Option<String>)> {
        struct Slow<'a>(&'a [u8], usize);
        impl Read for Slow<'_> {
            fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
                let n = self.0.len().min(self.1).min(buf.len());
                buf[..n].copy_from_slice(&self.0[..n]);
                self.0 = &self.0[n..];
                Ok(n)
            }
        }
        let input: Box<dyn Read> = Box::new(Slow(Box::leak(text.as_bytes().to_vec().into_boxed_slice()), chunk));
        let mut rows = CsvRows::new(input, b',');
        std::iter::from_fn(|| rows.next_record())
            .map(|r| r.map(|(l, f, why)| (l, f.iter().map(str::to_string).collect(), why)))
            .collect::<Result<_, _>>()
            .unwrap_or_default()
    }

    #[test]
    fn lines_are_where_records_start() {
        let text = "a,b\r\n1,\"x\r\ny\"\r\n\r\n\n2,3\n4,5";
        for chunk in [1, 2, 5, 1000] {
            let got = records(text, chunk);
            let lines: Vec<u64> = got.iter().map(|r| r.0).collect();
            assert_eq!(lines, [1, 2, 6, 7], "chunk {chunk}");
            assert_eq!(got[1].1, ["1", "x\r\ny"]);
        }
    }

    #[test]
    fn a_row_of_many_oversized_cells_names_five() {
        let big = "x".repeat(caps::CELL_BYTES + 1);
        let text = format!("a\n{}\n", vec![big; 8].join(","));
        let why = records(&text, 1 << 20)[1].2.clone().unwrap_or_default();
        assert_eq!(why.matches("more than the 65536 a cell may hold").count(), 5, "{why}");
        assert!(why.ends_with("; and more cells like these"), "{why}");
    }

    #[test]
    fn a_field_past_its_limit_refuses_its_record_only() {
        let text = format!("a,b\n1,{}\n2,3\n", "x".repeat(caps::CELL_BYTES * 3));
        let got = records(&text, 4096);
        assert_eq!(got.len(), 3);
        assert_eq!(got[1].1, ["1", ""]);
        assert!(got[1].2.as_deref().is_some_and(|w| w.contains("column 2 holds 196608 bytes")), "{:?}", got[1].2);
        assert_eq!((got[2].1.clone(), got[2].2.clone()), (vec!["2".to_string(), "3".to_string()], None));
    }
}
