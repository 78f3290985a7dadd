//! `gymapi import`: moves a CSV or JSON Lines file into a gym through `POST /import/{entity}`.
//!
//! - Rows go in batches (500 by default), each with an `Idempotency-Key` derived from its content,
//!   so a batch resent after a lost answer is replayed by the server, never run twice.
//! - `429` waits for `Retry-After` and tries again (it is not a failure: at the default limit the
//!   client settles at 120 batches a minute); `409` (the same batch still running) waits a second;
//!   `5xx` and network errors back off exponentially up to `--max-retries`.
//! - Rows whose `legacy_id` was imported before are skipped by the server, so an interrupted run is
//!   resumed by running the same command again.
//! - CSV columns are fields of the entity's row schema in `openapi.yaml` (nested fields with dots:
//!   `price.amount`), renamed with `--map column=field`; values are typed by that schema and an empty
//!   cell leaves the field out. A 422 is reported with the file's line numbers.

use std::{
    collections::HashMap,
    fs::File,
    io::{BufRead, BufReader},
    path::{Path, PathBuf},
    time::{Duration, Instant},
};

use futures_util::{StreamExt, stream};
use serde_json::{Map, Value, json};
use sha2::{Digest, Sha256};

/// What the command was asked to do.
#[derive(Clone, Debug)]
pub struct Options {
    /// Base URL of the API, e.g. `https://api.example.com/api/v1`.
    pub base_url: String,
    pub key: String,
    /// `plans`, `members`, ...: the `{entity}` of `POST /import/{entity}`.
    pub entity: String,
    pub file: PathBuf,
    pub batch_size: usize,
    /// Batches in flight at once.
    pub jobs: usize,
    pub dry_run: bool,
    /// CSV column -> field.
    pub map: Vec<(String, String)>,
    /// Attempts after the first for a batch that meets a 5xx or a network error.
    pub max_retries: u32,
    /// Draw a progress bar on stderr (only when it is a terminal).
    pub progress: bool,
}

/// What a run did.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Summary {
    pub rows: u64,
    pub batches: u64,
    /// Rows this run wrote.
    pub created: i64,
    /// Rows that were there already (imported earlier, or by an earlier run of this file).
    pub skipped: i64,
    /// Batches answered from the server's idempotency store (sent before, answer lost).
    pub replayed: u64,
    /// Waits for the rate limit (429).
    pub rate_limited: u64,
    /// Retries after a 5xx or a network error.
    pub retried: u64,
    pub seconds: f64,
}

impl Summary {
    pub fn rows_per_second(&self) -> f64 {
        if self.seconds > 0.0 { self.rows as f64 / self.seconds } else { 0.0 }
    }

    pub fn to_json(&self, entity: &str, dry_run: bool) -> Value {
        json!({
            "entity": entity,
            "dry_run": dry_run,
            "rows": self.rows,
            "batches": self.batches,
            "created": self.created,
            "skipped": self.skipped,
            "replayed": self.replayed,
            "rate_limited": self.rate_limited,
            "retried": self.retried,
            "seconds": (self.seconds * 1000.0).round() / 1000.0,
            "rows_per_second": self.rows_per_second().round(),
        })
    }
}

/// Why a run stopped.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The file, the options or the rows are wrong (exit 2): nothing more is sent.
    #[error("{0}")]
    BadInput(String),
    /// The service kept failing (exit 1); running the same command again resumes.
    #[error("{0}")]
    Service(String),
}

// --- the row schema ------------------------------------------------------------------------------

/// The JSON type of a row field, from openapi.yaml.
#[derive(Clone, Debug, PartialEq)]
enum Kind {
    String,
    Integer,
    Number,
    Boolean,
    Object(HashMap<String, Kind>),
}

fn resolve<'a>(doc: &'a Value, schema: &'a Value) -> &'a Value {
    match schema.get("$ref").and_then(Value::as_str).and_then(|r| r.strip_prefix("#/")) {
        Some(path) => path.split('/').fold(doc, |v, part| &v[part]),
        None => schema,
    }
}

fn kind_of(doc: &Value, schema: &Value) -> Kind {
    let s = resolve(doc, schema);
    match s.get("type").and_then(Value::as_str) {
        Some("integer") => Kind::Integer,
        Some("number") => Kind::Number,
        Some("boolean") => Kind::Boolean,
        Some("object") => Kind::Object(properties(doc, s)),
        _ => Kind::String,
    }
}

fn properties(doc: &Value, schema: &Value) -> HashMap<String, Kind> {
    schema
        .get("properties")
        .and_then(Value::as_object)
        .map(|p| p.iter().map(|(k, v)| (k.clone(), kind_of(doc, v))).collect())
        .unwrap_or_default()
}

/// The fields of one row of `POST /import/{entity}`, read from the embedded openapi.yaml.
fn row_fields(entity: &str) -> Result<HashMap<String, Kind>, ClientError> {
    let doc: Value = serde_yaml_ng::from_str(crate::contract::DOCUMENT)
        .map_err(|e| ClientError::Service(format!("the embedded openapi.yaml does not parse: {e}")))?;
    let op = &doc["paths"][format!("/import/{entity}")]["post"];
    if op.is_null() {
        return Err(ClientError::BadInput(format!(
            "unknown entity {entity:?}; one of: plans, members, memberships, attendance, access_logs, products, purchases"
        )));
    }
    let request = resolve(&doc, &op["requestBody"]["content"]["application/json"]["schema"]);
    let row = resolve(&doc, &request["properties"]["rows"]["items"]);
    Ok(properties(&doc, row))
}

// --- reading the file ----------------------------------------------------------------------------

/// One CSV column: where its value goes in the row, and its type.
struct Column {
    path: Vec<String>,
    kind: Kind,
}

enum Source {
    /// The file is read whole: line numbers come from byte offsets (the csv crate's own line
    /// count is off by one on CRLF files, which most spreadsheet exports are).
    Csv {
        reader: csv::Reader<std::io::Cursor<Vec<u8>>>,
        columns: Vec<Option<Column>>,
        scanned: usize,
        line: u64,
    },
    Lines {
        lines: std::io::Lines<BufReader<File>>,
        line: u64,
    },
}

/// Rows of the file with their line numbers.
struct Rows {
    source: Source,
}

fn is_csv(path: &Path) -> bool {
    path.extension().and_then(|e| e.to_str()).is_some_and(|e| e.eq_ignore_ascii_case("csv"))
}

fn open(path: &Path) -> Result<File, ClientError> {
    File::open(path).map_err(|e| ClientError::BadInput(format!("cannot read {}: {e}", path.display())))
}

impl Rows {
    fn open(opts: &Options, fields: &HashMap<String, Kind>) -> Result<Self, ClientError> {
        let file = open(&opts.file)?;
        if !is_csv(&opts.file) {
            return Ok(Self { source: Source::Lines { lines: BufReader::new(file).lines(), line: 0 } });
        }
        drop(file);
        let data = std::fs::read(&opts.file)
            .map_err(|e| ClientError::BadInput(format!("cannot read {}: {e}", opts.file.display())))?;
        let mut reader = csv::ReaderBuilder::new().flexible(false).from_reader(std::io::Cursor::new(data));
        let headers =
            reader.headers().map_err(|e| ClientError::BadInput(format!("{}: {e}", opts.file.display())))?.clone();
        let map: HashMap<&str, &str> = opts.map.iter().map(|(c, f)| (c.as_str(), f.as_str())).collect();
        let mut columns = Vec::with_capacity(headers.len());
        let mut unknown = Vec::new();
        for header in headers.iter() {
            let header = header.trim();
            let target = map.get(header).copied().unwrap_or(header);
            if target.is_empty() || target == "-" {
                columns.push(None); // `--map column=-` leaves a column out
                continue;
            }
            let path: Vec<String> = target.split('.').map(str::to_string).collect();
            match leaf(fields, &path) {
                Some(kind) => columns.push(Some(Column { path, kind: kind.clone() })),
                None => unknown.push(header.to_string()),
            }
        }
        if !unknown.is_empty() {
            let mut names: Vec<String> = field_names(fields, "");
            names.sort();
            return Err(ClientError::BadInput(format!(
                "{}: column(s) {} are not fields of {} rows; rename them with --map COLUMN=FIELD or leave them out with --map COLUMN=- (fields: {})",
                opts.file.display(),
                unknown.join(", "),
                opts.entity,
                names.join(", ")
            )));
        }
        Ok(Self { source: Source::Csv { reader, columns, scanned: 0, line: 1 } })
    }

    /// The next row and its line number.
    fn next_row(&mut self) -> Option<Result<(u64, Value), ClientError>> {
        match &mut self.source {
            Source::Lines { lines, line } => loop {
                let text = match lines.next()? {
                    Ok(t) => t,
                    Err(e) => return Some(Err(ClientError::BadInput(format!("line {}: {e}", *line + 1)))),
                };
                *line += 1;
                if text.trim().is_empty() {
                    continue;
                }
                return Some(match serde_json::from_str::<Value>(&text) {
                    Ok(v @ Value::Object(_)) => Ok((*line, v)),
                    Ok(_) => Err(ClientError::BadInput(format!("line {line}: not a JSON object"))),
                    Err(e) => Err(ClientError::BadInput(format!("line {line}: not JSON: {e}"))),
                });
            },
            Source::Csv { reader, columns, scanned, line } => {
                let mut record = csv::StringRecord::new();
                match reader.read_record(&mut record) {
                    Ok(false) => None,
                    Err(e) => Some(Err(ClientError::BadInput(format!("CSV: {e}")))),
                    Ok(true) => {
                        let data = reader.get_ref().get_ref();
                        let mut start =
                            record.position().map_or(*scanned, |p| usize::try_from(p.byte()).unwrap_or(*scanned));
                        // After a CRLF the reported start is the LF; the record begins past it.
                        while data.get(start).is_some_and(|b| matches!(b, b'\r' | b'\n')) {
                            start += 1;
                        }
                        if let Some(skipped) = data.get(*scanned..start) {
                            *line += skipped.iter().filter(|&&b| b == b'\n').count() as u64;
                            *scanned = start;
                        }
                        Some(csv_row(*line, &record, columns).map(|row| (*line, row)))
                    }
                }
            }
        }
    }
}

fn leaf<'a>(fields: &'a HashMap<String, Kind>, path: &[String]) -> Option<&'a Kind> {
    let (first, rest) = path.split_first()?;
    match (fields.get(first)?, rest.is_empty()) {
        (Kind::Object(_), true) => None,
        (kind, true) => Some(kind),
        (Kind::Object(inner), false) => leaf(inner, rest),
        (_, false) => None,
    }
}

fn field_names(fields: &HashMap<String, Kind>, prefix: &str) -> Vec<String> {
    fields
        .iter()
        .flat_map(|(name, kind)| match kind {
            Kind::Object(inner) => field_names(inner, &format!("{prefix}{name}.")),
            _ => vec![format!("{prefix}{name}")],
        })
        .collect()
}

fn csv_row(line: u64, record: &csv::StringRecord, columns: &[Option<Column>]) -> Result<Value, ClientError> {
    let mut row = Map::new();
    for (cell, column) in record.iter().zip(columns) {
        let Some(column) = column else { continue };
        if cell.is_empty() {
            continue;
        }
        let name = column.path.join(".");
        let bad = |what: &str| ClientError::BadInput(format!("line {line}, column {name}: {cell:?} is not {what}"));
        let value = match column.kind {
            Kind::Integer => json!(cell.trim().parse::<i64>().map_err(|_| bad("an integer"))?),
            Kind::Number => json!(cell.trim().parse::<f64>().map_err(|_| bad("a number"))?),
            Kind::Boolean => match cell.trim().to_ascii_lowercase().as_str() {
                "true" | "1" | "yes" => json!(true),
                "false" | "0" | "no" => json!(false),
                _ => return Err(bad("true or false")),
            },
            _ => json!(cell),
        };
        insert(&mut row, &column.path, value);
    }
    Ok(Value::Object(row))
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

/// Rows in the file, for the progress bar (a first, cheap pass).
fn count_rows(opts: &Options) -> Result<u64, ClientError> {
    let file = open(&opts.file)?;
    if is_csv(&opts.file) {
        let mut reader = csv::ReaderBuilder::new().from_reader(file);
        let mut record = csv::ByteRecord::new();
        let mut n = 0;
        while reader.read_byte_record(&mut record).map_err(|e| ClientError::BadInput(format!("CSV: {e}")))? {
            n += 1;
        }
        Ok(n)
    } else {
        let mut n = 0;
        for line in BufReader::new(file).lines() {
            let line = line.map_err(|e| ClientError::BadInput(format!("{}: {e}", opts.file.display())))?;
            n += u64::from(!line.trim().is_empty());
        }
        Ok(n)
    }
}

// --- sending -------------------------------------------------------------------------------------

/// One batch: its body and the file line of each row.
struct Batch {
    lines: Vec<u64>,
    body: String,
}

impl Batch {
    fn new(rows: Vec<(u64, Value)>) -> Self {
        let (lines, rows): (Vec<u64>, Vec<Value>) = rows.into_iter().unzip();
        let body = json!({ "rows": rows }).to_string();
        Self { lines, body }
    }

    /// Same rows, same entity, same mode: same key, so a resend is a replay.
    fn idempotency_key(&self, entity: &str, dry_run: bool) -> String {
        let digest = Sha256::new()
            .chain_update(entity.as_bytes())
            .chain_update([u8::from(dry_run)])
            .chain_update(self.body.as_bytes())
            .finalize();
        format!("gymapi-import-{}", &hex::encode(digest)[..48])
    }
}

/// What the server said about one batch.
#[derive(Default)]
struct Sent {
    rows: u64,
    created: i64,
    skipped: i64,
    replayed: bool,
    rate_limited: u64,
    retried: u64,
}

struct Sender {
    client: reqwest::Client,
    url: String,
    key: String,
    entity: String,
    dry_run: bool,
    max_retries: u32,
    /// Whether any batch got an answer: until one does, an unreachable server is a wrong URL.
    reached: std::sync::atomic::AtomicBool,
}

fn backoff(attempt: u32) -> Duration {
    Duration::from_millis((500u64 << attempt.min(6)).min(30_000))
}

fn retry_after(resp: &reqwest::Response) -> Duration {
    let secs = resp
        .headers()
        .get("retry-after")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok())
        .unwrap_or(1);
    Duration::from_secs(secs.clamp(1, 3600))
}

impl Sender {
    async fn send(&self, batch: Batch) -> Result<Sent, ClientError> {
        let key = batch.idempotency_key(&self.entity, self.dry_run);
        let first_line = batch.lines.first().copied().unwrap_or(0);
        let mut sent = Sent { rows: batch.lines.len() as u64, ..Sent::default() };
        let mut failures = 0;
        loop {
            let result = self
                .client
                .post(&self.url)
                .bearer_auth(&self.key)
                .header("content-type", "application/json")
                .header("idempotency-key", &key)
                .body(batch.body.clone())
                .send()
                .await;
            let problem = match result {
                Err(e) if e.is_connect() && !self.reached.load(std::sync::atomic::Ordering::Relaxed) => {
                    return Err(ClientError::Service(format!("cannot reach {}: {e}", self.url)));
                }
                Err(e) => format!("{e}"),
                Ok(resp) => {
                    self.reached.store(true, std::sync::atomic::Ordering::Relaxed);
                    let status = resp.status().as_u16();
                    match status {
                        200 => {
                            sent.replayed = resp.headers().get("idempotency-replayed").is_some_and(|v| v == "true");
                            let body: Value = resp.json().await.map_err(|e| {
                                ClientError::Service(format!("batch at line {first_line}: unreadable answer: {e}"))
                            })?;
                            // A replay is the answer of an earlier run: its rows were already there.
                            let created = body["created"].as_i64().unwrap_or(0);
                            let skipped = body["skipped"].as_i64().unwrap_or(0);
                            (sent.created, sent.skipped) =
                                if sent.replayed { (0, created + skipped) } else { (created, skipped) };
                            return Ok(sent);
                        }
                        429 => {
                            sent.rate_limited += 1;
                            tokio::time::sleep(retry_after(&resp)).await;
                            continue;
                        }
                        409 => {
                            // The same batch is still running (an earlier attempt): wait for it.
                            tokio::time::sleep(Duration::from_secs(1)).await;
                            continue;
                        }
                        422 => {
                            let body: Value = resp.json().await.unwrap_or(Value::Null);
                            return Err(ClientError::BadInput(rejected(&body, &batch.lines)));
                        }
                        s if s >= 500 => format!("HTTP {s}: {}", error_message(resp).await),
                        s => {
                            return Err(ClientError::BadInput(format!(
                                "HTTP {s} from {}: {}",
                                self.url,
                                error_message(resp).await
                            )));
                        }
                    }
                }
            };
            failures += 1;
            if failures > self.max_retries {
                return Err(ClientError::Service(format!(
                    "the batch starting at line {first_line} failed {failures} times (last: {problem}); \
                     run the same command again to resume: rows already imported are skipped"
                )));
            }
            sent.retried += 1;
            tokio::time::sleep(backoff(failures - 1)).await;
        }
    }
}

async fn error_message(resp: reqwest::Response) -> String {
    let text = resp.text().await.unwrap_or_default();
    serde_json::from_str::<Value>(&text)
        .ok()
        .and_then(|v| v["error"]["message"].as_str().map(str::to_string))
        .unwrap_or_else(|| text.chars().take(200).collect())
}

/// A 422 in the file's terms: `line 27 (rows.12.email): The email has already been taken.`
fn rejected(body: &Value, lines: &[u64]) -> String {
    let mut out = vec![format!(
        "the server refused a batch (nothing of it was written): {}",
        body["message"].as_str().unwrap_or("invalid rows")
    )];
    if let Some(errors) = body["errors"].as_object() {
        for (field, messages) in errors.iter().take(50) {
            let line = field
                .strip_prefix("rows.")
                .and_then(|rest| rest.split('.').next())
                .and_then(|i| i.parse::<usize>().ok())
                .and_then(|i| lines.get(i));
            let at = line.map_or_else(String::new, |l| format!("line {l} "));
            for m in messages.as_array().into_iter().flatten() {
                out.push(format!("  {at}({field}): {}", m.as_str().unwrap_or_default()));
            }
        }
    }
    out.join("\n")
}

/// Runs an import to the end, or to the first batch that cannot go in.
pub async fn run(opts: Options) -> Result<Summary, ClientError> {
    if !(1..=500).contains(&opts.batch_size) {
        return Err(ClientError::BadInput("--batch-size must be between 1 and 500".into()));
    }
    let fields = row_fields(&opts.entity)?;
    let total = count_rows(&opts)?;
    let mut rows = Rows::open(&opts, &fields)?;
    let client = reqwest::Client::builder()
        .user_agent(concat!("gymapi-import/", env!("CARGO_PKG_VERSION")))
        .connect_timeout(Duration::from_secs(10))
        .timeout(Duration::from_secs(120))
        .build()
        .map_err(|e| ClientError::Service(format!("HTTP client: {e}")))?;
    let base = opts.base_url.trim_end_matches('/');
    let sender = Sender {
        client,
        url: format!("{base}/import/{}{}", opts.entity, if opts.dry_run { "?dry_run=true" } else { "" }),
        key: opts.key.clone(),
        entity: opts.entity.clone(),
        dry_run: opts.dry_run,
        max_retries: opts.max_retries,
        reached: std::sync::atomic::AtomicBool::new(false),
    };
    let bar = progress_bar(total, opts.progress);
    let started = Instant::now();
    let batch_size = opts.batch_size;
    let batches = std::iter::from_fn(move || {
        let mut batch = Vec::with_capacity(batch_size);
        while batch.len() < batch_size {
            match rows.next_row() {
                None => break,
                Some(Ok(row)) => batch.push(row),
                Some(Err(e)) => return Some(Err(e)),
            }
        }
        (!batch.is_empty()).then(|| Ok(Batch::new(batch)))
    });
    let sender = &sender;
    let mut results = stream::iter(batches)
        .map(|batch| async move {
            match batch {
                Ok(b) => sender.send(b).await,
                Err(e) => Err(e),
            }
        })
        .buffered(opts.jobs.max(1));
    let mut summary = Summary::default();
    while let Some(result) = results.next().await {
        let sent = match result {
            Ok(s) => s,
            Err(e) => {
                bar.abandon();
                return Err(e);
            }
        };
        summary.rows += sent.rows;
        summary.batches += 1;
        summary.created += sent.created;
        summary.skipped += sent.skipped;
        summary.replayed += u64::from(sent.replayed);
        summary.rate_limited += sent.rate_limited;
        summary.retried += sent.retried;
        bar.set_position(summary.rows);
        bar.set_message(format!("{} created, {} skipped", summary.created, summary.skipped));
    }
    bar.finish();
    summary.seconds = started.elapsed().as_secs_f64();
    Ok(summary)
}

fn progress_bar(total: u64, show: bool) -> indicatif::ProgressBar {
    if !show {
        return indicatif::ProgressBar::hidden();
    }
    let bar = indicatif::ProgressBar::new(total);
    if let Ok(style) = indicatif::ProgressStyle::with_template(
        "{elapsed_precise} [{wide_bar}] {human_pos}/{human_len} rows, {per_sec}, ETA {eta} {msg}",
    ) {
        bar.set_style(style.progress_chars("=> "));
    }
    bar
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn csv_columns_are_typed_by_the_row_schema() {
        let fields = row_fields("plans").unwrap();
        assert_eq!(leaf(&fields, &["price".into(), "amount".into()]), Some(&Kind::Integer));
        assert_eq!(leaf(&fields, &["duration_days".into()]), Some(&Kind::Integer));
        assert_eq!(leaf(&fields, &["name".into()]), Some(&Kind::String));
        assert_eq!(leaf(&fields, &["price".into()]), None, "an object is not a column");
        let columns = vec![
            Some(Column { path: vec!["legacy_id".into()], kind: Kind::String }),
            Some(Column { path: vec!["price".into(), "amount".into()], kind: Kind::Integer }),
            Some(Column { path: vec!["price".into(), "currency".into()], kind: Kind::String }),
            Some(Column { path: vec!["description".into()], kind: Kind::String }),
            None,
        ];
        let record = csv::StringRecord::from(vec!["P-1", " 4900", "EUR", "", "ignored"]);
        let row = csv_row(2, &record, &columns).unwrap();
        assert_eq!(row, json!({"legacy_id": "P-1", "price": {"amount": 4900, "currency": "EUR"}}));
        let record = csv::StringRecord::from(vec!["P-1", "49.00", "EUR", "", ""]);
        let err = csv_row(7, &record, &columns).unwrap_err().to_string();
        assert_eq!(err, "line 7, column price.amount: \"49.00\" is not an integer");
    }

    #[test]
    fn unknown_entities_are_bad_input() {
        assert!(matches!(row_fields("nope"), Err(ClientError::BadInput(_))));
    }

    #[test]
    fn a_refusal_names_file_lines() {
        let body = json!({"message": "The given data was invalid.", "errors": {"rows.1.email": ["The email has already been taken."]}});
        let text = rejected(&body, &[10, 12]);
        assert!(text.contains("  line 12 (rows.1.email): The email has already been taken."), "{text}");
    }

    #[test]
    fn keys_follow_the_content() {
        let a = Batch::new(vec![(1, json!({"legacy_id": "1"}))]);
        let b = Batch::new(vec![(5, json!({"legacy_id": "1"}))]);
        let c = Batch::new(vec![(1, json!({"legacy_id": "2"}))]);
        assert_eq!(a.idempotency_key("members", false), b.idempotency_key("members", false));
        assert_ne!(a.idempotency_key("members", false), c.idempotency_key("members", false));
        assert_ne!(a.idempotency_key("members", false), a.idempotency_key("members", true));
        assert_ne!(a.idempotency_key("members", false), a.idempotency_key("products", false));
    }
}
