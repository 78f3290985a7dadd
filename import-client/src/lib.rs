//! `gymapi import`: reads the files an old system exports ([`source`]), turns their rows into the
//! rows of `POST /import/{entity}` ([`mapping`], [`plan`], [`cell`]) and sends them ([`client`]);
//! `gymapi import inspect` shows what it would send ([`inspect`]); `--dir` imports a whole gym.
//!
//! A client of the API like any other: it knows the server only through its document
//! (`gymapi-contract`), and the `gymapi` command runs it as `gymapi import`.

mod caps;
mod cell;
mod client;
mod csv_rows;
mod inspect;
mod mapping;
mod plan;
mod rejects;
mod schema;
mod source;
mod workbook;

use std::{path::PathBuf, sync::Arc};

use clap::{Args, Subcommand};

use schema::Entity;

/// Why `gymapi import` stopped: the message, and whether the input was wrong (exit 2) rather than
/// the service failing (exit 1).
#[derive(Debug)]
pub struct Failure {
    pub message: String,
    pub bad_input: bool,
}

fn bad_input(message: impl Into<String>) -> Failure {
    Failure { message: message.into(), bad_input: true }
}

/// `value` with `--json`, else the sentence `human` makes, on standard output; a reader that
/// stops early (`| head`) loses the rest and nothing fails.
fn print(json_out: bool, value: serde_json::Value, human: impl FnOnce() -> String) {
    use std::io::Write as _;
    let text = if json_out { value.to_string() } else { human() };
    let _ = writeln!(std::io::stdout().lock(), "{text}");
}

/// Why a run stopped.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ClientError {
    /// The file, the options or the rows are wrong (exit 2): nothing more is sent.
    #[error("{0}")]
    BadInput(String),
    /// The service kept failing (exit 1); running the same command again resumes.
    #[error("{0}")]
    Service(String),
}

impl From<ClientError> for Failure {
    fn from(e: ClientError) -> Self {
        match e {
            ClientError::BadInput(m) => bad_input(m),
            ClientError::Service(m) => Failure { message: m, bad_input: false },
        }
    }
}

/// How files are read and mapped; shared by the import and `inspect`.
#[derive(Args, Debug, Clone)]
pub(crate) struct ReadArgs {
    /// plans, members, memberships, attendance, access_logs, products or purchases (default: the
    /// file's name, e.g. members.csv, or the mapping file's only kind).
    #[arg(long)]
    entity: Option<String>,
    /// A mapping file (TOML or YAML): column renames, date formats, money, value maps, constants.
    #[arg(long)]
    mapping: Option<PathBuf>,
    /// Rename a column: COLUMN=FIELD (nested fields with dots, e.g. price.amount); COLUMN=- skips it.
    #[arg(long = "map", value_name = "COLUMN=FIELD")]
    map: Vec<String>,
    /// The CSV delimiter: , ; | or tab (detected when left out).
    #[arg(long)]
    delimiter: Option<String>,
    /// The file's encoding, e.g. windows-1252, utf-16le (detected when left out).
    #[arg(long)]
    encoding: Option<String>,
    /// The sheet of an .xlsx/.ods workbook (the first when left out).
    #[arg(long)]
    sheet: Option<String>,
}

#[derive(Args, Debug)]
#[command(args_conflicts_with_subcommands = true, subcommand_negates_reqs = true)]
pub struct ImportArgs {
    #[command(subcommand)]
    command: Option<ImportCommand>,
    /// The server (`/api/v1` is added unless the URL ends with it).
    #[arg(long, env = "GYMAPI_BASE_URL", default_value = "http://127.0.0.1:8080")]
    base_url: String,
    /// The API key (or GYMAPI_KEY, which keeps it out of the process list).
    #[arg(long, env = "GYMAPI_KEY", hide_env_values = true)]
    key: Option<String>,
    #[command(flatten)]
    read: ReadArgs,
    /// A CSV (any common delimiter and encoding), .xlsx, .ods or JSON Lines (.jsonl) file with a
    /// header row.
    #[arg(required_unless_present = "dir")]
    file: Option<PathBuf>,
    /// Import a whole gym: one file per kind in this folder (members.csv, plans.xlsx, ... or as the
    /// mapping file's `file` says), in the order the server needs.
    #[arg(long, conflicts_with = "file")]
    dir: Option<PathBuf>,
    /// Import every row the server accepts and write the refused ones, each with its reasons, to
    /// this file (with --dir: this folder, one file per kind).
    #[arg(long)]
    rejects: Option<PathBuf>,
    /// Rows per request (1 to 500).
    #[arg(long, default_value_t = 500)]
    batch_size: usize,
    /// Requests in flight at once.
    #[arg(long, default_value_t = 1)]
    jobs: usize,
    /// Validate every batch on the server and report; write nothing.
    #[arg(long)]
    dry_run: bool,
    /// Retries of a batch after a 5xx or a network error (a 429 always waits and retries).
    #[arg(long, default_value_t = 8)]
    max_retries: u32,
    /// No progress bar.
    #[arg(long)]
    quiet: bool,
    #[arg(long)]
    json: bool,
}

#[derive(Subcommand, Debug)]
enum ImportCommand {
    /// Show what a file holds and what would be sent, without sending anything.
    Inspect(inspect::InspectArgs),
}

/// What the read options say, checked.
struct Reading {
    read: source::ReadOptions,
    mapping: Option<Arc<mapping::Mapping>>,
    map: Vec<(String, String)>,
}

impl ReadArgs {
    fn resolve(&self) -> Result<Reading, ClientError> {
        let mut map = Vec::with_capacity(self.map.len());
        for m in &self.map {
            let (column, field) =
                m.split_once('=').ok_or_else(|| ClientError::BadInput(format!("--map {m}: expected COLUMN=FIELD")))?;
            map.push((column.trim().to_string(), field.trim().to_string()));
        }
        let delimiter = match self.delimiter.as_deref() {
            None => None,
            Some(d) => Some(
                source::delimiter_of(d)
                    .ok_or_else(|| ClientError::BadInput(format!("--delimiter {d:?}: one character, or tab")))?,
            ),
        };
        let encoding = match self.encoding.as_deref() {
            None => None,
            Some(label) => Some(encoding_rs::Encoding::for_label(label.as_bytes()).ok_or_else(|| {
                ClientError::BadInput(format!(
                    "--encoding {label:?}: not an encoding (utf-8, utf-16le, windows-1252, ...)"
                ))
            })?),
        };
        let mapping = self.mapping.as_deref().map(mapping::Mapping::load).transpose()?.map(Arc::new);
        let read = source::ReadOptions { delimiter, encoding, sheet: self.sheet.clone(), decimal: None };
        Ok(Reading { read, mapping, map })
    }

    /// The kind of `file`: `--entity`, else its name, else the mapping file's only kind.
    fn entity(&self, file: &std::path::Path, mapping: Option<&mapping::Mapping>) -> Result<Entity, ClientError> {
        if let Some(e) = &self.entity {
            return Entity::parse(e);
        }
        let stem = file.file_stem().and_then(|s| s.to_str()).unwrap_or_default().to_ascii_lowercase();
        let by_name = Entity::ALL.into_iter().find(|e| stem == e.name() || stem.starts_with(&format!("{}.", e.name())));
        let by_mapping = mapping.filter(|m| m.sections.len() == 1).and_then(|m| m.sections.keys().next().copied());
        by_name.or(by_mapping).ok_or_else(|| {
            ClientError::BadInput(format!(
                "{}: which kind is it? Give --entity (plans, members, memberships, attendance, access_logs, products or purchases)",
                file.display()
            ))
        })
    }
}

impl Reading {
    /// The read options for one kind: the command line's, then the mapping file's.
    fn for_entity(&self, entity: Entity) -> source::ReadOptions {
        let settings = self.mapping.as_ref().map(|m| m.settings(entity)).unwrap_or_default();
        source::ReadOptions {
            delimiter: self.read.delimiter.or(settings.delimiter),
            encoding: self.read.encoding.or(settings.encoding),
            sheet: self.read.sheet.clone().or(settings.sheet),
            decimal: settings.decimal,
        }
    }
}

pub async fn run(a: ImportArgs) -> Result<(), Failure> {
    if let Some(ImportCommand::Inspect(i)) = a.command {
        return inspect::run(i).map_err(Failure::from);
    }
    let key = a.key.clone().ok_or_else(|| bad_input("give the API key with --key or GYMAPI_KEY"))?;
    let reading = a.read.resolve()?;
    let base = a.base_url.trim_end_matches('/');
    let base_url = if base.ends_with("/api/v1") { base.to_string() } else { format!("{base}/api/v1") };
    let files = match (&a.dir, &a.file) {
        (Some(dir), _) => files_of(dir, reading.mapping.as_deref())?,
        (None, Some(file)) => vec![(a.read.entity(file, reading.mapping.as_deref())?, file.clone())],
        (None, None) => return Err(bad_input("give a file, or --dir with one file per kind")),
    };
    if let (Some(_), Some(folder)) = (&a.dir, &a.rejects) {
        std::fs::create_dir_all(folder).map_err(|e| bad_input(format!("{}: {e}", folder.display())))?;
    }
    let mut done = Vec::new();
    for (i, (entity, file)) in files.iter().enumerate() {
        let rejects = match (&a.dir, &a.rejects) {
            (Some(_), Some(folder)) => {
                Some(folder.join(format!("{}.rejects.{}", entity.name(), rejects_extension(file))))
            }
            (_, r) => r.clone(),
        };
        let opts = client::Options {
            base_url: base_url.clone(),
            key: key.clone(),
            entity: *entity,
            file: file.clone(),
            read: reading.for_entity(*entity),
            mapping: reading.mapping.clone(),
            map: if a.dir.is_some() { Vec::new() } else { reading.map.clone() },
            rejects: rejects.clone(),
            batch_size: a.batch_size,
            jobs: a.jobs,
            dry_run: a.dry_run,
            max_retries: a.max_retries,
            progress: !a.quiet && !a.json,
        };
        let summary = client::run(opts).await.map_err(|e| {
            let left: Vec<&str> = files[i + 1..].iter().map(|(e, _)| e.name()).collect();
            let mut f = Failure::from(e);
            if !left.is_empty() {
                f.message = format!(
                    "{}: {}\nnot imported (they may refer to its rows): {}",
                    entity.name(),
                    f.message,
                    left.join(", ")
                );
            }
            f
        })?;
        report(&a, *entity, &summary, rejects.as_ref());
        done.push(summary.to_json(*entity, a.dry_run, rejects.as_ref()));
    }
    if a.dir.is_some() && a.json {
        println!("{}", serde_json::Value::from(done));
    }
    Ok(())
}

fn rejects_extension(file: &std::path::Path) -> &'static str {
    match source::kind_of_file(file) {
        source::FileKind::JsonLines => "jsonl",
        _ => "csv",
    }
}

fn report(a: &ImportArgs, entity: Entity, summary: &client::Summary, rejects: Option<&PathBuf>) {
    if a.dir.is_some() && a.json {
        return;
    }
    print(a.json, summary.to_json(entity, a.dry_run, rejects), || {
        let rejected = match rejects {
            Some(path) => format!(", {} rejected (in {})", summary.rejected, path.display()),
            None => String::new(),
        };
        format!(
            "{}{}: {} rows in {} batches ({} answered from an earlier run), {} created, {} already there{rejected}, {:.1} s ({:.0} rows/s); {} waits for the rate limit, {} retries",
            entity.name(),
            if a.dry_run { " (dry run)" } else { "" },
            summary.rows,
            summary.batches,
            summary.replayed,
            summary.created,
            summary.skipped,
            summary.seconds,
            summary.rows_per_second(),
            summary.rate_limited,
            summary.retried,
        )
    });
}

/// One file per kind in `dir`, in import order: the mapping file's `file`, else the first of
/// `<kind>.csv`, `.tsv`, `.txt`, `.xlsx`, `.ods`, `.jsonl`.
fn files_of(dir: &std::path::Path, mapping: Option<&mapping::Mapping>) -> Result<Vec<(Entity, PathBuf)>, Failure> {
    if !dir.is_dir() {
        return Err(bad_input(format!("{} is not a folder", dir.display())));
    }
    let mut found = Vec::new();
    for entity in Entity::ALL {
        let named = mapping.and_then(|m| m.sections.get(&entity)).and_then(|s| s.file.as_ref());
        if let Some(name) = named {
            let path = dir.join(name);
            if !path.is_file() {
                return Err(bad_input(format!(
                    "{}: the mapping file names it for {}, but it is not there",
                    path.display(),
                    entity.name()
                )));
            }
            found.push((entity, path));
            continue;
        }
        let candidates =
            ["csv", "tsv", "txt", "xlsx", "ods", "jsonl"].map(|ext| dir.join(format!("{}.{ext}", entity.name())));
        if let Some(path) = candidates.into_iter().find(|p| p.is_file()) {
            found.push((entity, path));
        }
    }
    if found.is_empty() {
        return Err(bad_input(format!(
            "{}: no file of any kind (members.csv, plans.xlsx, ..., or named by the mapping file's `file`)",
            dir.display()
        )));
    }
    Ok(found)
}
