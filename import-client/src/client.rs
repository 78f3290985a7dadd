//! `gymapi import`: moves a file into a gym through `POST /import/{entity}`.
//!
//! - Rows go in batches (500 by default), each with an `Idempotency-Key` derived from its content,
//!   so a batch resent after a lost answer is replayed by the server, never run twice.
//! - `429` waits for `Retry-After` and tries again (it is not a failure: at the default limit the
//!   client settles at 120 batches a minute); `409` (the same batch still running) waits a second;
//!   `5xx` and network errors back off exponentially up to `--max-retries`.
//! - Rows whose `legacy_id` was imported before are skipped by the server, so an interrupted run is
//!   resumed by running the same command again.
//! - A 422 is reported with the file's lines. With a rejects file, the refused rows go there instead
//!   and the rest of the batch is sent again (its content changed, so under a new key): the batch
//!   stays all-or-nothing on the server.

use std::{
    path::PathBuf,
    sync::Arc,
    time::{Duration, Instant},
};

use futures_util::{StreamExt, stream};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use super::{
    ClientError, caps,
    mapping::Mapping,
    plan::Plan,
    rejects::{Refused, Rejects},
    schema::{Entity, Kind, row_fields},
    source::{ReadOptions, Row, Table},
};

/// What the command was asked to do.
#[derive(Clone, Debug)]
pub(super) struct Options {
    /// Base URL of the API, e.g. `https://api.example.com/api/v1`.
    pub base_url: String,
    pub key: String,
    pub entity: Entity,
    pub file: PathBuf,
    pub read: ReadOptions,
    pub mapping: Option<Arc<Mapping>>,
    /// Column -> field, over the mapping file's.
    pub map: Vec<(String, String)>,
    pub rejects: Option<PathBuf>,
    pub batch_size: usize,
    /// Batches in flight at once.
    pub jobs: usize,
    pub dry_run: bool,
    /// Attempts after the first for a batch that meets a 5xx or a network error.
    pub max_retries: u32,
    /// Draw a progress bar on stderr (only when it is a terminal).
    pub progress: bool,
}

/// What a run did.
#[derive(Clone, Debug, Default, PartialEq)]
pub(super) struct Summary {
    pub rows: u64,
    pub batches: u64,
    /// Rows this run wrote.
    pub created: i64,
    /// Rows that were there already (imported earlier, or by an earlier run of this file).
    pub skipped: i64,
    /// Rows written to the rejects file.
    pub rejected: u64,
    /// Batches answered from the server's idempotency store (sent before, answer lost).
    pub replayed: u64,
    /// Waits for the rate limit (429).
    pub rate_limited: u64,
    /// Retries after a 5xx or a network error.
    pub retried: u64,
    pub seconds: f64,
}

impl Summary {
    pub(super) fn rows_per_second(&self) -> f64 {
        if self.seconds > 0.0 { self.rows as f64 / self.seconds } else { 0.0 }
    }

    pub(super) fn to_json(&self, entity: Entity, dry_run: bool, rejects: Option<&PathBuf>) -> Value {
        json!({
            "entity": entity.name(),
            "dry_run": dry_run,
            "rows": self.rows,
            "batches": self.batches,
            "created": self.created,
            "skipped": self.skipped,
            "rejected": self.rejected,
            "rejects_file": rejects.map(|p| p.display().to_string()),
            "replayed": self.replayed,
            "rate_limited": self.rate_limited,
            "retried": self.retried,
            "seconds": (self.seconds * 1000.0).round() / 1000.0,
            "rows_per_second": self.rows_per_second().round(),
        })
    }
}

// --- batches -------------------------------------------------------------------------------------

/// One batch: its rows with their file lines, the rows as read (kept for a rejects file), and the
/// rows refused before sending.
#[derive(Default)]
struct Batch {
    lines: Vec<u64>,
    rows: Vec<Value>,
    originals: Vec<Row>,
    refused: Vec<Refused>,
}

impl Batch {
    fn body(&self) -> String {
        json!({ "rows": self.rows }).to_string()
    }

    /// Same rows, same entity, same mode: same key, so a resend is a replay.
    fn idempotency_key(body: &str, entity: Entity, dry_run: bool) -> String {
        let digest = Sha256::new()
            .chain_update(entity.name().as_bytes())
            .chain_update([u8::from(dry_run)])
            .chain_update(body.as_bytes())
            .finalize();
        format!("gymapi-import-{}", &hex::encode(digest)[..48])
    }

    /// Takes the rows a 422 names out of the batch, into `refused`; `false` if it names something
    /// that is not a row (nothing is taken then).
    fn take_refused(&mut self, body: &Value) -> bool {
        let Some(errors) = body["errors"].as_object().filter(|e| !e.is_empty()) else { return false };
        let mut by_row: std::collections::BTreeMap<usize, Vec<String>> = Default::default();
        for (field, messages) in errors {
            let Some((index, rest)) = row_of(field) else { return false };
            if index >= self.rows.len() || self.originals.len() != self.rows.len() {
                return false;
            }
            let messages = messages.as_array().into_iter().flatten().filter_map(Value::as_str);
            by_row.entry(index).or_default().extend(messages.map(|m| format!("{rest}: {m}")));
        }
        for (index, reasons) in by_row.into_iter().rev() {
            self.rows.remove(index);
            let line = self.lines.remove(index);
            let row = self.originals.remove(index);
            self.refused.push(Refused { line, row, reasons });
        }
        true
    }
}

/// `rows.12.email` -> (12, "email").
fn row_of(field: &str) -> Option<(usize, &str)> {
    let rest = field.strip_prefix("rows.")?;
    let (index, rest) = rest.split_once('.').unwrap_or((rest, "row"));
    Some((index.parse().ok()?, rest))
}

// --- sending -------------------------------------------------------------------------------------

/// What the server said about one batch.
#[derive(Default)]
struct Sent {
    rows: u64,
    created: i64,
    skipped: i64,
    replayed: bool,
    rate_limited: u64,
    retried: u64,
    refused: Vec<Refused>,
}

struct Sender {
    client: reqwest::Client,
    url: String,
    key: String,
    entity: Entity,
    dry_run: bool,
    max_retries: u32,
    /// Refused rows go to a rejects file rather than stopping the run.
    keep_going: bool,
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

/// How one attempt ended.
enum Attempt {
    Done,
    Refused(Value),
    Again,
    Failed(String),
}

impl Sender {
    async fn send(&self, mut batch: Batch) -> Result<Sent, ClientError> {
        let mut sent = Sent { rows: (batch.lines.len() + batch.refused.len()) as u64, ..Sent::default() };
        let mut failures = 0;
        while !batch.rows.is_empty() {
            let body = batch.body();
            match self.attempt(&body, &mut sent).await? {
                Attempt::Done => break,
                Attempt::Again => continue,
                Attempt::Refused(answer) => {
                    if !self.keep_going || !batch.take_refused(&answer) {
                        return Err(ClientError::BadInput(rejected(&answer, &batch.lines)));
                    }
                }
                Attempt::Failed(problem) => {
                    failures += 1;
                    if failures > self.max_retries {
                        return Err(ClientError::Service(format!(
                            "the batch starting at line {} failed {failures} times (last: {problem}); \
                             run the same command again to resume: rows already imported are skipped",
                            batch.lines.first().copied().unwrap_or(0)
                        )));
                    }
                    sent.retried += 1;
                    tokio::time::sleep(backoff(failures - 1)).await;
                }
            }
        }
        sent.refused = batch.refused;
        sent.refused.sort_by_key(|r| r.line);
        Ok(sent)
    }

    async fn attempt(&self, body: &str, sent: &mut Sent) -> Result<Attempt, ClientError> {
        let key = Batch::idempotency_key(body, self.entity, self.dry_run);
        let result = self
            .client
            .post(&self.url)
            .bearer_auth(&self.key)
            .header("content-type", "application/json")
            .header("idempotency-key", &key)
            .body(body.to_string())
            .send()
            .await;
        let resp = match result {
            Err(e) if e.is_connect() && !self.reached.load(std::sync::atomic::Ordering::Relaxed) => {
                return Err(ClientError::Service(format!("cannot reach {}: {e}", self.url)));
            }
            Err(e) => return Ok(Attempt::Failed(e.to_string())),
            Ok(resp) => resp,
        };
        self.reached.store(true, std::sync::atomic::Ordering::Relaxed);
        match resp.status().as_u16() {
            200 => {
                sent.replayed = resp.headers().get("idempotency-replayed").is_some_and(|v| v == "true");
                let answer: Value =
                    resp.json().await.map_err(|e| ClientError::Service(format!("unreadable answer: {e}")))?;
                // A replay is the answer of an earlier run: its rows were already there.
                let created = answer["created"].as_i64().unwrap_or(0);
                let skipped = answer["skipped"].as_i64().unwrap_or(0);
                let (c, s) = if sent.replayed { (0, created + skipped) } else { (created, skipped) };
                sent.created += c;
                sent.skipped += s;
                Ok(Attempt::Done)
            }
            429 => {
                sent.rate_limited += 1;
                tokio::time::sleep(retry_after(&resp)).await;
                Ok(Attempt::Again)
            }
            409 => {
                // The same batch is still running (an earlier attempt): wait for it.
                tokio::time::sleep(Duration::from_secs(1)).await;
                Ok(Attempt::Again)
            }
            422 => Ok(Attempt::Refused(resp.json().await.unwrap_or(Value::Null))),
            s if s >= 500 => Ok(Attempt::Failed(format!("HTTP {s}: {}", error_message(resp).await))),
            s => Err(ClientError::BadInput(format!("HTTP {s} from {}: {}", self.url, error_message(resp).await))),
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
            let line = row_of(field).and_then(|(i, _)| lines.get(i));
            let at = line.map_or_else(String::new, |l| format!("line {l} "));
            for m in messages.as_array().into_iter().flatten() {
                out.push(format!("  {at}({field}): {}", m.as_str().unwrap_or_default()));
            }
        }
    }
    out.join("\n")
}

// --- the run -------------------------------------------------------------------------------------

fn http_client() -> Result<reqwest::Client, ClientError> {
    reqwest::Client::builder()
        .user_agent(concat!("gymapi-import/", env!("CARGO_PKG_VERSION")))
        .connect_timeout(Duration::from_secs(10))
        .timeout(Duration::from_secs(120))
        .build()
        .map_err(|e| ClientError::Service(format!("HTTP client: {e}")))
}

/// The gym's time zone, for times without an offset (from `GET /statistics`).
async fn gym_time_zone(client: &reqwest::Client, opts: &Options) -> Result<chrono_tz::Tz, ClientError> {
    let url = format!("{}/statistics", opts.base_url.trim_end_matches('/'));
    let resp = client
        .get(&url)
        .bearer_auth(&opts.key)
        .send()
        .await
        .map_err(|e| ClientError::Service(format!("cannot reach {url}: {e}")))?;
    if !resp.status().is_success() {
        let status = resp.status().as_u16();
        return Err(ClientError::BadInput(format!("HTTP {status} from {url}: {}", error_message(resp).await)));
    }
    let body: Value = resp.json().await.map_err(|e| ClientError::Service(format!("unreadable answer: {e}")))?;
    let zone = body["revenue_this_month"]["timezone"].as_str().unwrap_or_default();
    zone.parse().map_err(|_| ClientError::Service(format!("the gym's time zone {zone:?} is unknown here")))
}

/// The file's rules: the mapping file's, `--map`'s, and the gym's time zone when a time column
/// may need it.
async fn plan(opts: &Options, client: &reqwest::Client, table: &Table) -> Result<Plan, ClientError> {
    let fields = row_fields(opts.entity)?;
    let settings = opts.mapping.as_ref().map(|m| m.settings(opts.entity)).unwrap_or_default();
    let section = opts.mapping.as_ref().and_then(|m| m.sections.get(&opts.entity));
    let times = fields.values().any(|k| *k == Kind::DateTime);
    let tz = match (&opts.mapping, settings.time_zone) {
        (Some(_), None) if times && !table.headers.is_empty() => Some(gym_time_zone(client, opts).await?),
        _ => None,
    };
    let plan = Plan::new(opts.entity, &fields, &table.headers, section, &settings, &opts.map, tz)?;
    plan.check_columns(&table.path, &fields)?;
    Ok(plan)
}

/// The JSON a batch's rows may take: three quarters of the server's largest body, the rest left to
/// the envelope and to escaping.
const BATCH_BYTES: usize = gymapi_contract::MAX_BODY_BYTES / 4 * 3;
/// The refused rows one batch may hold before it is sent (they wait for it, into the rejects file).
const REFUSED_BYTES: usize = 16 * 1024 * 1024;

/// A row ready to send (its line, value, row as read and JSON length), or refused.
type Converted = Result<(u64, Value, Row, usize), Refused>;

/// Cuts a file's rows into batches of at most `size` rows and [`BATCH_BYTES`].
struct Batcher<'a> {
    table: Table,
    plan: &'a Plan,
    size: usize,
    /// Keep the refused rows (there is a rejects file), else the first one ends the run.
    keep: bool,
    /// A row that did not fit the batch before, with its JSON length.
    carried: Option<(u64, Value, Row, usize)>,
}

fn row_bytes(row: &Row) -> usize {
    match row {
        Row::Cells(record) => record.as_byte_record().as_slice().len(),
        Row::Object(_) => caps::ROW_BYTES,
        Row::TooLarge(row, why) => row_bytes(row) + why.len(),
    }
}

impl Batcher<'_> {
    /// The next batch, with the rows refused on the way.
    fn next_batch(&mut self) -> Option<Result<Batch, ClientError>> {
        let mut batch = Batch::default();
        let (mut bytes, mut refused_bytes) = (0usize, 0usize);
        while batch.rows.len() < self.size && refused_bytes < REFUSED_BYTES {
            let (line, value, row, len) = match self.carried.take() {
                Some(carried) => carried,
                None => match self.converted() {
                    None => break,
                    Some(Ok(Ok(converted))) => converted,
                    Some(Ok(Err(refused))) => {
                        refused_bytes += row_bytes(&refused.row);
                        batch.refused.push(refused);
                        continue;
                    }
                    Some(Err(e)) => return Some(Err(e)),
                },
            };
            if bytes + len > BATCH_BYTES && !batch.rows.is_empty() {
                self.carried = Some((line, value, row, len));
                break;
            }
            bytes += len;
            batch.lines.push(line);
            batch.rows.push(value);
            if self.keep {
                batch.originals.push(row);
            }
            if batch.rows.len() + batch.refused.len() >= self.size * 4 {
                break;
            }
        }
        (!batch.lines.is_empty() || !batch.refused.is_empty()).then_some(Ok(batch))
    }

    /// The next row converted (with its JSON length), or refused with its reasons; `None` at the
    /// end of the file.
    fn converted(&mut self) -> Option<Result<Converted, ClientError>> {
        let (line, row) = match self.table.next_row()? {
            Ok(r) => r,
            Err(e) => return Some(Err(e)),
        };
        let converted = match &row {
            Row::Object(v) => Ok(v.clone()),
            Row::Cells(record) => self.plan.row(record),
            Row::TooLarge(_, why) => Err(vec![why.clone()]),
        };
        let converted = converted.and_then(|value| {
            let len = value.to_string().len();
            if len > BATCH_BYTES {
                return Err(vec![format!("the row is {len} bytes as JSON, more than {BATCH_BYTES} a request carries")]);
            }
            Ok((value, len))
        });
        Some(match converted {
            Ok((value, len)) => Ok(Ok((line, value, row, len))),
            Err(reasons) if self.keep => Ok(Err(Refused { line, row: refused_row(row), reasons })),
            Err(reasons) => Err(ClientError::BadInput(format!("line {line}: {}", reasons.join("; ")))),
        })
    }
}

/// A refused row as the rejects file writes it: a row past a limit as far as it was kept.
fn refused_row(row: Row) -> Row {
    match row {
        Row::TooLarge(inner, _) => *inner,
        row => row,
    }
}

/// Runs an import to the end, or to the first batch that cannot go in.
pub(super) async fn run(opts: Options) -> Result<Summary, ClientError> {
    if !(1..=500).contains(&opts.batch_size) {
        return Err(ClientError::BadInput("--batch-size must be between 1 and 500".into()));
    }
    let client = http_client()?;
    let table = Table::open(&opts.file, &opts.read)?;
    let plan = plan(&opts, &client, &table).await?;
    // A first pass over the file, for the bar only.
    let total = if opts.progress { Table::count_rows(&opts.file, &opts.read)? } else { 0 };
    let mut rejects = match &opts.rejects {
        Some(path) => Some(Rejects::create(path, &table.headers, &table.layout)?),
        None => None,
    };
    let base = opts.base_url.trim_end_matches('/');
    let sender = Sender {
        client,
        url: format!("{base}/import/{}{}", opts.entity.name(), if opts.dry_run { "?dry_run=true" } else { "" }),
        key: opts.key.clone(),
        entity: opts.entity,
        dry_run: opts.dry_run,
        max_retries: opts.max_retries,
        keep_going: rejects.is_some(),
        reached: std::sync::atomic::AtomicBool::new(false),
    };
    let bar = progress_bar(total, opts.progress);
    let started = Instant::now();
    let mut batcher = Batcher { table, plan: &plan, size: opts.batch_size, keep: rejects.is_some(), carried: None };
    let batches = std::iter::from_fn(move || batcher.next_batch());
    let sender = &sender;
    let mut results =
        stream::iter(batches).map(|batch| async move { sender.send(batch?).await }).buffered(opts.jobs.max(1));
    let mut summary = Summary::default();
    while let Some(result) = results.next().await {
        let sent = match result {
            Ok(s) => s,
            Err(e) => {
                bar.abandon();
                return Err(e);
            }
        };
        if let Some(rejects) = rejects.as_mut() {
            for refused in &sent.refused {
                rejects.write(refused)?;
            }
        }
        summary.rows += sent.rows;
        summary.batches += 1;
        summary.created += sent.created;
        summary.skipped += sent.skipped;
        summary.rejected += sent.refused.len() as u64;
        summary.replayed += u64::from(sent.replayed);
        summary.rate_limited += sent.rate_limited;
        summary.retried += sent.retried;
        bar.set_position(summary.rows);
        bar.set_message(format!(
            "{} created, {} skipped, {} rejected",
            summary.created, summary.skipped, summary.rejected
        ));
    }
    if let Some(rejects) = rejects {
        rejects.finish()?;
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
    fn a_refusal_names_file_lines() {
        let body = json!({"message": "The given data was invalid.", "errors": {"rows.1.email": ["The email has already been taken."]}});
        let text = rejected(&body, &[10, 12]);
        assert!(text.contains("  line 12 (rows.1.email): The email has already been taken."), "{text}");
    }

    #[test]
    fn refused_rows_leave_the_batch() {
        let row = |i: u64| Row::Cells(csv::StringRecord::from(vec![format!("M-{i}")]));
        let mut batch = Batch {
            lines: vec![2, 3, 4],
            rows: vec![json!({"legacy_id": "1"}), json!({"legacy_id": "2"}), json!({"legacy_id": "3"})],
            originals: vec![row(1), row(2), row(3)],
            refused: Vec::new(),
        };
        let answer = json!({"errors": {"rows.1.email": ["taken"], "rows.1.first_name": ["missing"]}});
        assert!(batch.take_refused(&answer));
        assert_eq!(batch.lines, vec![2, 4]);
        assert_eq!(batch.refused.len(), 1);
        assert_eq!((batch.refused[0].line, batch.refused[0].reasons.len()), (3, 2));
        assert!(!batch.take_refused(&json!({"errors": {"rows": ["too many"]}})));
    }

    #[test]
    fn keys_follow_the_content() {
        let key = |body: &str, e, d| Batch::idempotency_key(body, e, d);
        let (a, c) = (r#"{"rows":[{"legacy_id":"1"}]}"#, r#"{"rows":[{"legacy_id":"2"}]}"#);
        assert_ne!(key(a, Entity::Members, false), key(c, Entity::Members, false));
        assert_ne!(key(a, Entity::Members, false), key(a, Entity::Members, true));
        assert_ne!(key(a, Entity::Members, false), key(a, Entity::Products, false));
        assert_eq!(key(a, Entity::Members, false), key(a, Entity::Members, false));
    }
}
