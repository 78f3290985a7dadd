//! Fiscal printers: a printer takes the next receipt of its facility, handed out once and never
//! again, and reports it printed or failed. A receipt is derived from the paid sale and the gym.

use chrono::{DateTime, Utc};
use chrono_tz::Tz;
use entity::{device, print_job, purchase, purchase_line, states::PrintJobState};
use sea_orm::{ConnectionTrait, EntityTrait, Statement};
use uuid::Uuid;

use crate::{
    db::{DEVICE_FACILITY, Db, KEY_IN_FORCE, begin_writing, claimed, for_update, placeholders},
    errors::ApiError,
    records::now,
};

/// A receipt as printed: the gym, the items, the total, when it was paid (in the gym's time zone
/// too) and its number.
#[derive(Clone, Debug)]
pub struct Receipt {
    pub number: i64,
    pub gym_name: String,
    pub order_id: Uuid,
    pub lines: Vec<purchase_line::Model>,
    pub total: i64,
    pub currency: String,
    pub paid_at: DateTime<Utc>,
    /// `YYYY-MM-DD HH:MM:SS` in `timezone`.
    pub local_time: String,
    pub timezone: String,
    /// The facility where the sale was paid, and its name then (`None` on receipts paid before
    /// receipts named their facility).
    pub facility_id: Uuid,
    pub facility_name: Option<String>,
}

/// What a receipt is frozen with when its sale is paid: the moment, the gym's name, the time zone
/// and the facility's name then. Every print job of the sale carries the same, so a reprint is the same receipt.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Stamp {
    pub paid_at: DateTime<Utc>,
    pub gym_name: String,
    pub timezone: String,
    pub facility_name: Option<String>,
}

impl Stamp {
    /// The stamp `job` carries, if it was printed with one (jobs written before receipts were
    /// frozen carry none).
    pub fn of(job: &print_job::Model) -> Option<Self> {
        Some(Self {
            paid_at: job.paid_at?,
            gym_name: job.gym_name.clone()?,
            timezone: job.timezone.clone()?,
            facility_name: job.facility_name.clone(),
        })
    }
}

/// The gym as a receipt names it: its name and its time zone (an IANA name).
pub struct GymLabel {
    pub name: String,
    pub timezone: String,
}

impl GymLabel {
    /// A gym known only by its time zone (its row not read, or gone): receipts print no name.
    pub fn unnamed(timezone: &str) -> Self {
        Self { name: String::new(), timezone: timezone.to_string() }
    }
}

/// The receipt `job` prints for its paid sale: as the job's stamp says, or, for a job without
/// one, as the `gym` is now and when its sale last moved.
pub fn receipt(
    gym: &GymLabel,
    sale: &purchase::Model,
    lines: &[purchase_line::Model],
    job: &print_job::Model,
) -> Receipt {
    let stamp = Stamp::of(job).unwrap_or_else(|| Stamp {
        paid_at: sale.updated_at,
        gym_name: gym.name.clone(),
        timezone: gym.timezone.clone(),
        facility_name: None,
    });
    let tz: Tz = stamp.timezone.parse().unwrap_or(Tz::UTC);
    Receipt {
        number: job.receipt_number,
        gym_name: stamp.gym_name,
        order_id: sale.id,
        lines: lines.to_vec(),
        total: sale.total_amount,
        currency: sale.currency.clone(),
        paid_at: stamp.paid_at,
        local_time: stamp.paid_at.with_timezone(&tz).format("%Y-%m-%d %H:%M:%S").to_string(),
        timezone: tz.name().to_string(),
        facility_id: job.facility_id,
        facility_name: stamp.facility_name,
    }
}

/// Hands the oldest pending receipt of the facility `printer` is at when the statement runs (a
/// move during a long poll counts at once) to it, and to no other (one statement,
/// `db::claimed`), while its key `key_id` is in force.
pub async fn take(db: &Db, printer: &device::Model, key_id: Uuid) -> Result<Vec<print_job::Model>, ApiError> {
    let backend = db.get_database_backend();
    let at = now();
    let next = format!(
        "SELECT id FROM print_jobs WHERE gym_id = ? AND state = 'pending' AND facility_id = {DEVICE_FACILITY} \
         ORDER BY created_at, id LIMIT 1"
    );
    let sql = placeholders(
        backend,
        &format!(
            "UPDATE print_jobs SET state = 'delivered', device_id = ?, delivered_at = ?, updated_at = ? \
             WHERE gym_id = ? AND id {} AND {KEY_IN_FORCE} RETURNING *",
            claimed(backend, &next)
        ),
    );
    let (gym, me) = (printer.gym_id, printer.id);
    let values = [me.into(), at.into(), at.into(), gym.into(), gym.into(), gym.into(), me.into(), key_id.into()];
    let statement = Statement::from_sql_and_values(backend, sql, values);
    Ok(print_job::Entity::find().from_raw_sql(statement).all(db).await?)
}

/// What a printer reports of a receipt.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Report {
    Printed,
    Failed { reason: String },
}

/// The printer's report on a receipt handed to it (found at the printer's facility, or anywhere
/// once handed to it). The same report again answers the same job; another outcome, or a job not
/// handed to this printer, is 409.
pub async fn report(
    db: &Db,
    printer: &device::Model,
    job_id: &str,
    report: Report,
) -> Result<print_job::Model, ApiError> {
    let gym_id = printer.gym_id;
    let missing = || ApiError::not_found("print job", job_id);
    let uuid = Uuid::parse_str(job_id).map_err(|_| missing())?;
    let txn = begin_writing(db).await?;
    let backend = txn.get_database_backend();
    let sql = for_update(backend, "SELECT * FROM print_jobs WHERE gym_id = ? AND id = ?");
    let statement = Statement::from_sql_and_values(backend, sql, [gym_id.into(), uuid.into()]);
    let job = print_job::Entity::find().from_raw_sql(statement).one(&txn).await?;
    // A receipt of the printer's facility, or one handed to it: a printer moved meanwhile still
    // reports.
    let reachable = |j: &print_job::Model| j.facility_id == printer.facility_id || j.device_id == Some(printer.id);
    let mut job = job.filter(reachable).ok_or_else(missing)?;
    let (state, reason) = match &report {
        Report::Printed => (PrintJobState::Printed, None),
        Report::Failed { reason } => (PrintJobState::Failed, Some(reason.clone())),
    };
    if job.device_id != Some(printer.id) || job.state == PrintJobState::Pending {
        return Err(ApiError::StateConflict("The receipt was not handed to this printer.".into()));
    }
    match job.state {
        PrintJobState::Delivered => {}
        s if s == state => return Ok(job),
        s => return Err(ApiError::StateConflict(format!("The receipt was already reported {s}."))),
    }
    let at = now();
    (job.state, job.reason, job.reported_at, job.updated_at) = (state, reason, Some(at), at);
    let sql = placeholders(
        backend,
        "UPDATE print_jobs SET state = ?, reason = ?, reported_at = ?, updated_at = ? WHERE gym_id = ? AND id = ?",
    );
    let values = [state.as_str().into(), job.reason.clone().into(), at.into(), at.into(), gym_id.into(), job.id.into()];
    txn.execute(Statement::from_sql_and_values(backend, sql, values)).await?;
    txn.commit().await?;
    Ok(job)
}
