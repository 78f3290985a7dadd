//! The mapping file (`--mapping gym-export.toml`, TOML or YAML): how the files of one old system
//! are read. Settings at the top apply to every kind; a section per kind (`[members]`) may change
//! them and holds its `columns`, `constants` and the `file` `--dir` looks for. Every rule is checked
//! against the row schema when the file is loaded, and a problem names its line.

use std::{
    collections::{BTreeMap, HashMap},
    path::Path,
};

use chrono_tz::Tz;
use encoding_rs::Encoding;
use serde_json::Value;

use super::{
    ClientError, caps,
    cell::Conversion,
    schema::{Entity, Fields, Kind, field_names, leaf, row_fields},
};

/// How the files are read and cells converted, at the top or for one kind.
#[derive(Clone, Debug, Default)]
pub(super) struct Settings {
    pub delimiter: Option<u8>,
    pub encoding: Option<&'static Encoding>,
    pub sheet: Option<String>,
    pub date_formats: Option<Vec<String>>,
    pub time_zone: Option<Tz>,
    pub decimal: Option<char>,
    pub currency: Option<String>,
}

impl Settings {
    /// These settings, with `base` where they say nothing.
    pub(super) fn over(&self, base: &Settings) -> Settings {
        Settings {
            delimiter: self.delimiter.or(base.delimiter),
            encoding: self.encoding.or(base.encoding),
            sheet: self.sheet.clone().or_else(|| base.sheet.clone()),
            date_formats: self.date_formats.clone().or_else(|| base.date_formats.clone()),
            time_zone: self.time_zone.or(base.time_zone),
            decimal: self.decimal.or(base.decimal),
            currency: self.currency.clone().or_else(|| base.currency.clone()),
        }
    }
}

/// What one column of the file becomes.
#[derive(Clone, Debug, Default)]
pub(super) struct ColumnRule {
    /// The field (`price`, `price.amount`); `None` leaves the column out.
    pub field: Option<String>,
    pub values: HashMap<String, String>,
    pub date_formats: Option<Vec<String>>,
    pub decimal: Option<char>,
    pub currency: Option<String>,
}

/// The rules for one kind.
#[derive(Clone, Debug, Default)]
pub(super) struct Section {
    pub settings: Settings,
    pub file: Option<String>,
    pub columns: Vec<(String, ColumnRule)>,
    pub constants: Vec<(String, String)>,
}

#[derive(Clone, Debug, Default)]
pub(super) struct Mapping {
    pub top: Settings,
    pub sections: BTreeMap<Entity, Section>,
}

const SETTINGS: [&str; 7] =
    ["delimiter", "encoding", "sheet", "date_formats", "time_zone", "decimal_separator", "currency"];

/// Problems reported with their lines; more are counted (finding a line reads the file, so a file
/// with thousands of problems would take their number times its length).
const REPORTED: usize = 50;

/// Problems found in the file, each with its line.
struct Problems<'a> {
    lines: Vec<&'a str>,
    path: &'a Path,
    found: Vec<(usize, String)>,
    more: usize,
}

impl Problems<'_> {
    fn add(&mut self, at: &[&str], message: impl Into<String>) {
        if self.found.len() == REPORTED {
            self.more += 1;
            return;
        }
        let line = line_in(&self.lines, at);
        self.found.push((line, format!("{}: {}", at.join("."), message.into())));
    }
}

/// The line of the rule at `at` (`["members", "columns", "Status"]`): each part is looked for as a
/// key from where the one before it was found, so the same name in another section is passed over.
#[cfg(test)]
fn line_of(source: &str, at: &[&str]) -> usize {
    line_in(&source.lines().collect::<Vec<_>>(), at)
}

fn line_in(lines: &[&str], at: &[&str]) -> usize {
    let mut from = 0;
    for part in at {
        let found = (from..lines.len()).find(|&i| has_key(lines[i], part));
        match found {
            Some(i) => from = i,
            None => break,
        }
    }
    from + 1
}

fn has_key(line: &str, key: &str) -> bool {
    let code = line.split('#').next().unwrap_or(line);
    [key.to_string(), format!("\"{key}\""), format!("'{key}'")].iter().any(|k| {
        code.match_indices(k.as_str()).any(|(i, _)| {
            let before = code[..i].chars().next_back();
            let after = code[i + k.len()..].trim_start().chars().next();
            !before.is_some_and(|c| c.is_alphanumeric() || c == '_')
                && matches!(after, Some('=' | ':' | '.' | ']' | '}' | ',') | None)
        })
    })
}

/// How deep the file's tables and lists nest, found before it is parsed (a parser takes time in
/// proportion to depth times length): brackets and braces outside quotes and comments, and for
/// YAML the indentation of its blocks and the dashes of nested lists.
fn nesting(source: &str, yaml: bool) -> usize {
    let (mut flow, mut deepest, mut indents) = (0usize, 0usize, Vec::<usize>::new());
    for line in source.lines() {
        let code = line.trim_start();
        if yaml && flow == 0 && !code.is_empty() && !code.starts_with('#') {
            let indent = line.len() - code.len();
            while indents.last().is_some_and(|&i| i >= indent) {
                indents.pop();
            }
            indents.push(indent);
            let dashes = code.split_inclusive(['-']).take_while(|p| p.trim() == "-").count();
            deepest = deepest.max(indents.len() + dashes);
        }
        let mut quote = None;
        let mut escaped = false;
        for c in code.chars() {
            match (quote, c) {
                (Some('"'), '\\') if !escaped => {
                    escaped = true;
                    continue;
                }
                (Some(q), c) if c == q && !escaped => quote = None,
                (Some(_), _) => {}
                (None, '"' | '\'') => quote = Some(c),
                (None, '#') => break,
                (None, '[' | '{') => {
                    flow += 1;
                    deepest = deepest.max(flow + indents.len());
                }
                (None, ']' | '}') => flow = flow.saturating_sub(1),
                _ => {}
            }
            escaped = false;
        }
    }
    deepest
}

/// How deep a parsed value nests (TOML's dotted keys nest without brackets).
fn depth(value: &Value) -> usize {
    let mut deepest = 0;
    let mut stack = vec![(value, 1usize)];
    while let Some((v, d)) = stack.pop() {
        deepest = deepest.max(d);
        match v {
            Value::Object(o) => stack.extend(o.values().map(|c| (c, d + 1))),
            Value::Array(a) => stack.extend(a.iter().map(|c| (c, d + 1))),
            _ => {}
        }
    }
    deepest
}

fn parse(path: &Path, source: &str) -> Result<Value, ClientError> {
    let yaml = path.extension().and_then(|e| e.to_str()).is_some_and(|e| matches!(e, "yaml" | "yml"));
    let too_deep = || {
        ClientError::BadInput(format!(
            "{}: tables and lists nest deeper than {}, the most a mapping file may",
            path.display(),
            caps::MAPPING_DEPTH
        ))
    };
    if nesting(source, yaml) > caps::MAPPING_DEPTH + 1 {
        return Err(too_deep());
    }
    let parsed = if yaml {
        serde_yaml_ng::from_str::<Value>(source).map_err(|e| e.to_string())
    } else {
        toml::from_str::<Value>(source).map_err(|e| e.to_string())
    };
    let value = parsed.map_err(|e| ClientError::BadInput(format!("{}: {}", path.display(), e.trim_end())))?;
    if depth(&value) > caps::MAPPING_DEPTH {
        return Err(too_deep());
    }
    Ok(value)
}

impl Mapping {
    pub(super) fn load(path: &Path) -> Result<Self, ClientError> {
        use std::io::Read;
        let cannot = |e: &dyn std::fmt::Display| ClientError::BadInput(format!("cannot read {}: {e}", path.display()));
        let mut source = String::new();
        let file = std::fs::File::open(path).map_err(|e| cannot(&e))?;
        std::io::Read::take(file, caps::MAPPING_BYTES + 1).read_to_string(&mut source).map_err(|e| cannot(&e))?;
        if source.len() as u64 > caps::MAPPING_BYTES {
            return Err(ClientError::BadInput(format!(
                "{}: more than {} bytes, the most a mapping file may hold",
                path.display(),
                caps::MAPPING_BYTES
            )));
        }
        let root = parse(path, &source)?;
        let mut problems = Problems { lines: source.lines().collect(), path, found: Vec::new(), more: 0 };
        let mut mapping = Mapping::default();
        let Some(table) = root.as_object() else {
            return Err(ClientError::BadInput(format!("{}: expected a table of settings and kinds", path.display())));
        };
        mapping.top = settings(table, &[], &mut problems);
        for (key, value) in table {
            if SETTINGS.contains(&key.as_str()) {
                continue;
            }
            match Entity::parse(key) {
                Ok(entity) => {
                    let section = section(entity, value, &mapping.top, &mut problems);
                    mapping.sections.insert(entity, section);
                }
                Err(_) => {
                    problems.add(&[key], format!("not a setting ({}) nor a kind ({})", SETTINGS.join(", "), kinds()))
                }
            }
        }
        if problems.found.is_empty() {
            return Ok(mapping);
        }
        problems.found.sort();
        let mut lines: Vec<String> =
            problems.found.iter().map(|(line, m)| format!("{}:{line}: {m}", problems.path.display())).collect();
        if problems.more > 0 {
            lines.push(format!("{}: and {} more problems", problems.path.display(), problems.more));
        }
        Err(ClientError::BadInput(lines.join("\n")))
    }

    /// The settings of a kind: its section's, then the top's.
    pub(super) fn settings(&self, entity: Entity) -> Settings {
        self.sections.get(&entity).map_or_else(|| self.top.clone(), |s| s.settings.over(&self.top))
    }
}

/// The table at `at`, or a problem saying what was expected there.
fn table_at<'a>(
    value: &'a Value,
    at: &[&str],
    expected: &str,
    problems: &mut Problems,
) -> Option<&'a serde_json::Map<String, Value>> {
    let table = value.as_object();
    if table.is_none() {
        problems.add(at, format!("expected {expected}"));
    }
    table
}

/// A string, number or boolean as the text of a cell.
fn scalar(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Bool(_) | Value::Number(_) => Some(v.to_string()),
        _ => None,
    }
}

fn kinds() -> String {
    Entity::ALL.map(Entity::name).join(", ")
}

fn text<'a>(value: &'a Value, at: &[&str], problems: &mut Problems) -> Option<&'a str> {
    let s = value.as_str();
    if s.is_none() {
        problems.add(at, "expected a string");
    }
    s
}

fn formats(value: &Value, at: &[&str], problems: &mut Problems) -> Option<Vec<String>> {
    let list: Vec<&Value> = match value {
        Value::Array(items) => items.iter().collect(),
        other => vec![other],
    };
    let mut out = Vec::new();
    for item in list {
        let format = text(item, at, problems)?;
        let bad = chrono::format::StrftimeItems::new(format).any(|i| matches!(i, chrono::format::Item::Error));
        if bad {
            problems.add(
                at,
                format!("{format:?} has an unknown format directive (see chrono's strftime: %d %m %Y %H %M ...)"),
            );
        }
        out.push(format.to_string());
    }
    Some(out)
}

fn settings(table: &serde_json::Map<String, Value>, at: &[&str], problems: &mut Problems) -> Settings {
    let mut s = Settings::default();
    let here = |key: &'static str| [at, &[key]].concat();
    if let Some(d) = table.get("delimiter").and_then(|v| text(v, &here("delimiter"), problems)) {
        s.delimiter = super::source::delimiter_of(d);
        if s.delimiter.is_none() {
            problems.add(&here("delimiter"), format!("{d:?} is not one character (or \"tab\")"));
        }
    }
    if let Some(v) = table.get("encoding").and_then(|v| text(v, &here("encoding"), problems)) {
        s.encoding = Encoding::for_label(v.as_bytes());
        if s.encoding.is_none() {
            problems.add(
                &here("encoding"),
                format!("{v:?} is not an encoding (utf-8, utf-16le, windows-1252, iso-8859-1, ...)"),
            );
        }
    }
    s.sheet = table.get("sheet").and_then(|v| text(v, &here("sheet"), problems)).map(str::to_string);
    s.date_formats = table.get("date_formats").and_then(|v| formats(v, &here("date_formats"), problems));
    if let Some(v) = table.get("time_zone").and_then(|v| text(v, &here("time_zone"), problems)) {
        s.time_zone = v.parse().ok();
        if s.time_zone.is_none() {
            problems.add(&here("time_zone"), format!("{v:?} is not an IANA time zone (e.g. Europe/Berlin)"));
        }
    }
    s.decimal = decimal(table, at, problems);
    s.currency = currency(table, at, problems);
    s
}

fn decimal(table: &serde_json::Map<String, Value>, at: &[&str], problems: &mut Problems) -> Option<char> {
    let at = [at, &["decimal_separator"]].concat();
    match table.get("decimal_separator").and_then(|v| text(v, &at, problems)) {
        Some(",") => Some(','),
        Some(".") => Some('.'),
        Some(other) => {
            problems.add(&at, format!("{other:?} is not \",\" or \".\""));
            None
        }
        None => None,
    }
}

fn currency(table: &serde_json::Map<String, Value>, at: &[&str], problems: &mut Problems) -> Option<String> {
    let at = [at, &["currency"]].concat();
    let c = table.get("currency").and_then(|v| text(v, &at, problems))?;
    if c.len() == 3 && c.chars().all(|c| c.is_ascii_uppercase()) {
        Some(c.to_string())
    } else {
        problems.add(&at, format!("{c:?} is not an ISO 4217 code (EUR, USD, ...)"));
        None
    }
}

fn section(entity: Entity, value: &Value, top: &Settings, problems: &mut Problems) -> Section {
    let name = entity.name();
    let mut out = Section::default();
    let Some(table) = value.as_object() else {
        problems.add(&[name], "expected a table");
        return out;
    };
    out.settings = settings(table, &[name], problems);
    let fields = match row_fields(entity) {
        Ok(f) => f,
        Err(e) => {
            problems.add(&[name], e.to_string());
            return out;
        }
    };
    let merged = out.settings.over(top);
    for (key, v) in table {
        match key.as_str() {
            "file" => out.file = text(v, &[name, "file"], problems).map(str::to_string),
            "columns" => out.columns = columns(entity, v, &fields, &merged, problems),
            "constants" => out.constants = constants(entity, v, &fields, &merged, problems),
            k if SETTINGS.contains(&k) => {}
            k => problems.add(
                &[name, k],
                format!("not a setting of a kind ({}, file, columns, constants)", SETTINGS.join(", ")),
            ),
        }
    }
    out
}

fn columns(
    entity: Entity,
    value: &Value,
    fields: &Fields,
    settings: &Settings,
    problems: &mut Problems,
) -> Vec<(String, ColumnRule)> {
    let name = entity.name();
    let Some(table) = table_at(value, &[name, "columns"], "a table of COLUMN = FIELD", problems) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for (column, rule) in table {
        let at = [name, "columns", column.as_str()];
        let parsed = match rule {
            Value::String(field) => Some(ColumnRule { field: Some(field.clone()), ..ColumnRule::default() }),
            Value::Object(t) => column_table(t, &at, problems),
            _ => {
                problems.add(&at, "expected a field name, \"-\", or a table with `field`");
                None
            }
        };
        let Some(mut parsed) = parsed else { continue };
        if parsed.field.as_deref().is_some_and(|f| f == "-" || f.is_empty()) {
            parsed.field = None;
        }
        if let Some(field) = &parsed.field {
            check_rule(entity, field, &parsed, fields, settings, &at, problems);
        }
        out.push((column.clone(), parsed));
    }
    out
}

fn column_table(t: &serde_json::Map<String, Value>, at: &[&str], problems: &mut Problems) -> Option<ColumnRule> {
    let mut rule = ColumnRule::default();
    for (key, v) in t {
        let here = [at, &[key.as_str()]].concat();
        match key.as_str() {
            "field" => rule.field = text(v, &here, problems).map(str::to_string),
            "values" => match v.as_object() {
                Some(map) => {
                    for (from, to) in map {
                        let Some(to) = scalar(to) else {
                            problems.add(&[&here[..], &[from.as_str()]].concat(), "expected a value");
                            continue;
                        };
                        rule.values.insert(from.trim().to_string(), to);
                    }
                }
                None => problems.add(&here, "expected a table of OLD = NEW values"),
            },
            "date_formats" | "format" => rule.date_formats = formats(v, &here, problems),
            "decimal_separator" => rule.decimal = decimal(t, at, problems),
            "currency" => rule.currency = currency(t, at, problems),
            k => problems.add(
                &here,
                format!("{k:?} is not a column setting (field, values, date_formats, decimal_separator, currency)"),
            ),
        }
    }
    if rule.field.is_none() {
        problems.add(at, "a column table needs `field` (or \"-\" to leave the column out)");
        return None;
    }
    Some(rule)
}

/// The conversion a rule asks for, with the settings it falls back on.
pub(super) fn conversion(kind: Kind, rule: &ColumnRule, settings: &Settings) -> Conversion {
    Conversion {
        kind,
        values: rule.values.clone(),
        formats: rule.date_formats.clone().or_else(|| settings.date_formats.clone()).unwrap_or_default(),
        decimal: rule.decimal.or(settings.decimal).unwrap_or('.'),
        currency: rule.currency.clone().or_else(|| settings.currency.clone()),
        tz: settings.time_zone,
    }
}

fn unknown_field(entity: Entity, field: &str, fields: &Fields) -> String {
    format!("{field:?} is not a field of {} rows (fields: {})", entity.name(), field_names(fields, "").join(", "))
}

fn check_rule(
    entity: Entity,
    field: &str,
    rule: &ColumnRule,
    fields: &Fields,
    settings: &Settings,
    at: &[&str],
    problems: &mut Problems,
) {
    let path: Vec<String> = field.split('.').map(str::to_string).collect();
    let Some(kind) = leaf(fields, &path) else {
        problems.add(at, unknown_field(entity, field, fields));
        return;
    };
    let mut conversion = conversion(kind.clone(), rule, settings);
    conversion.tz = Some(conversion.tz.unwrap_or(Tz::UTC));
    let formats = conversion.formats.clone();
    for format in &formats {
        if matches!(kind, Kind::Date | Kind::DateTime) && !round_trips(format, &kind) {
            problems.add(at, format!("{format:?} does not hold a whole date"));
        }
    }
    conversion.values.clear();
    for (from, to) in &rule.values {
        let at = [at, &["values", from.as_str()]].concat();
        if to.trim().is_empty() {
            problems.add(&at, format!("maps to nothing: give the value {field} takes{}", allowed(&kind)));
            continue;
        }
        if let Err(e) = conversion.apply(to) {
            problems.add(&at, format!("maps to a value {field} cannot take: {e}"));
        }
    }
}

fn allowed(kind: &Kind) -> String {
    match kind {
        Kind::Enum(values) => format!(" ({})", values.join(", ")),
        _ => String::new(),
    }
}

/// Whether a date written with `format` reads back as the same date.
fn round_trips(format: &str, kind: &Kind) -> bool {
    let Some(sample) = chrono::NaiveDate::from_ymd_opt(2001, 2, 23).and_then(|d| d.and_hms_opt(4, 5, 6)) else {
        return false;
    };
    let mut written = String::new();
    if std::fmt::Write::write_fmt(&mut written, format_args!("{}", sample.format(format))).is_err() {
        return false;
    }
    let mut c = Conversion::plain(kind.clone());
    c.formats = vec![format.to_string()];
    c.tz = Some(Tz::UTC);
    c.apply(&written).ok().flatten().and_then(|v| v.as_str().map(|s| s.starts_with("2001-02-23"))).unwrap_or(false)
}

fn constants(
    entity: Entity,
    value: &Value,
    fields: &Fields,
    settings: &Settings,
    problems: &mut Problems,
) -> Vec<(String, String)> {
    let name = entity.name();
    let Some(table) = table_at(value, &[name, "constants"], "a table of FIELD = VALUE", problems) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for (field, v) in table {
        let at = [name, "constants", field.as_str()];
        let Some(text) = scalar(v) else {
            problems.add(&at, "expected a value");
            continue;
        };
        let path: Vec<String> = field.split('.').map(str::to_string).collect();
        match leaf(fields, &path) {
            None => problems.add(&at, unknown_field(entity, field, fields)),
            Some(kind) => {
                let mut c = conversion(kind, &ColumnRule::default(), settings);
                c.tz = Some(c.tz.unwrap_or(Tz::UTC));
                match c.apply(&text) {
                    Ok(_) => out.push((field.clone(), text)),
                    Err(e) => problems.add(&at, format!("{field} cannot take it: {e}")),
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_found_by_key_within_their_section() {
        let source = "currency = \"EUR\"\n[plans.columns]\nStatus = \"status\"\n[members.columns]\nStatus = { field = \"status\", values = { Aktiv = \"activ\" } }\n";
        assert_eq!(line_of(source, &["members", "columns", "Status"]), 5);
        assert_eq!(line_of(source, &["plans", "columns", "Status"]), 3);
        assert_eq!(line_of(source, &["members", "columns", "Status", "values", "Aktiv"]), 5);
        let yaml = "members:\n  columns:\n    Status:\n      field: status\n      values:\n        Aktiv: activ\n";
        assert_eq!(line_of(yaml, &["members", "columns", "Status", "values", "Aktiv"]), 6);
    }
}
