//! Card terminals: a terminal takes the next payment of its facility, reserved to it for a while
//! (a terminal that vanished lets it go when the reservation lapses), and reports it approved or
//! declined; the report moves the sale (`sales`).

use std::{sync::Arc, time::Duration};

use chrono::{DateTime, Utc};
use entity::ids::GymId;
use entity::{
    device, payment_job,
    states::{PaymentJobState, PaymentStatus},
};
use sea_orm::{ConnectionTrait, EntityTrait, FromQueryResult, QueryTrait, Statement, sea_query::OnConflict};
use sha2::{Digest, Sha256};
use uuid::Uuid;

use super::{
    printer::Stamp,
    sales::{self, receipts_topic},
};
use crate::{
    db::{DEVICE_FACILITY, Db, KEY_IN_FORCE, Writes, begin_writing, claimed, for_update, placeholders},
    errors::ApiError,
    records::now,
    wake::Wakes,
    webhooks::{self, Audience, EventType, Queued},
};

/// A job's state as it reads at `at`: a reservation past its time reads `pending`.
pub fn state(j: &payment_job::Model, at: DateTime<Utc>) -> PaymentJobState {
    match j.state {
        PaymentJobState::Reserved if j.reserved_until.is_none_or(|t| t <= at) => PaymentJobState::Pending,
        s => s,
    }
}

/// What a long poll's look found: the job taken, or when a reservation of the facility lapses.
pub struct Taken {
    pub job: Option<payment_job::Model>,
    pub lapses_at: Option<DateTime<Utc>>,
}

/// Takes the next payment of the facility `terminal` is at when the statement runs (a move
/// during a long poll counts at once), reserved to it for `reservation`: one this
/// terminal holds already first (its retried poll), then the oldest pending or lapsed one. One
/// statement (`db::claimed`), so two terminals never take one job, and one poll takes one (with
/// `IN (…)`, PostgreSQL ran the subquery again for every row it joined, and one poll reserved
/// every waiting payment).
/// Nothing is taken for a key `key_id` no longer in force.
pub async fn take(db: &Db, terminal: &device::Model, key_id: Uuid, reservation: Duration) -> Result<Taken, ApiError> {
    let backend = db.get_database_backend();
    let at = now();
    let until = at + chrono::Duration::from_std(reservation).unwrap_or_default();
    let next = format!(
        "SELECT id FROM payment_jobs WHERE gym_id = ? AND facility_id = {DEVICE_FACILITY} \
         AND (state = 'pending' OR (state = 'reserved' AND (reserved_until <= ? OR device_id = ?))) \
         ORDER BY CASE WHEN state = 'reserved' AND device_id = ? THEN 0 ELSE 1 END, created_at, id LIMIT 1"
    );
    let sql = placeholders(
        backend,
        &format!(
            "UPDATE payment_jobs SET state = 'reserved', device_id = ?, reserved_until = ?, updated_at = ?, \
             takers = CASE WHEN takers LIKE ? THEN takers ELSE takers || ? END \
             WHERE gym_id = ? AND id {} AND {KEY_IN_FORCE} RETURNING *",
            claimed(backend, &next)
        ),
    );
    let (gym, me) = (terminal.gym_id, terminal.id);
    let taker = taker(me);
    let values = [
        me.into(),
        until.into(),
        at.into(),
        format!("%{taker}%").into(),
        taker.into(),
        gym.into(),
        gym.into(),
        gym.into(),
        me.into(),
        at.into(),
        me.into(),
        me.into(),
        key_id.into(),
    ];
    let statement = Statement::from_sql_and_values(backend, sql, values);
    let job = payment_job::Entity::find().from_raw_sql(statement).one(db).await?;
    if job.is_some() {
        return Ok(Taken { job, lapses_at: None });
    }
    Ok(Taken { job: None, lapses_at: next_lapse(db, terminal, at).await? })
}

/// How `takers` names the terminal `id`: a space, then its 32 hex digits.
pub fn taker(id: Uuid) -> String {
    format!(" {}", id.simple())
}

/// Whether the terminal `id` ever took the job (every taker has the same width, so its name
/// matches only where it stands, as the take's `LIKE` does).
fn took(job: &payment_job::Model, id: Uuid) -> bool {
    job.takers.contains(&taker(id))
}

#[derive(FromQueryResult)]
struct Lapse {
    at: Option<DateTime<Utc>>,
}

/// When the facility's earliest reservation lapses, if one is running.
async fn next_lapse(db: &Db, terminal: &device::Model, at: DateTime<Utc>) -> Result<Option<DateTime<Utc>>, ApiError> {
    let backend = db.get_database_backend();
    let sql = placeholders(
        backend,
        &format!(
            "SELECT MIN(reserved_until) AS at FROM payment_jobs WHERE gym_id = ? AND facility_id = \
             {DEVICE_FACILITY} AND state = 'reserved' AND reserved_until > ?"
        ),
    );
    let values = [terminal.gym_id.into(), terminal.gym_id.into(), terminal.id.into(), at.into()];
    let found = Lapse::find_by_statement(Statement::from_sql_and_values(backend, sql, values)).one(db).await?;
    Ok(found.and_then(|l| l.at))
}

/// What a terminal reports of a payment.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Report {
    Approved { card_scheme: String, card_last4: String },
    Declined { reason: String },
}

impl Report {
    fn state(&self) -> PaymentJobState {
        match self {
            Self::Approved { .. } => PaymentJobState::Approved,
            Self::Declined { .. } => PaymentJobState::Declined,
        }
    }

    /// Whether a job already reported says the same.
    fn agrees(&self, j: &payment_job::Model) -> bool {
        match self {
            Self::Approved { card_scheme, card_last4 } => {
                j.state == PaymentJobState::Approved
                    && j.card_scheme.as_deref() == Some(card_scheme)
                    && j.card_last4.as_deref() == Some(card_last4)
            }
            Self::Declined { .. } => j.state == PaymentJobState::Declined,
        }
    }
}

/// What a report came to: the payment the terminal holds, reported; or a card charge it reported
/// on a payment it no longer held, recorded as money to give back.
pub enum Reported {
    Held(payment_job::Model),
    RefundDue(payment_job::Model),
}

/// The terminal's report on a payment, decided under the locks of the sale's and the job's rows
/// (so a cancel, another terminal's take and this report are one after the other, whatever the
/// servers): the terminal that holds the job (its reservation lapsed or not, as long as no other
/// terminal took it since) has approval pay the sale (its receipt number, a print job,
/// `purchase.updated`) and a decline fail it. The same report again answers the same job; another
/// outcome is 409. An approval of a job the terminal took but no longer holds (another terminal
/// took it since, or the order was cancelled or paid) is a card charged all the same: it is
/// recorded, once per card, as a `refund_due` payment of the sale (`purchase.updated`). An
/// approval from a terminal that never took the job is 409 and records nothing (no terminal
/// charges a job it did not take), as is a decline of a job the terminal does not hold. Returns
/// what the report came to and whether a webhook delivery was queued.
pub async fn report(
    db: &Db,
    wakes: &Arc<Wakes>,
    terminal: &device::Model,
    job_id: &str,
    report: Report,
) -> Result<(Reported, Queued), ApiError> {
    let gym_id = terminal.gym_id;
    let missing = || ApiError::not_found("payment job", job_id);
    let uuid = Uuid::parse_str(job_id).map_err(|_| missing())?;
    let found = payment_job::Entity::find_by_id((gym_id, uuid)).one(db).await?;
    // A job of the terminal's facility, or one it holds: a terminal moved meanwhile still reports.
    let reachable = |j: &payment_job::Model| j.facility_id == terminal.facility_id || j.device_id == Some(terminal.id);
    let job = found.filter(|j| reachable(j) && j.state != PaymentJobState::RefundDue);
    let job = job.ok_or_else(missing)?;
    let audience = webhooks::audience(db, gym_id, EventType::PurchaseUpdated).await?;
    // What an approval's receipt is frozen with, read before the transaction holds any lock.
    let heading = match report {
        Report::Approved { .. } => receipt_heading(db, gym_id, job.facility_id).await?,
        Report::Declined { .. } => None,
    };
    let txn = begin_writing(db).await?;
    let mut sale = sales::locked_with_items(&txn, gym_id, job.purchase_id).await?.ok_or_else(missing)?;
    let job = locked(&txn, gym_id, uuid).await?.ok_or_else(missing)?;
    let mine = job.device_id == Some(terminal.id);
    match (job.state, &report) {
        (PaymentJobState::Reserved, _) if mine => {}
        _ if mine && report.agrees(&job) => return Ok((Reported::Held(job), Queued::Known(false))),
        (PaymentJobState::Approved | PaymentJobState::Declined, _) if mine => {
            return Err(ApiError::StateConflict(format!("The payment was already reported {}.", job.state)));
        }
        (_, Report::Approved { card_scheme, card_last4 }) if took(&job, terminal.id) => {
            let card = (card_scheme.as_str(), card_last4.as_str());
            let (charge, queued) = refund_due(&txn, &mut sale, &job, (terminal.id, card), audience).await?;
            txn.commit().await?;
            return Ok((Reported::RefundDue(charge), queued));
        }
        (_, Report::Approved { .. }) => {
            return Err(ApiError::StateConflict(
                "This terminal never took the payment, so it cannot have charged a card for it: nothing was recorded."
                    .into(),
            ));
        }
        (PaymentJobState::Cancelled, _) => return Err(ApiError::StateConflict("The order was cancelled.".into())),
        _ => return Err(ApiError::StateConflict("This terminal does not hold the payment.".into())),
    }
    let (job, receipt, queued) = settle(&txn, &mut sale, job, &report, heading, audience).await?;
    txn.commit().await?;
    if receipt {
        wakes.signal_after_commit(db, receipts_topic(gym_id, job.facility_id)).await;
    }
    Ok((Reported::Held(job), queued))
}

/// The payment job `id` of the gym, its row locked for the rest of the transaction (PostgreSQL;
/// SQLite's writer holds the file): a take of another terminal waits for it, or skips it.
async fn locked(db: &impl ConnectionTrait, gym_id: GymId, id: Uuid) -> Result<Option<payment_job::Model>, ApiError> {
    let backend = db.get_database_backend();
    let sql = for_update(backend, "SELECT * FROM payment_jobs WHERE gym_id = ? AND id = ?");
    let statement = Statement::from_sql_and_values(backend, sql, [gym_id.into(), id.into()]);
    Ok(payment_job::Entity::find().from_raw_sql(statement).one(db).await?)
}

/// The ids a charge `terminal` reported on `job` may have: the first charge it reports has the
/// job's and the terminal's, a charge of another card the card's too. Each is the same however
/// often the terminal reports it, so a charge is recorded once.
fn charge_ids(job: Uuid, terminal: Uuid, (scheme, last4): (&str, &str)) -> [Uuid; 2] {
    let first = Sha256::new().chain_update(job.as_bytes()).chain_update(terminal.as_bytes());
    let card = first.clone().chain_update(b"\0").chain_update(scheme).chain_update(b"\0").chain_update(last4);
    [first.finalize(), card.finalize()].map(|digest| {
        let mut bytes = [0u8; 16];
        bytes.copy_from_slice(&digest[..16]);
        uuid::Builder::from_custom_bytes(bytes).into_uuid()
    })
}

/// Records a card charge `terminal` reported on `job`, which it took but no longer holds, as a
/// `refund_due` payment of the sale, and announces the sale's change (`purchase.updated`) when it
/// is new. Returns the charge as recorded (the first report of it) and whether a delivery was
/// queued.
async fn refund_due(
    txn: &impl ConnectionTrait,
    sale: &mut sales::Sale,
    job: &payment_job::Model,
    (terminal, card): (Uuid, (&str, &str)),
    audience: Audience,
) -> Result<(payment_job::Model, Queued), ApiError> {
    let backend = txn.get_database_backend();
    let at = now();
    let ids = charge_ids(job.id, terminal, card);
    for id in ids {
        let charge = payment_job::Model {
            id,
            state: PaymentJobState::RefundDue,
            device_id: Some(terminal),
            reserved_until: None,
            card_scheme: Some(card.0.to_string()),
            card_last4: Some(card.1.to_string()),
            reason: None,
            reported_at: Some(at),
            takers: String::new(),
            created_at: at,
            updated_at: at,
            ..job.clone()
        };
        let insert = payment_job::Entity::insert(payment_job::ActiveModel::from(charge.clone()))
            .on_conflict(
                OnConflict::columns([payment_job::Column::GymId, payment_job::Column::Id]).do_nothing().to_owned(),
            )
            .build(backend);
        if txn.execute(insert).await?.rows_affected() == 1 {
            sale.payments.push(charge.clone());
            // The sale stays as it is but for `updated_at`; its event shows the refund due.
            let mut writes = Writes::new();
            let status = sale.purchase.payment_status;
            let queued = sales::moved(backend, &mut writes, sale, status, None, audience);
            writes.run(txn).await?;
            return Ok((charge, queued));
        }
        // Recorded before: this charge reported again, or the terminal's first charge another card's.
        let first = locked(txn, job.gym_id, id).await?;
        if let Some(first) =
            first.filter(|f| f.card_scheme.as_deref() == Some(card.0) && f.card_last4.as_deref() == Some(card.1))
        {
            return Ok((first, Queued::Known(false)));
        }
    }
    Err(ApiError::StateConflict("The charge could not be recorded; report it again.".into()))
}

/// What a terminal is told of a charge recorded as `refund_due`.
pub fn refund_message(charge: &payment_job::Model) -> String {
    format!(
        "This terminal no longer held the payment (another terminal took it, or the order was cancelled or paid). \
         The card charge ({} in minor units of {}) is recorded as payment {} to give back: refund it to the card.",
        charge.amount, charge.currency, charge.id
    )
}

/// Writes the report: the job, the sale's move (its event for `audience`), and for an approval its
/// receipt number and print job, frozen with `gym` as it was read before the transaction. Returns the job as reported, whether a print job was made and
/// whether a webhook delivery was queued.
async fn settle(
    txn: &impl ConnectionTrait,
    sale: &mut sales::Sale,
    mut job: payment_job::Model,
    report: &Report,
    heading: Option<Heading>,
    audience: Audience,
) -> Result<(payment_job::Model, bool, Queued), ApiError> {
    let backend = txn.get_database_backend();
    let at = now();
    job.state = report.state();
    job.reported_at = Some(at);
    job.updated_at = at;
    match report {
        Report::Approved { card_scheme, card_last4 } => {
            job.card_scheme = Some(card_scheme.clone());
            job.card_last4 = Some(card_last4.clone());
        }
        Report::Declined { reason } => job.reason = Some(reason.clone()),
    }
    let mut writes = Writes::new();
    let sql = placeholders(
        backend,
        "UPDATE payment_jobs SET state = ?, card_scheme = ?, card_last4 = ?, reason = ?, reported_at = ?, \
         updated_at = ? WHERE gym_id = ? AND id = ?",
    );
    let values = [
        job.state.as_str().into(),
        job.card_scheme.clone().into(),
        job.card_last4.clone().into(),
        job.reason.clone().into(),
        job.reported_at.into(),
        at.into(),
        job.gym_id.into(),
        job.id.into(),
    ];
    writes.push(Statement::from_sql_and_values(backend, sql, values));
    let receipt = matches!(report, Report::Approved { .. });
    let queued = if receipt {
        let number = sales::next_receipt_number(txn, sale.purchase.gym_id).await?;
        let queued = sales::moved(backend, &mut writes, sale, PaymentStatus::Paid, Some(number), audience);
        let paid_at = sale.purchase.updated_at;
        let stamp = heading.map(|h| Stamp {
            paid_at,
            gym_name: h.gym_name,
            timezone: h.timezone,
            facility_name: h.facility_name,
        });
        let print = sales::print_job(&sale.purchase, number, stamp, at);
        writes.push(
            entity::print_job::Entity::insert(entity::print_job::ActiveModel::from(print.clone())).build(backend),
        );
        sale.receipts.push(print);
        queued
    } else {
        sales::moved(backend, &mut writes, sale, PaymentStatus::Failed, None, audience)
    };
    writes.run(txn).await?;
    Ok((job, receipt, queued))
}

/// What heads a receipt paid at a facility: the gym's name, the facility's own time zone where it
/// keeps one (else the gym's), and the facility's name.
struct Heading {
    gym_name: String,
    timezone: String,
    facility_name: Option<String>,
}

/// The heading of a receipt of facility `facility_id`, as the gym and the facility are now.
async fn receipt_heading(db: &Db, gym_id: GymId, facility_id: Uuid) -> Result<Option<Heading>, ApiError> {
    let (gym, facility) = tokio::try_join!(
        entity::gym::Entity::find_by_id(gym_id).one(db),
        entity::facility::Entity::find_by_id((gym_id, facility_id)).one(db),
    )?;
    Ok(gym.map(|g| {
        let timezone = facility.as_ref().and_then(|f| f.timezone.clone()).unwrap_or(g.timezone);
        Heading { gym_name: g.name, timezone, facility_name: facility.map(|f| f.name) }
    }))
}
