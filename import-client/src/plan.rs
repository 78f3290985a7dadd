//! A file's columns matched to a kind's fields: the mapping file's rules, then `--map`, then the
//! column's own name. Turns one row of cells into the JSON row the server takes, or into every
//! reason it cannot be sent.

use chrono_tz::Tz;
use serde_json::{Map, Value};

use super::{
    ClientError,
    cell::Conversion,
    mapping::{ColumnRule, Section, Settings, conversion},
    schema::{Entity, Fields, Kind, field_names, leaf},
};

/// Where a column goes.
#[derive(Clone, Debug)]
pub(super) enum Target {
    Field {
        path: Vec<String>,
        conversion: Conversion,
    },
    /// Left out by the mapping file or `--map COLUMN=-`.
    Dropped,
    /// No rule names it and it is not a field's name.
    Unknown,
}

/// The rules for one file of one kind.
pub(super) struct Plan {
    pub entity: Entity,
    pub headers: Vec<String>,
    pub targets: Vec<Target>,
    constants: Vec<(Vec<String>, Value)>,
    /// Columns the rules name that the file does not have.
    pub missing: Vec<String>,
}

impl Plan {
    /// `section` is the mapping file's for this kind (none without a mapping file: a column is then
    /// the field of its name); `map` the `--map` pairs; `tz` the zone of times without an offset.
    pub(super) fn new(
        entity: Entity,
        fields: &Fields,
        headers: &[String],
        section: Option<&Section>,
        settings: &Settings,
        map: &[(String, String)],
        tz: Option<Tz>,
    ) -> Result<Self, ClientError> {
        let mut settings = settings.clone();
        settings.time_zone = settings.time_zone.or(tz);
        let rules: Vec<(String, ColumnRule)> = section.map(|s| s.columns.clone()).unwrap_or_default();
        let rule_of = |header: &str| -> Option<ColumnRule> {
            let cli = map.iter().rev().find(|(c, _)| c == header).map(|(_, f)| ColumnRule {
                field: (f != "-" && !f.is_empty()).then(|| f.clone()),
                ..ColumnRule::default()
            });
            cli.or_else(|| rules.iter().find(|(c, _)| c == header).map(|(_, r)| r.clone()))
        };
        let mut targets = Vec::with_capacity(headers.len());
        for header in headers {
            let target = match rule_of(header) {
                Some(ColumnRule { field: None, .. }) => Target::Dropped,
                Some(rule) => target(entity, fields, rule.field.as_deref().unwrap_or_default(), &rule, &settings)?,
                None => match leaf(fields, &path_of(header)) {
                    Some(kind) => Target::Field {
                        path: path_of(header),
                        conversion: conversion(kind, &ColumnRule::default(), &settings),
                    },
                    None => Target::Unknown,
                },
            };
            targets.push(target);
        }
        let mut constants = Vec::new();
        for (field, text) in section.map(|s| s.constants.as_slice()).unwrap_or_default() {
            let path = path_of(field);
            let kind = leaf(fields, &path).unwrap_or(Kind::Text);
            // The mapping file's check knew no time zone yet: a time only the gym's zone makes
            // (or unmakes, in a clock change's gap) is refused here, never left out unsaid.
            match conversion(kind, &ColumnRule::default(), &settings).apply(text) {
                Ok(Some(v)) => constants.push((path, v)),
                Ok(None) => {}
                Err(why) => {
                    let kind = entity.name();
                    return Err(ClientError::BadInput(format!("{kind}.constants.{field}: {text:?}: {why}")));
                }
            }
        }
        let missing = rules.iter().map(|(c, _)| c).filter(|c| !headers.contains(c)).cloned().collect();
        let plan = Self { entity, headers: headers.to_vec(), targets, constants, missing };
        plan.check_twice()?;
        Ok(plan)
    }

    /// A field filled by two columns, or by a column and a constant, is a mistake of the rules.
    fn check_twice(&self) -> Result<(), ClientError> {
        let mut seen: Vec<(&[String], &str)> = Vec::new();
        let columns = self.headers.iter().zip(&self.targets).filter_map(|(h, t)| match t {
            Target::Field { path, .. } => Some((path.as_slice(), h.as_str())),
            _ => None,
        });
        let constants = self.constants.iter().map(|(p, _)| (p.as_slice(), "a constant"));
        for (path, source) in columns.chain(constants) {
            if let Some((_, first)) = seen.iter().find(|(p, _)| *p == path) {
                return Err(ClientError::BadInput(format!(
                    "field {} is filled by both {first} and {source}; leave one out",
                    path.join(".")
                )));
            }
            seen.push((path, source));
        }
        Ok(())
    }

    /// Columns that are neither a field nor left out, as the error that stops an import.
    pub(super) fn check_columns(&self, file: &std::path::Path, fields: &Fields) -> Result<(), ClientError> {
        let unknown: Vec<&str> = self
            .headers
            .iter()
            .zip(&self.targets)
            .filter(|(_, t)| matches!(t, Target::Unknown))
            .map(|(h, _)| h.as_str())
            .collect();
        if unknown.is_empty() {
            return Ok(());
        }
        Err(ClientError::BadInput(format!(
            "{}: column(s) {} are not fields of {} rows; rename them with --map COLUMN=FIELD or leave them out with --map COLUMN=- (or in a --mapping file; fields: {})",
            file.display(),
            some_of(&unknown),
            self.entity.name(),
            field_names(fields, "").join(", ")
        )))
    }

    /// The row's JSON, or every reason it cannot be sent (`Geburtsdatum: "31.02.1980" is not ...`).
    pub(super) fn row(&self, record: &csv::StringRecord) -> Result<Value, Vec<String>> {
        let mut row = Map::new();
        let mut reasons = Vec::new();
        for (path, value) in &self.constants {
            insert(&mut row, path, value.clone());
        }
        for ((cell, target), header) in record.iter().zip(&self.targets).zip(&self.headers) {
            let Target::Field { path, conversion } = target else { continue };
            match conversion.apply(cell) {
                Ok(Some(value)) => insert(&mut row, path, value),
                Ok(None) => {}
                Err(e) => reasons.push(format!("{}: {e}", column_name(header, path))),
            }
        }
        if record.len() != self.headers.len() {
            reasons.push(format!("{} cells where the header has {}", record.len(), self.headers.len()));
        }
        if reasons.is_empty() { Ok(Value::Object(row)) } else { Err(reasons) }
    }
}

/// How many names an error lists at most, and how many characters of each: a header of 200,000
/// columns is one sentence, not megabytes.
const LISTED: usize = 10;
const NAME_CHARS: usize = 60;

/// The first [`LISTED`] of `names`, each cut to [`NAME_CHARS`], and how many more there are.
fn some_of(names: &[&str]) -> String {
    let cut = |n: &&str| match n.char_indices().nth(NAME_CHARS) {
        Some((end, _)) => format!("{}…", &n[..end]),
        None => n.to_string(),
    };
    let mut listed = names.iter().take(LISTED).map(cut).collect::<Vec<_>>().join(", ");
    if names.len() > LISTED {
        listed.push_str(&format!(" and {} more", names.len() - LISTED));
    }
    listed
}

/// `Geburtsdatum (date_of_birth)`, or `email` when the column is named after its field.
pub(super) fn column_name(header: &str, path: &[String]) -> String {
    let field = path.join(".");
    if header == field { format!("column {field}") } else { format!("column {header} ({field})") }
}

fn path_of(field: &str) -> Vec<String> {
    field.split('.').map(str::to_string).collect()
}

fn target(
    entity: Entity,
    fields: &Fields,
    field: &str,
    rule: &ColumnRule,
    settings: &Settings,
) -> Result<Target, ClientError> {
    let path = path_of(field);
    match leaf(fields, &path) {
        Some(kind) => Ok(Target::Field { path, conversion: conversion(kind, rule, settings) }),
        None => Err(ClientError::BadInput(format!(
            "{field:?} is not a field of {} rows (fields: {})",
            entity.name(),
            field_names(fields, "").join(", ")
        ))),
    }
}

fn insert(row: &mut Map<String, Value>, path: &[String], value: Value) {
    match path {
        [] => {}
        [last] => {
            row.insert(last.clone(), value);
        }
        [first, rest @ ..] => {
            let inner = row.entry(first.clone()).or_insert_with(|| Value::Object(Map::new()));
            if let Value::Object(inner) = inner {
                insert(inner, rest, value);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::schema::row_fields;

    #[test]
    fn an_error_lists_ten_names_at_most_each_cut_short() {
        let long = "x".repeat(100);
        let names: Vec<String> = (0..200_000).map(|i| if i == 0 { long.clone() } else { format!("C{i}") }).collect();
        let names: Vec<&str> = names.iter().map(String::as_str).collect();
        let listed = some_of(&names);
        assert_eq!(listed, format!("{}…, C1, C2, C3, C4, C5, C6, C7, C8, C9 and 199990 more", "x".repeat(60)));
        assert_eq!(some_of(&["a", "b"]), "a, b");
    }

    #[test]
    fn columns_are_typed_by_the_row_schema() {
        let fields = row_fields(Entity::Plans).unwrap();
        assert_eq!(leaf(&fields, &path_of("price.amount")), Some(Kind::Integer));
        assert_eq!(leaf(&fields, &path_of("price")), Some(Kind::Money));
        assert_eq!(leaf(&fields, &path_of("duration_days")), Some(Kind::Integer));
        let headers: Vec<String> =
            ["legacy_id", "price.amount", "price.currency", "description", "Notes"].map(String::from).into();
        let map = [("Notes".to_string(), "-".to_string())];
        let plan = Plan::new(Entity::Plans, &fields, &headers, None, &Settings::default(), &map, None).unwrap();
        let record = csv::StringRecord::from(vec!["P-1", " 4900", "EUR", "", "ignored"]);
        assert_eq!(
            plan.row(&record).unwrap(),
            json!({"legacy_id": "P-1", "price": {"amount": 4900, "currency": "EUR"}})
        );
        let record = csv::StringRecord::from(vec!["P-1", "49.00", "EUR", "", ""]);
        assert_eq!(plan.row(&record).unwrap_err(), vec!["column price.amount: \"49.00\" is not an integer"]);
    }
}
