//! What waits for a device, and what last went wrong at it: the settings area's view of the
//! front desk's queues. A door waits for its commands, a doorbell for the desk to answer its rings,
//! a card terminal and a fiscal printer for their facility's payments and receipts, a kiosk for
//! its open orders to be paid.

use std::collections::{BTreeMap, HashMap};

use chrono::{DateTime, Utc};
use entity::ids::GymId;
use entity::{device, states::DeviceKind};
use sea_orm::{ConnectionTrait, DbErr, FromQueryResult, Statement};
use uuid::Uuid;

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

/// Where a kind of device's queue is kept.
struct Spec {
    what: (&'static str, &'static str),
    table: &'static str,
    /// The column naming what the queue serves: the device, or (terminals and printers) its
    /// facility.
    subject: &'static str,
    /// What waits, with one `?` for now.
    waiting: &'static str,
    /// What a failure reported at the device is, if it reports any.
    failure: Option<Failure>,
}

/// A failure reported at a device: the column holding its reason, and the failed state.
#[derive(Clone, Copy)]
struct Failure {
    reason: &'static str,
    failed: &'static str,
}

fn spec(kind: DeviceKind) -> Spec {
    match kind {
        DeviceKind::Door => Spec {
            what: ("command", "commands"),
            table: "door_commands",
            subject: "device_id",
            waiting: "state = 'pending' AND expires_at > ?",
            failure: Some(Failure { reason: "detail", failed: "failed" }),
        },
        DeviceKind::Doorbell => Spec {
            what: ("ring", "rings"),
            table: "rings",
            subject: "device_id",
            waiting: "state = 'pending' AND expires_at > ?",
            failure: None,
        },
        DeviceKind::CardTerminal => Spec {
            what: ("payment", "payments"),
            table: "payment_jobs",
            subject: "facility_id",
            waiting: "(state = 'pending' OR (state = 'reserved' AND reserved_until <= ?))",
            failure: Some(Failure { reason: "reason", failed: "declined" }),
        },
        DeviceKind::FiscalPrinter => Spec {
            what: ("receipt", "receipts"),
            table: "print_jobs",
            subject: "facility_id",
            waiting: "state = 'pending' AND created_at <= ?",
            failure: Some(Failure { reason: "reason", failed: "failed" }),
        },
        DeviceKind::Kiosk => Spec {
            what: ("open order", "open orders"),
            table: "purchases",
            subject: "device_id",
            waiting: "payment_status IN ('pending', 'failed') AND created_at <= ?",
            failure: None,
        },
    }
}

#[derive(FromQueryResult)]
struct Counted {
    subject: Uuid,
    n: i64,
}

#[derive(FromQueryResult)]
struct Latest {
    device_id: Uuid,
    reason: Option<String>,
    at: DateTime<Utc>,
}

fn list(n: usize) -> String {
    vec!["?"; n].join(", ")
}

/// The queue of `d`.
pub async fn of(db: &impl ConnectionTrait, d: &device::Model) -> Result<Queue, DbErr> {
    let mut queues = of_many(db, std::slice::from_ref(d)).await?;
    queues.pop().ok_or_else(|| DbErr::Custom("no queue".into()))
}

/// The queues of `devices`, in their order: two statements at most for each gym and kind among
/// them, however many devices there are; each names one gym (on a distributed database it runs on
/// that gym's node alone).
pub async fn of_many(db: &impl ConnectionTrait, devices: &[device::Model]) -> Result<Vec<Queue>, DbErr> {
    let at = now();
    // By table too: a terminal and a printer of one facility count different queues of it.
    let mut counts: HashMap<(&str, GymId, Uuid), i64> = HashMap::new();
    let mut failures: HashMap<Uuid, (String, DateTime<Utc>)> = HashMap::new();
    let mut groups: BTreeMap<(GymId, &str), Vec<&device::Model>> = BTreeMap::new();
    for d in devices {
        groups.entry((d.gym_id, spec(d.kind).table)).or_default().push(d);
    }
    for ((gym, table), group) in groups {
        let Some(spec) = group.first().map(|d| spec(d.kind)) else { continue };
        let waiting = count(db, &spec, gym, &group, at).await?;
        counts.extend(waiting.into_iter().map(|(subject, n)| ((table, gym, subject), n)));
        if let Some(failure) = spec.failure {
            failures.extend(latest_failures(db, &spec, failure, gym, &group).await?);
        }
    }
    Ok(devices
        .iter()
        .map(|d| {
            let spec = spec(d.kind);
            Queue {
                waiting: counts.get(&(spec.table, d.gym_id, subject(&spec, d))).copied().unwrap_or(0),
                what: spec.what,
                last_error: failures.get(&d.id).cloned(),
            }
        })
        .collect())
}

/// What a device's queue serves: the device, or its facility.
fn subject(spec: &Spec, d: &device::Model) -> Uuid {
    if spec.subject == "facility_id" { d.facility_id } else { d.id }
}

fn distinct(devices: &[&device::Model], each: impl Fn(&device::Model) -> Uuid) -> Vec<Uuid> {
    let mut ids: Vec<Uuid> = devices.iter().map(|d| each(d)).collect();
    ids.sort();
    ids.dedup();
    ids
}

/// What waits for each of `devices` (of one gym and kind), by subject.
async fn count(
    db: &impl ConnectionTrait,
    spec: &Spec,
    gym: GymId,
    devices: &[&device::Model],
    at: DateTime<Utc>,
) -> Result<HashMap<Uuid, i64>, DbErr> {
    let subjects = distinct(devices, |d| subject(spec, d));
    let sql = format!(
        "SELECT {col} AS subject, COUNT(*) AS n FROM {table} WHERE gym_id = ? AND {col} IN ({s}) AND {w} \
         GROUP BY {col}",
        col = spec.subject,
        table = spec.table,
        s = list(subjects.len()),
        w = spec.waiting,
    );
    let values = std::iter::once(gym.into()).chain(subjects.iter().map(|u| (*u).into())).chain([at.into()]);
    let backend = db.get_database_backend();
    let statement = Statement::from_sql_and_values(backend, placeholders(backend, &sql), values);
    let rows = Counted::find_by_statement(statement).all(db).await?;
    Ok(rows.into_iter().map(|c| (c.subject, c.n)).collect())
}

/// Each device's latest reported failure (of one gym and kind): the newest report time per
/// device, then its row.
async fn latest_failures(
    db: &impl ConnectionTrait,
    spec: &Spec,
    Failure { reason, failed }: Failure,
    gym: GymId,
    devices: &[&device::Model],
) -> Result<HashMap<Uuid, (String, DateTime<Utc>)>, DbErr> {
    let ids = distinct(devices, |d| d.id);
    let filter = |alias: &str| {
        format!(
            "{alias}.gym_id = ? AND {alias}.device_id IN ({}) AND {alias}.state = '{failed}' \
             AND {alias}.reported_at IS NOT NULL",
            list(ids.len())
        )
    };
    let sql = format!(
        "SELECT t.device_id, t.{reason} AS reason, t.reported_at AS at FROM {table} t \
         JOIN (SELECT x.gym_id, x.device_id, MAX(x.reported_at) AS latest FROM {table} x WHERE {inner} \
         GROUP BY x.gym_id, x.device_id) m ON m.gym_id = t.gym_id AND m.device_id = t.device_id \
         AND m.latest = t.reported_at WHERE {outer}",
        table = spec.table,
        inner = filter("x"),
        outer = filter("t"),
    );
    let once = std::iter::once(sea_orm::Value::from(gym)).chain(ids.iter().map(|u| sea_orm::Value::from(*u)));
    let values: Vec<sea_orm::Value> = once.clone().chain(once).collect();
    let backend = db.get_database_backend();
    let statement = Statement::from_sql_and_values(backend, placeholders(backend, &sql), values);
    let rows = Latest::find_by_statement(statement).all(db).await?;
    Ok(rows.into_iter().map(|l| (l.device_id, (l.reason.unwrap_or_default(), l.at))).collect())
}
