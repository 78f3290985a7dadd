//! What waits for a device, and what last went wrong at it: the settings area's view of the
//! front desk's queues. A door waits for its commands, a doorbell for the desk to answer its rings,
//! a card terminal and a fiscal printer for their facility's payments and receipts, a kiosk for
//! its open orders to be paid.

use chrono::{DateTime, Utc};
use entity::{device, states::DeviceKind};
use sea_orm::{ConnectionTrait, DbErr, FromQueryResult, Statement};

use crate::{db::placeholders, records::now};

/// A device's queue: how many things wait, what they are, and its latest failure.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Queue {
    pub waiting: i64,
    /// What waits, one and several (`payment`, `payments`).
    pub what: (&'static str, &'static str),
    /// The latest failure reported at the device, with when.
    pub last_error: Option<(String, DateTime<Utc>)>,
}

#[derive(FromQueryResult)]
struct Count {
    n: i64,
}

#[derive(FromQueryResult)]
struct Failure {
    reason: Option<String>,
    at: DateTime<Utc>,
}

/// The queue of `d`.
pub async fn of(db: &impl ConnectionTrait, d: &device::Model) -> Result<Queue, DbErr> {
    let at = now();
    let (what, waiting, failures) = match d.kind {
        DeviceKind::Door => (
            ("command", "commands"),
            "SELECT COUNT(*) AS n FROM door_commands WHERE gym_id = ? AND device_id = ? AND state = 'pending' AND expires_at > ?",
            Some(
                "SELECT detail AS reason, reported_at AS at FROM door_commands WHERE gym_id = ? AND device_id = ? AND state = 'failed'",
            ),
        ),
        DeviceKind::Doorbell => (
            ("ring", "rings"),
            "SELECT COUNT(*) AS n FROM rings WHERE gym_id = ? AND device_id = ? AND state = 'pending' AND expires_at > ?",
            None,
        ),
        DeviceKind::CardTerminal => (
            ("payment", "payments"),
            "SELECT COUNT(*) AS n FROM payment_jobs WHERE gym_id = ? AND facility_id = ? \
             AND (state = 'pending' OR (state = 'reserved' AND reserved_until <= ?))",
            Some(
                "SELECT reason, reported_at AS at FROM payment_jobs WHERE gym_id = ? AND device_id = ? AND state = 'declined'",
            ),
        ),
        DeviceKind::FiscalPrinter => (
            ("receipt", "receipts"),
            "SELECT COUNT(*) AS n FROM print_jobs WHERE gym_id = ? AND facility_id = ? AND state = 'pending' AND created_at <= ?",
            Some(
                "SELECT reason, reported_at AS at FROM print_jobs WHERE gym_id = ? AND device_id = ? AND state = 'failed'",
            ),
        ),
        DeviceKind::Kiosk => (
            ("open order", "open orders"),
            "SELECT COUNT(*) AS n FROM purchases WHERE gym_id = ? AND device_id = ? \
             AND payment_status IN ('pending', 'failed') AND created_at <= ?",
            None,
        ),
    };
    let backend = db.get_database_backend();
    // Terminals and printers serve their facility; the others, themselves.
    let subject = match d.kind {
        DeviceKind::CardTerminal | DeviceKind::FiscalPrinter => d.facility_id,
        _ => d.id,
    };
    let count = Statement::from_sql_and_values(
        backend,
        placeholders(backend, waiting),
        [d.gym_id.into(), subject.into(), at.into()],
    );
    let waiting = Count::find_by_statement(count).one(db).await?.map_or(0, |c| c.n);
    let last_error = match failures {
        Some(sql) => {
            let sql =
                placeholders(backend, &format!("{sql} AND reported_at IS NOT NULL ORDER BY reported_at DESC LIMIT 1"));
            let latest = Statement::from_sql_and_values(backend, sql, [d.gym_id.into(), d.id.into()]);
            Failure::find_by_statement(latest).one(db).await?.map(|f| (f.reason.unwrap_or_default(), f.at))
        }
        None => None,
    };
    Ok(Queue { waiting, what, last_error })
}
