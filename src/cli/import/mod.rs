//! `gymapi import`: sends a file of rows to `POST /import/{entity}` with [`client`].

mod client;

use clap::Args;

use super::{Failure, bad_input, print};
use client::ClientError;

#[derive(Args, Debug)]
pub(super) struct ImportArgs {
    /// The server (`/api/v1` is added unless the URL ends with it).
    #[arg(long, env = "GYMAPI_BASE_URL", default_value = "http://127.0.0.1:8080")]
    base_url: String,
    /// The API key (or GYMAPI_KEY, which keeps it out of the process list).
    #[arg(long, env = "GYMAPI_KEY", hide_env_values = true)]
    key: String,
    /// plans, members, memberships, attendance, access_logs, products or purchases.
    #[arg(long)]
    entity: String,
    /// A `.csv` file with a header row, or JSON Lines (one row object per line).
    file: std::path::PathBuf,
    /// Rows per request (1 to 500).
    #[arg(long, default_value_t = 500)]
    batch_size: usize,
    /// Requests in flight at once.
    #[arg(long, default_value_t = 1)]
    jobs: usize,
    /// Validate every batch on the server and report; write nothing.
    #[arg(long)]
    dry_run: bool,
    /// Rename a CSV column: COLUMN=FIELD (nested fields with dots, e.g. price.amount); COLUMN=- skips it.
    #[arg(long = "map", value_name = "COLUMN=FIELD")]
    map: Vec<String>,
    /// Retries of a batch after a 5xx or a network error (a 429 always waits and retries).
    #[arg(long, default_value_t = 8)]
    max_retries: u32,
    /// No progress bar.
    #[arg(long)]
    quiet: bool,
    #[arg(long)]
    json: bool,
}

pub(super) async fn run(a: ImportArgs) -> Result<(), Failure> {
    let mut map = Vec::with_capacity(a.map.len());
    for m in &a.map {
        let (column, field) =
            m.split_once('=').ok_or_else(|| bad_input(format!("--map {m}: expected COLUMN=FIELD")))?;
        map.push((column.trim().to_string(), field.trim().to_string()));
    }
    let base = a.base_url.trim_end_matches('/');
    let base_url = if base.ends_with("/api/v1") { base.to_string() } else { format!("{base}/api/v1") };
    let opts = client::Options {
        base_url,
        key: a.key,
        entity: a.entity.clone(),
        file: a.file,
        batch_size: a.batch_size,
        jobs: a.jobs,
        dry_run: a.dry_run,
        map,
        max_retries: a.max_retries,
        progress: !a.quiet && !a.json,
    };
    let summary = client::run(opts).await.map_err(|e| match e {
        ClientError::BadInput(m) => bad_input(m),
        ClientError::Service(m) => Failure { message: m, bad_input: false },
    })?;
    print(a.json, summary.to_json(&a.entity, a.dry_run), || {
        format!(
            "{}{}: {} rows in {} batches ({} answered from an earlier run), {} created, {} already there, {:.1} s ({:.0} rows/s); {} waits for the rate limit, {} retries",
            a.entity,
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
    Ok(())
}
