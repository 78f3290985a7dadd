//! An `.ods` sheet: the rows of one table of `content.xml`, as they are read. A cell or row that
//! the file repeats (`number-columns-repeated`, `number-rows-repeated`) is repeated only when it
//! holds something, and then within the limits of a row and of a sheet.

use std::{fs::File, io::BufRead};

use super::{
    Cell, Emitter, RowCells, Stop, Text, caps, number_text, part,
    xml::{Event, Reader, local_name},
};

pub(super) fn read(
    mut archive: zip::ZipArchive<File>,
    sheet: Option<&str>,
    decimal: char,
    out: &mut Emitter,
) -> Result<(), Stop> {
    let mut r = part(&mut archive, "content.xml")?.ok_or("not a workbook (no content.xml)")?;
    let mut names = Vec::new();
    loop {
        match r.next()? {
            Event::Eof => break,
            Event::Open { name, attrs, empty: false } if local_name(&name) == "table" => {
                let table = Event::attr(&attrs, "name").unwrap_or_default();
                if sheet.is_none_or(|s| s == table) {
                    out.sheet = table;
                    return Table { decimal, line: 0, row: None, cell: None, nested: 0 }.read(&mut r, out);
                }
                if names.len() < caps::ZIP_ENTRIES {
                    names.push(table);
                }
            }
            _ => {}
        }
    }
    Err(Stop::Failed(match sheet {
        Some(s) => format!("no sheet named {s:?} (sheets: {})", names.join(", ")),
        None => "the workbook has no sheet".to_string(),
    }))
}

/// A table being read.
struct Table {
    decimal: char,
    /// The last row's number.
    line: u64,
    row: Option<(RowCells, u64)>,
    cell: Option<OpenCell>,
    /// Depth inside what a cell's text leaves out (annotations, nested tables).
    nested: u32,
}

struct OpenCell {
    repeat: u64,
    value_type: String,
    value: Option<String>,
    text: Text,
    paragraphs: u32,
}

fn repeat(attrs: &[(String, String)], name: &str) -> u64 {
    Event::attr(attrs, name).and_then(|n| n.parse().ok()).unwrap_or(1).max(1)
}

impl Table {
    fn read<R: BufRead>(mut self, r: &mut Reader<R>, out: &mut Emitter) -> Result<(), Stop> {
        loop {
            match r.next()? {
                Event::Eof => return Ok(()),
                Event::Open { name, attrs, empty } => self.open(local_name(&name), &attrs, empty, out)?,
                Event::Close { name } => {
                    if self.close(local_name(&name), out)? {
                        return Ok(());
                    }
                }
                Event::Text(t) => {
                    if let Some(cell) = self.cell.as_mut().filter(|c| c.paragraphs > 0 && self.nested == 0) {
                        cell.text.push(&t);
                    }
                }
            }
        }
    }

    fn open(&mut self, name: &str, attrs: &[(String, String)], empty: bool, out: &mut Emitter) -> Result<(), Stop> {
        if self.nested > 0 || (self.cell.is_some() && matches!(name, "annotation" | "table")) {
            self.nested += u32::from(!empty);
            return Ok(());
        }
        match name {
            "table-row" => {
                self.row = Some((RowCells::default(), repeat(attrs, "number-rows-repeated")));
                if empty {
                    self.end_row(out)?;
                }
            }
            "table-cell" | "covered-table-cell" => {
                let value_type = Event::attr(attrs, "value-type").unwrap_or_default();
                let value = match value_type.as_str() {
                    "float" | "percentage" | "currency" => Event::attr(attrs, "value"),
                    "date" => Event::attr(attrs, "date-value"),
                    "time" => Event::attr(attrs, "time-value"),
                    "boolean" => Event::attr(attrs, "boolean-value"),
                    _ => None,
                };
                let repeat = repeat(attrs, "number-columns-repeated");
                self.cell = Some(OpenCell { repeat, value_type, value, text: Text::default(), paragraphs: 0 });
                if empty {
                    self.end_cell();
                }
            }
            "p" | "h" => {
                if let Some(cell) = self.cell.as_mut() {
                    if cell.paragraphs > 0 {
                        cell.text.push("\n");
                    }
                    cell.paragraphs += 1;
                }
            }
            "s" => {
                let spaces = Event::attr(attrs, "c").and_then(|n| n.parse::<usize>().ok()).unwrap_or(1);
                if let Some(cell) = self.cell.as_mut().filter(|c| c.paragraphs > 0) {
                    cell.text.push(&" ".repeat(spaces.min(caps::CELL_BYTES + 1)));
                }
            }
            "tab" | "line-break" => {
                if let Some(cell) = self.cell.as_mut().filter(|c| c.paragraphs > 0) {
                    cell.text.push(if name == "tab" { "\t" } else { "\n" });
                }
            }
            _ => {}
        }
        Ok(())
    }

    /// Whether the table ended.
    fn close(&mut self, name: &str, out: &mut Emitter) -> Result<bool, Stop> {
        if self.nested > 0 {
            self.nested -= 1;
            return Ok(false);
        }
        match name {
            "table" => return Ok(true),
            "table-row" => self.end_row(out)?,
            "table-cell" | "covered-table-cell" => self.end_cell(),
            _ => {}
        }
        Ok(false)
    }

    fn end_cell(&mut self) {
        let (Some(cell), Some((cells, _))) = (self.cell.take(), self.row.as_mut()) else { return };
        let content = match (cell.value_type.as_str(), cell.value) {
            ("float" | "percentage" | "currency", Some(v)) => {
                Cell::Text(v.trim().parse::<f64>().map_or(v, |f| number_text(f, self.decimal)))
            }
            (_, Some(v)) => Cell::Text(v),
            ("string", None) => cell.text.finish(),
            _ => Cell::Text(String::new()),
        };
        let start = u64::from(cells.next_column());
        if content.is_empty() {
            // An empty cell takes its columns and nothing else, however often it is repeated.
            let next = (start + cell.repeat).min(caps::COLUMNS as u64) as u32;
            if next > 0 && (next as usize) < caps::COLUMNS {
                cells.push(next - 1, Cell::Text(String::new()));
            }
            return;
        }
        for col in start..(start + cell.repeat).min(caps::COLUMNS as u64) {
            cells.push(col as u32, content.clone());
        }
    }

    fn end_row(&mut self, out: &mut Emitter) -> Result<(), Stop> {
        let Some((cells, repeat)) = self.row.take() else { return Ok(()) };
        let has_text = cells.cells.iter().any(|(_, c)| !c.is_empty());
        if !has_text {
            self.line = self.line.saturating_add(repeat);
            return Ok(());
        }
        for _ in 0..repeat {
            self.line += 1;
            out.row(self.line, &cells)?;
        }
        Ok(())
    }
}
