//! `gymapi import inspect FILE`: what was detected, where each column goes (or why nowhere), the
//! first rows as they would be sent and the rows that would be refused before sending; with
//! `--write-mapping F`, a starting mapping file for the owner to edit. Nothing is sent.

use std::{collections::BTreeSet, fmt::Write as _, path::PathBuf};

use clap::Args;
use serde_json::{Value, json};

use super::{
    ClientError, ReadArgs,
    cell::Conversion,
    plan::{Plan, Target},
    schema::{Fields, Kind, leaf, row_fields},
    source::{Row, Table, delimiter_name},
};

#[derive(Args, Debug)]
pub(super) struct InspectArgs {
    #[command(flatten)]
    read: ReadArgs,
    /// The file to look at.
    file: PathBuf,
    /// Write a starting mapping file: every column with its field (or a guess), the detected
    /// encoding, delimiter and date formats.
    #[arg(long)]
    write_mapping: Option<PathBuf>,
    /// Rows to show as they would be sent.
    #[arg(long, default_value_t = 3)]
    sample: usize,
    #[arg(long)]
    json: bool,
}

const DATE_FORMATS: [&str; 8] =
    ["%Y-%m-%d", "%d.%m.%Y", "%d/%m/%Y", "%m/%d/%Y", "%d-%m-%Y", "%Y/%m/%d", "%d.%m.%y", "%m/%d/%y"];
const TIME_PARTS: [&str; 4] = [" %H:%M:%S", " %H:%M", "T%H:%M:%S", ""];
/// Values per column looked at for formats and value maps, and the longest looked at (a date or a
/// value to map is short; this bounds what is kept, whatever the file).
const LOOKED_AT: usize = 1_000;
const LOOKED_AT_BYTES: usize = 256;

/// What was read from the file.
struct Findings {
    rows: u64,
    sample: Vec<(u64, Value)>,
    refused: Vec<(u64, Vec<String>)>,
    refused_count: u64,
    /// Per column: up to LOOKED_AT non-empty values.
    values: Vec<Vec<String>>,
}

pub(super) fn run(a: InspectArgs) -> Result<(), ClientError> {
    let reading = a.read.resolve()?;
    let entity = a.read.entity(&a.file, reading.mapping.as_deref())?;
    let fields = row_fields(entity)?;
    let mut table = Table::open(&a.file, &reading.for_entity(entity))?;
    let settings = reading.mapping.as_ref().map(|m| m.settings(entity)).unwrap_or_default();
    let section = reading.mapping.as_ref().and_then(|m| m.sections.get(&entity));
    let zone = settings.time_zone.unwrap_or(chrono_tz::UTC);
    let plan = Plan::new(entity, &fields, &table.headers, section, &settings, &reading.map, Some(zone))?;
    let findings = read_all(&mut table, &plan, a.sample)?;
    let views = views(&plan, &fields, &findings);
    let columns: Vec<Value> = (0..plan.headers.len()).map(|i| column(&plan, &views[i], i)).collect();
    let report = json!({
        "file": a.file.display().to_string(),
        "entity": entity.name(),
        "read_as": table.layout.describe(),
        "header_columns": plan.headers.len(),
        "rows": findings.rows,
        "columns": columns,
        "rules_for_missing_columns": plan.missing,
        "times_without_offset_in": if settings.time_zone.is_some() { zone.name().to_string() } else { "the gym's time zone (UTC shown here)".to_string() },
        "sample": findings.sample.iter().map(|(line, row)| json!({"line": line, "row": row})).collect::<Vec<_>>(),
        "refused_locally": findings.refused_count,
        "refused": findings.refused.iter().map(|(line, r)| json!({"line": line, "reasons": r})).collect::<Vec<_>>(),
    });
    if let Some(path) = &a.write_mapping {
        let text = starting_mapping(&table, &plan, &views, &findings);
        std::fs::write(path, text)
            .map_err(|e| ClientError::BadInput(format!("cannot write {}: {e}", path.display())))?;
    }
    if a.json {
        println!("{report}");
    } else {
        println!("{}", human(&report, a.write_mapping.as_ref()));
    }
    Ok(())
}

fn read_all(table: &mut Table, plan: &Plan, sample: usize) -> Result<Findings, ClientError> {
    let mut f = Findings {
        rows: 0,
        sample: Vec::new(),
        refused: Vec::new(),
        refused_count: 0,
        values: vec![Vec::new(); plan.headers.len()],
    };
    while let Some(row) = table.next_row() {
        let (line, row) = row?;
        f.rows += 1;
        let converted = match &row {
            Row::Object(v) => Ok(v.clone()),
            Row::TooLarge(_, why) => Err(vec![why.clone()]),
            Row::Cells(record) => {
                for (i, cell) in record.iter().enumerate() {
                    if let Some(values) = f
                        .values
                        .get_mut(i)
                        .filter(|v| v.len() < LOOKED_AT && cell.len() <= LOOKED_AT_BYTES && !cell.trim().is_empty())
                    {
                        values.push(cell.trim().to_string());
                    }
                }
                plan.row(record)
            }
        };
        match converted {
            Ok(v) if f.sample.len() < sample => f.sample.push((line, v)),
            Ok(_) => {}
            Err(reasons) => {
                f.refused_count += 1;
                if f.refused.len() < 20 {
                    f.refused.push((line, reasons));
                }
            }
        }
    }
    Ok(f)
}

/// The formats that read the most values of a date or time column (at least half of them: a few
/// bad dates do not hide the format of the rest).
fn detect_formats(kind: &Kind, values: &[String]) -> Vec<String> {
    let candidates: Vec<String> = match kind {
        Kind::Date => DATE_FORMATS.iter().map(|f| f.to_string()).collect(),
        Kind::DateTime => DATE_FORMATS.iter().flat_map(|d| TIME_PARTS.map(|t| format!("{d}{t}"))).collect(),
        _ => return Vec::new(),
    };
    let reads = |format: &str| {
        values
            .iter()
            .filter(|v| {
                chrono::NaiveDateTime::parse_from_str(v, format).is_ok()
                    || chrono::NaiveDate::parse_from_str(v, format).is_ok()
                    || chrono::DateTime::parse_from_rfc3339(v).is_ok()
            })
            .count()
    };
    let counted: Vec<(String, usize)> = candidates.into_iter().map(|f| (f.clone(), reads(&f))).collect();
    let best = counted.iter().map(|(_, n)| *n).max().unwrap_or(0);
    if best == 0 || best * 2 < values.len() {
        return Vec::new();
    }
    counted.into_iter().filter(|(_, n)| *n == best).map(|(f, _)| f).collect()
}

/// A column as inspect sees it: its field (the rules', else a guess from its name), that field's
/// type, and the date formats its values read as.
struct View {
    field: Option<String>,
    kind: Option<Kind>,
    formats: Vec<String>,
}

fn views(plan: &Plan, fields: &Fields, findings: &Findings) -> Vec<View> {
    plan.headers
        .iter()
        .zip(&plan.targets)
        .zip(&findings.values)
        .map(|((header, target), values)| {
            let field = match target {
                Target::Field { path, .. } => Some(path.join(".")),
                Target::Dropped => None,
                Target::Unknown => guess(fields, header),
            };
            let kind = field.as_ref().and_then(|f| leaf(fields, &f.split('.').map(str::to_string).collect::<Vec<_>>()));
            let formats = kind.as_ref().map(|k| detect_formats(k, values)).unwrap_or_default();
            View { field, kind, formats }
        })
        .collect()
}

fn column(plan: &Plan, view: &View, i: usize) -> Value {
    let header = &plan.headers[i];
    match &plan.targets[i] {
        Target::Field { path, conversion } => json!({
            "column": header,
            "field": path.join("."),
            "type": kind_name(&conversion.kind),
            "rules": rules(conversion),
            "detected_date_formats": view.formats,
        }),
        Target::Dropped => json!({"column": header, "field": null, "why": "left out by the mapping"}),
        Target::Unknown => json!({
            "column": header,
            "field": null,
            "why": format!("not a field of {} rows: map it or leave it out", plan.entity.name()),
            "guess": view.field,
            "detected_date_formats": view.formats,
        }),
    }
}

fn kind_name(kind: &Kind) -> &'static str {
    match kind {
        Kind::Text => "text",
        Kind::Enum(_) => "one of a list",
        Kind::Date => "date",
        Kind::DateTime => "time",
        Kind::Integer => "integer",
        Kind::Number => "number",
        Kind::Boolean => "boolean",
        Kind::Money => "money in major units",
        Kind::Object(_) => "object",
    }
}

fn rules(c: &Conversion) -> Value {
    let mut out = serde_json::Map::new();
    if !c.values.is_empty() {
        out.insert("values".into(), json!(c.values.len()));
    }
    if !c.formats.is_empty() && matches!(c.kind, Kind::Date | Kind::DateTime) {
        out.insert("date_formats".into(), json!(c.formats));
    }
    if matches!(c.kind, Kind::Money) {
        out.insert("decimal_separator".into(), json!(c.decimal.to_string()));
        out.insert("currency".into(), json!(c.currency));
    }
    Value::Object(out)
}

/// A field for a column no rule names, from its name in a few languages old systems use.
fn guess(fields: &Fields, header: &str) -> Option<String> {
    const NAMES: [(&str, &[&str]); 24] = [
        (
            "member_legacy_id",
            &[
                "member",
                "memberid",
                "memberno",
                "membernumber",
                "mitglied",
                "mitgliedsnummer",
                "mitgliednr",
                "kundennummer",
            ],
        ),
        ("plan_legacy_id", &["plan", "planid", "tarif", "tarifnummer", "vertrag"]),
        ("product_legacy_id", &["product", "productid", "artikel", "artikelnummer"]),
        (
            "legacy_id",
            &["id", "nr", "no", "number", "nummer", "legacyid", "mitgliedsnummer", "kundennummer", "membernumber"],
        ),
        ("first_name", &["firstname", "first", "givenname", "vorname"]),
        ("last_name", &["lastname", "last", "surname", "familyname", "nachname"]),
        ("email", &["email", "mail", "emailaddress", "emailadresse"]),
        ("phone", &["phone", "telephone", "tel", "telefon", "mobile", "mobil", "handy"]),
        ("date_of_birth", &["dateofbirth", "birthdate", "birthday", "born", "dob", "geburtsdatum", "geburtstag"]),
        ("city", &["city", "town", "ort", "stadt", "wohnort"]),
        ("country", &["country", "land"]),
        ("gender", &["gender", "sex", "geschlecht"]),
        ("status", &["status", "state", "zustand"]),
        ("access_card", &["accesscard", "card", "cardnumber", "karte", "kartennummer", "chip"]),
        ("name", &["name", "title", "bezeichnung", "titel"]),
        ("description", &["description", "beschreibung", "notes", "notiz", "text"]),
        ("quantity", &["quantity", "qty", "menge", "anzahl"]),
        ("payment_status", &["paymentstatus", "payment", "zahlung", "zahlstatus"]),
        ("purchased_at", &["purchasedat", "date", "datum", "zeitpunkt", "verkauft"]),
        ("price", &["price", "preis", "betrag", "amount", "beitrag"]),
        ("total", &["total", "summe", "gesamt", "betrag", "amount"]),
        ("starts_on", &["starts", "start", "startdate", "beginn", "von", "from"]),
        ("ends_on", &["ends", "end", "enddate", "ende", "bis", "to"]),
        ("occurred_at", &["time", "timestamp", "checkin", "zeit", "zeitpunkt", "datum"]),
    ];
    let normal: String = header.chars().filter(|c| c.is_alphanumeric()).flat_map(char::to_lowercase).collect();
    if let Some(f) = fields.keys().find(|f| f.replace('_', "") == normal) {
        return Some(f.clone());
    }
    NAMES
        .iter()
        .find(|(field, names)| fields.contains_key(*field) && names.contains(&normal.as_str()))
        .map(|(f, _)| f.to_string())
}

fn toml_string(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_else(|_| "\"\"".to_string())
}

/// A mapping file to start from: every column, its field or `-`, the detected formats, and a value
/// map to fill in where a column's values are not the field's.
fn starting_mapping(table: &Table, plan: &Plan, views: &[View], f: &Findings) -> String {
    let mut out =
        format!("# A mapping for {}: edit it, then `gymapi import --mapping THIS_FILE ...`.\n", table.path.display());
    if let super::source::Layout::Csv { encoding, delimiter, .. } = &table.layout {
        let _ = writeln!(out, "encoding = {}", toml_string(encoding));
        let _ = writeln!(out, "delimiter = {}", toml_string(delimiter_name(*delimiter).trim_matches('\'')));
    }
    let formats: BTreeSet<&String> = views.iter().filter_map(|v| v.formats.first()).collect();
    if !formats.is_empty() {
        let list: Vec<String> = formats.iter().map(|s| toml_string(s)).collect();
        let _ = writeln!(out, "date_formats = [{}]", list.join(", "));
    }
    let comma = views
        .iter()
        .zip(&f.values)
        .any(|(view, v)| view.kind == Some(Kind::Money) && v.iter().any(|x| x.rfind(',') > x.rfind('.')));
    let _ = writeln!(out, "decimal_separator = \"{}\"", if comma { "," } else { "." });
    let _ = writeln!(out, "# currency = \"EUR\"    # money columns without a currency of their own");
    let _ =
        writeln!(out, "# time_zone = \"Europe/Berlin\"    # times without an offset; the gym's own zone when left out");
    let _ = writeln!(out, "\n[{}.columns]", plan.entity.name());
    for (i, header) in plan.headers.iter().enumerate() {
        let view = &views[i];
        let _ = writeln!(out, "{}", column_line(header, view.field.as_deref(), view.kind.as_ref(), &f.values[i]));
    }
    out
}

fn column_line(header: &str, field: Option<&str>, kind: Option<&Kind>, values: &[String]) -> String {
    let key = toml_string(header);
    let Some(field) = field else {
        return format!("{key} = \"-\"    # no field found; name one, or leave the column out with \"-\"");
    };
    if let Some(Kind::Enum(allowed)) = kind {
        let odd: BTreeSet<&str> =
            values.iter().map(String::as_str).filter(|v| !allowed.iter().any(|a| a == v)).take(20).collect();
        if !odd.is_empty() {
            let pairs: Vec<String> = odd.iter().map(|v| format!("{} = \"\"", toml_string(v))).collect();
            return format!(
                "{key} = {{ field = {}, values = {{ {} }} }}    # fill in: {}",
                toml_string(field),
                pairs.join(", "),
                allowed.join(", ")
            );
        }
    }
    format!("{key} = {}", toml_string(field))
}

fn human(r: &Value, written: Option<&PathBuf>) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{} as {}: {}",
        r["file"].as_str().unwrap_or_default(),
        r["entity"].as_str().unwrap_or_default(),
        r["read_as"].as_str().unwrap_or_default()
    );
    let _ = writeln!(out, "header: {} columns; {} rows", r["header_columns"], r["rows"]);
    let _ = writeln!(out, "columns:");
    for c in r["columns"].as_array().into_iter().flatten() {
        let name = c["column"].as_str().unwrap_or_default();
        let line = match c["field"].as_str() {
            Some(field) => {
                let mut s = format!("  {name} -> {field} ({})", c["type"].as_str().unwrap_or_default());
                if let Some(rules) = c["rules"].as_object().filter(|r| !r.is_empty()) {
                    let _ = write!(s, " {}", Value::Object(rules.clone()));
                }
                s
            }
            None => {
                let mut s = format!("  {name} -> nothing: {}", c["why"].as_str().unwrap_or_default());
                if let Some(g) = c["guess"].as_str() {
                    let _ = write!(s, " (perhaps {g})");
                }
                s
            }
        };
        let detected: Vec<&str> =
            c["detected_date_formats"].as_array().into_iter().flatten().filter_map(Value::as_str).collect();
        let dates =
            if detected.is_empty() { String::new() } else { format!("; dates read as {}", detected.join(" or ")) };
        let _ = writeln!(out, "{line}{dates}");
    }
    for missing in r["rules_for_missing_columns"].as_array().into_iter().flatten() {
        let _ = writeln!(out, "  (the mapping names {missing}, which this file does not have)");
    }
    let _ = writeln!(out, "times without an offset: {}", r["times_without_offset_in"].as_str().unwrap_or_default());
    let _ = writeln!(out, "first rows as they would be sent:");
    for s in r["sample"].as_array().into_iter().flatten() {
        let _ = writeln!(out, "  line {}: {}", s["line"], s["row"]);
    }
    let _ = writeln!(out, "rows refused before sending: {}", r["refused_locally"]);
    for s in r["refused"].as_array().into_iter().flatten() {
        let reasons: Vec<&str> = s["reasons"].as_array().into_iter().flatten().filter_map(Value::as_str).collect();
        let _ = writeln!(out, "  line {}: {}", s["line"], reasons.join("; "));
    }
    if let Some(path) = written {
        let _ = writeln!(out, "a starting mapping is in {}", path.display());
    }
    out.trim_end().to_string()
}
