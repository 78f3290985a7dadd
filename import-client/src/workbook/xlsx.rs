//! An `.xlsx` sheet: the workbook's sheet list and relationships, the styles (to tell a date from a
//! number), the shared strings (held in memory, within [`caps::SHARED_STRINGS`] and
//! [`caps::SHARED_STRING_BYTES`]), then the sheet's rows as they are read.

use std::{collections::HashMap, fs::File, io::BufRead};

use chrono::{Duration, NaiveDate, NaiveDateTime, NaiveTime};

use super::{
    Cell, Emitter, RowCells, Stop, Text, caps, number_text, part,
    xml::{Event, Reader, local_name},
};

type Archive = zip::ZipArchive<File>;

pub(super) fn read(mut archive: Archive, sheet: Option<&str>, decimal: char, out: &mut Emitter) -> Result<(), Stop> {
    let book = Book::read(&mut archive)?;
    let (name, target) = match sheet {
        None => book.sheets.first().cloned().ok_or("the workbook has no sheet")?,
        Some(s) => book.sheets.iter().find(|(n, _)| n == s).cloned().ok_or_else(|| {
            let names: Vec<&str> = book.sheets.iter().map(|(n, _)| n.as_str()).collect();
            format!("no sheet named {s:?} (sheets: {})", names.join(", "))
        })?,
    };
    out.sheet = name;
    let dates = date_styles(&mut archive)?;
    let shared = Shared::read(&mut archive, &book.shared_strings)?;
    let mut reader = part(&mut archive, &target)?.ok_or_else(|| format!("the workbook has no part {target}"))?;
    let cells = Cells { dates, shared, date1904: book.date1904, decimal };
    rows(&mut reader, &cells, out)
}

/// The workbook's sheets (name, part) in order, its shared strings' part and its date system.
struct Book {
    sheets: Vec<(String, String)>,
    shared_strings: String,
    date1904: bool,
}

impl Book {
    fn read(archive: &mut Archive) -> Result<Self, Stop> {
        let mut sheets = Vec::new();
        let mut date1904 = false;
        let mut r = part(archive, "xl/workbook.xml")?.ok_or("not a workbook (no xl/workbook.xml)")?;
        loop {
            match r.next()? {
                Event::Eof => break,
                Event::Open { name, attrs, .. } => match local_name(&name) {
                    "sheet" => sheets.push((
                        Event::attr(&attrs, "name").unwrap_or_default(),
                        Event::attr(&attrs, "id").unwrap_or_default(),
                    )),
                    "workbookPr" => date1904 = matches!(Event::attr(&attrs, "date1904").as_deref(), Some("1" | "true")),
                    _ => {}
                },
                _ => {}
            }
            if sheets.len() > caps::ZIP_ENTRIES {
                return Err(Stop::Failed("the workbook lists more sheets than it has parts".into()));
            }
        }
        drop(r);
        let (targets, shared_strings) = relationships(archive)?;
        let sheets = sheets.into_iter().filter_map(|(name, id)| targets.get(&id).map(|t| (name, t.clone()))).collect();
        Ok(Self { sheets, shared_strings, date1904 })
    }
}

/// The workbook's relationships: id -> part, and the shared strings' part.
fn relationships(archive: &mut Archive) -> Result<(HashMap<String, String>, String), Stop> {
    let mut targets = HashMap::new();
    let mut shared = "xl/sharedStrings.xml".to_string();
    let Some(mut r) = part(archive, "xl/_rels/workbook.xml.rels")? else { return Ok((targets, shared)) };
    loop {
        match r.next()? {
            Event::Eof => return Ok((targets, shared)),
            Event::Open { name, attrs, .. } if local_name(&name) == "Relationship" => {
                let target = Event::attr(&attrs, "Target").unwrap_or_default();
                let target = match target.strip_prefix('/') {
                    Some(absolute) => absolute.to_string(),
                    None => format!("xl/{target}"),
                };
                if Event::attr(&attrs, "Type").is_some_and(|t| t.ends_with("/sharedStrings")) {
                    shared = target.clone();
                }
                if targets.len() < caps::ZIP_ENTRIES {
                    targets.insert(Event::attr(&attrs, "Id").unwrap_or_default(), target);
                }
            }
            _ => {}
        }
    }
}

/// Which cell styles show a number as a date or a time.
fn date_styles(archive: &mut Archive) -> Result<Vec<bool>, Stop> {
    let mut custom: HashMap<String, bool> = HashMap::new();
    let mut styles = Vec::new();
    let Some(mut r) = part(archive, "xl/styles.xml")? else { return Ok(styles) };
    let mut in_cell_xfs = false;
    loop {
        match r.next()? {
            Event::Eof => return Ok(styles),
            Event::Open { name, attrs, empty } => match local_name(&name) {
                "numFmt" if custom.len() < caps::ZIP_ENTRIES => {
                    let code = Event::attr(&attrs, "formatCode").unwrap_or_default();
                    custom.insert(Event::attr(&attrs, "numFmtId").unwrap_or_default(), is_date_format(&code));
                }
                "cellXfs" => in_cell_xfs = !empty,
                "xf" if in_cell_xfs && styles.len() < caps::SHEET_ROWS as usize => {
                    let id = Event::attr(&attrs, "numFmtId").unwrap_or_default();
                    let builtin = id.parse::<u32>().is_ok_and(|n| matches!(n, 14..=22 | 27..=36 | 45..=47 | 50..=58));
                    styles.push(builtin || custom.get(&id).copied().unwrap_or(false));
                }
                _ => {}
            },
            Event::Close { name } if local_name(&name) == "cellXfs" => in_cell_xfs = false,
            _ => {}
        }
    }
}

/// Whether a number format shows a date or a time: a d, m, y, h or s outside quotes, brackets and
/// escapes.
fn is_date_format(code: &str) -> bool {
    let mut chars = code.chars();
    while let Some(c) = chars.next() {
        match c {
            '"' => {
                for q in chars.by_ref() {
                    if q == '"' {
                        break;
                    }
                }
            }
            '[' => {
                for q in chars.by_ref() {
                    if q == ']' {
                        break;
                    }
                }
            }
            '\\' | '_' | '*' => {
                chars.next();
            }
            c if "dmyhsDMYHS".contains(c) => return true,
            _ => {}
        }
    }
    false
}

/// The shared strings, one text with their ends, and which were too long to keep.
struct Shared {
    text: String,
    ends: Vec<u32>,
    too_long: Vec<(u32, u64)>,
}

impl Shared {
    fn read(archive: &mut Archive, name: &str) -> Result<Self, Stop> {
        let mut shared = Self { text: String::new(), ends: Vec::new(), too_long: Vec::new() };
        let Some(mut r) = part(archive, name)? else { return Ok(shared) };
        let (mut item, mut in_t, mut skip) = (None::<Text>, false, 0u32);
        loop {
            match r.next()? {
                Event::Eof => return Ok(shared),
                Event::Open { name, empty: false, .. } => match local_name(&name) {
                    "si" => item = Some(Text::default()),
                    "t" => in_t = true,
                    "rPh" => skip += 1,
                    _ => {}
                },
                Event::Open { name, empty: true, .. } if local_name(&name) == "si" => shared.push(Text::default())?,
                Event::Close { name } => match local_name(&name) {
                    "si" => shared.push(item.take().unwrap_or_default())?,
                    "t" => in_t = false,
                    "rPh" => skip = skip.saturating_sub(1),
                    _ => {}
                },
                Event::Text(t) if in_t && skip == 0 => {
                    if let Some(item) = item.as_mut() {
                        item.push(&t)
                    }
                }
                _ => {}
            }
        }
    }

    fn push(&mut self, item: Text) -> Result<(), Stop> {
        let index = self.ends.len() as u32;
        match item.finish() {
            Cell::Text(t) => self.text.push_str(&t),
            Cell::TooLong(n) => self.too_long.push((index, n)),
            Cell::RowFull => {}
        }
        if self.ends.len() >= caps::SHARED_STRINGS || self.text.len() > caps::SHARED_STRING_BYTES {
            return Err(Stop::Failed(format!(
                "the workbook's shared strings are more than {} strings or {} bytes, the most read",
                caps::SHARED_STRINGS,
                caps::SHARED_STRING_BYTES
            )));
        }
        self.ends.push(self.text.len() as u32);
        Ok(())
    }

    fn get(&self, index: &str) -> Cell {
        let Ok(i) = index.trim().parse::<usize>() else { return Cell::Text(String::new()) };
        if let Ok(at) = self.too_long.binary_search_by_key(&(i as u32), |(j, _)| *j) {
            return Cell::TooLong(self.too_long[at].1);
        }
        let start = if i == 0 { 0 } else { self.ends.get(i - 1).copied().unwrap_or(0) as usize };
        let end = self.ends.get(i).copied().map_or(start, |e| e as usize);
        Cell::Text(self.text.get(start..end).unwrap_or_default().to_string())
    }
}

/// What turns a cell's value into its text.
struct Cells {
    dates: Vec<bool>,
    shared: Shared,
    date1904: bool,
    decimal: char,
}

/// A cell being read: its column, type, style and value (or inline text).
struct Open {
    col: u32,
    kind: String,
    style: usize,
    value: Text,
    in_value: bool,
    inline: bool,
}

fn rows<R: BufRead>(r: &mut Reader<R>, c: &Cells, out: &mut Emitter) -> Result<(), Stop> {
    let (mut line, mut cells, mut cell) = (0u64, RowCells::default(), None::<Open>);
    let mut skip = 0u32;
    loop {
        match r.next()? {
            Event::Eof => return Ok(()),
            Event::Open { name, attrs, empty } => match local_name(&name) {
                "row" => {
                    line = Event::attr(&attrs, "r").and_then(|n| n.parse().ok()).unwrap_or(line + 1);
                    cells.clear();
                }
                "c" => {
                    let col = Event::attr(&attrs, "r").and_then(|a| column_of(&a)).unwrap_or(cells.next_column());
                    let open = Open {
                        col,
                        kind: Event::attr(&attrs, "t").unwrap_or_default(),
                        style: Event::attr(&attrs, "s").and_then(|s| s.parse().ok()).unwrap_or(0),
                        value: Text::default(),
                        in_value: false,
                        inline: false,
                    };
                    if empty {
                        cells.push(open.col, Cell::Text(String::new()));
                    } else {
                        cell = Some(open);
                    }
                }
                "v" if !empty => set(&mut cell, |o| o.in_value = true),
                "is" if !empty => set(&mut cell, |o| o.inline = true),
                "rPh" if !empty => skip += 1,
                "t" if !empty => set(&mut cell, |o| o.in_value = o.inline),
                _ => {}
            },
            Event::Close { name } => match local_name(&name) {
                "row" => out.row(line, &cells)?,
                "c" => {
                    if let Some(open) = cell.take() {
                        let col = open.col;
                        cells.push(col, c.text(open));
                    }
                }
                "v" | "t" => set(&mut cell, |o| o.in_value = false),
                "rPh" => skip = skip.saturating_sub(1),
                _ => {}
            },
            Event::Text(t) => {
                if let Some(open) = cell.as_mut().filter(|o| o.in_value && skip == 0) {
                    open.value.push(&t);
                }
            }
        }
    }
}

fn set(cell: &mut Option<Open>, f: impl FnOnce(&mut Open)) {
    if let Some(open) = cell.as_mut() {
        f(open)
    }
}

/// The column of a cell reference such as `XFD1048576` (from 0).
fn column_of(reference: &str) -> Option<u32> {
    let letters = reference.bytes().take_while(u8::is_ascii_alphabetic);
    let mut n: u32 = 0;
    for b in letters {
        n = n.checked_mul(26)?.checked_add(u32::from(b.to_ascii_uppercase() - b'A') + 1)?;
    }
    n.checked_sub(1)
}

impl Cells {
    fn text(&self, open: Open) -> Cell {
        let value = match open.value.finish() {
            Cell::Text(v) => v,
            too_long => return too_long,
        };
        match open.kind.as_str() {
            "s" => self.shared.get(&value),
            "b" => Cell::Text(if value.trim() == "1" { "true" } else { "false" }.to_string()),
            "inlineStr" | "str" | "e" | "d" => Cell::Text(value),
            _ => Cell::Text(self.number(&value, open.style)),
        }
    }

    fn number(&self, value: &str, style: usize) -> String {
        let Ok(f) = value.trim().parse::<f64>() else { return value.to_string() };
        if self.dates.get(style).copied().unwrap_or(false)
            && let Some(t) = serial_date(f, self.date1904)
        {
            return if t.time() == NaiveTime::MIN {
                t.format("%Y-%m-%d").to_string()
            } else {
                t.format("%Y-%m-%dT%H:%M:%S").to_string()
            };
        }
        number_text(f, self.decimal)
    }
}

/// A date cell's serial number as a date and time (the 1900 system counts a 29 February 1900 that
/// never was).
fn serial_date(serial: f64, date1904: bool) -> Option<NaiveDateTime> {
    if !(0.0..3_000_000.0).contains(&serial) {
        return None;
    }
    let epoch = match (date1904, serial < 60.0) {
        (true, _) => NaiveDate::from_ymd_opt(1904, 1, 1)?,
        (false, true) => NaiveDate::from_ymd_opt(1899, 12, 31)?,
        (false, false) => NaiveDate::from_ymd_opt(1899, 12, 30)?,
    };
    let seconds = (serial * 86_400.0).round() as i64;
    epoch.and_time(NaiveTime::MIN).checked_add_signed(Duration::seconds(seconds))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_formats_and_references() {
        assert!(is_date_format("DD.MM.YYYY"));
        assert!(is_date_format("yyyy-mm-dd hh:mm"));
        assert!(!is_date_format("#,##0.00 \"days\""));
        assert!(!is_date_format("[Red]0.00"));
        assert!(!is_date_format("General"));
        assert_eq!(column_of("A1"), Some(0));
        assert_eq!(column_of("XFD1048576"), Some(16_383));
        assert_eq!(column_of("ZZZZZZZZZZ1"), None);
        let day = |s| serial_date(s, false).map(|t| t.format("%Y-%m-%d %H:%M").to_string());
        assert_eq!(day(45_292.0).as_deref(), Some("2024-01-01 00:00"));
        assert_eq!(day(45_292.75).as_deref(), Some("2024-01-01 18:00"));
        assert_eq!(day(1.0).as_deref(), Some("1900-01-01 00:00"));
    }
}
