//! What every write of sales must do, whoever writes them (the importer, the counter): the gym's
//! purchase counters and version change in the write's transaction, and a sale's record as the
//! integration API shows it ([`record`]) is also the payload of `purchase.created` and
//! `purchase.updated`.

use std::collections::HashMap;

use chrono::{DateTime, Utc};
use entity::ids::{GymId, MemberId};
use entity::{
    payment_job, purchase, purchase_line,
    states::{PaymentJobState, PaymentStatus},
};
use sea_orm::{ColumnTrait, ConnectionTrait, DbBackend, DbErr, EntityTrait, QueryFilter, QueryOrder, Statement};
use uuid::Uuid;

use crate::{
    counters::{self, PURCHASE_ROWS, days},
    db::Writes,
    openapi::{Money, Purchase, PurchaseLine, PurchaseObject, RefundDue},
    webhooks::{self, Audience, EventType, NewEvent, Queued},
};

/// The largest amount the documents allow (`Money.amount`, minor units): sums of amounts, such as a
/// month's revenue, stay exact in 64 bits.
pub const MAX_AMOUNT: i64 = 1_000_000_000_000;

/// An amount in minor units of `currency`, as the API writes it.
pub fn money(amount: i64, currency: &str) -> Money {
    Money { amount, currency: currency.to_string() }
}

/// A sale as the integration API returns it; `lines` for a sale made at the counter.
/// `jobs` are its payment jobs, of which those `refund_due` are shown (any others are ignored).
pub fn record(m: purchase::Model, lines: Option<&[purchase_line::Model]>, jobs: &[payment_job::Model]) -> Purchase {
    let currency = m.currency.clone();
    Purchase {
        object: PurchaseObject::Purchase,
        id: m.id,
        member_id: m.member_id.map(MemberId::uuid).into(),
        product_id: m.product_id.into(),
        description: m.description,
        quantity: m.quantity,
        total: money(m.total_amount, &m.currency),
        payment_status: m.payment_status.into(),
        purchased_at: m.purchased_at,
        legacy_id: m.legacy_id.into(),
        device_id: m.device_id.into(),
        facility_id: m.facility_id.into(),
        receipt_number: m.receipt_number.into(),
        lines: lines.map(|lines| lines.iter().map(|l| line(l, &currency)).collect::<Vec<_>>()).into(),
        refunds_due: jobs.iter().filter(|j| j.state == PaymentJobState::RefundDue).map(refund).collect(),
        created_at: m.created_at,
        updated_at: m.updated_at,
    }
}

fn line(l: &purchase_line::Model, currency: &str) -> PurchaseLine {
    PurchaseLine {
        product_id: l.product_id.into(),
        description: l.description.clone(),
        quantity: l.quantity,
        unit_price: money(l.unit_amount, currency),
        total: money(l.line_amount, currency),
    }
}

fn refund(j: &payment_job::Model) -> RefundDue {
    RefundDue {
        id: j.id,
        amount: money(j.amount, &j.currency),
        device_id: j.device_id.unwrap_or_default(),
        card_scheme: j.card_scheme.clone().into(),
        card_last4: j.card_last4.clone().into(),
        reported_at: j.reported_at.unwrap_or(j.created_at),
    }
}

/// The `refund_due` payments of these sales of a gym, oldest first, by sale.
pub async fn refunds_of(
    db: &impl ConnectionTrait,
    gym_id: GymId,
    ids: &[Uuid],
) -> Result<HashMap<Uuid, Vec<payment_job::Model>>, DbErr> {
    use payment_job::Column as C;
    if ids.is_empty() {
        return Ok(HashMap::new());
    }
    let found = payment_job::Entity::find()
        .filter(C::GymId.eq(gym_id))
        .filter(C::PurchaseId.is_in(ids.iter().copied()))
        .filter(C::State.eq(PaymentJobState::RefundDue))
        .order_by_asc(C::CreatedAt)
        .order_by_asc(C::Id)
        .all(db)
        .await?;
    Ok(by_sale(found, |j| j.purchase_id))
}

/// `rows` of several sales by their sale, each sale's in the order given.
pub fn by_sale<M>(rows: Vec<M>, sale: impl Fn(&M) -> Uuid) -> HashMap<Uuid, Vec<M>> {
    let mut by_sale: HashMap<Uuid, Vec<M>> = HashMap::new();
    for row in rows {
        by_sale.entry(sale(&row)).or_default().push(row);
    }
    by_sale
}

/// The items of these sales of a gym, in their order, by sale; a sale without items (an import)
/// has no entry.
pub async fn lines_of(
    db: &impl ConnectionTrait,
    gym_id: GymId,
    ids: &[Uuid],
) -> Result<HashMap<Uuid, Vec<purchase_line::Model>>, DbErr> {
    use purchase_line::Column as C;
    if ids.is_empty() {
        return Ok(HashMap::new());
    }
    let found = purchase_line::Entity::find()
        .filter(C::GymId.eq(gym_id))
        .filter(C::PurchaseId.is_in(ids.iter().copied()))
        .order_by_asc(C::PurchaseId)
        .order_by_asc(C::Position)
        .all(db)
        .await?;
    Ok(by_sale(found, |l| l.purchase_id))
}

/// The sales of a page as records, with their items and refunds due (one query each for the page).
pub async fn records(
    db: &impl ConnectionTrait,
    gym_id: GymId,
    rows: Vec<purchase::Model>,
) -> Result<Vec<Purchase>, DbErr> {
    // A sale made at the counter has a facility and items; an imported one has neither.
    let ids: Vec<Uuid> = rows.iter().filter(|p| p.facility_id.is_some()).map(|p| p.id).collect();
    let lines = lines_of(db, gym_id, &ids).await?;
    let refunds = refunds_of(db, gym_id, &ids).await?;
    Ok(rows
        .into_iter()
        .map(|p| {
            let items = lines.get(&p.id).map(Vec::as_slice).or(p.facility_id.map(|_| &[][..]));
            let jobs = refunds.get(&p.id).map(Vec::as_slice).unwrap_or_default();
            record(p, items, jobs)
        })
        .collect())
}

/// A change of sales' payment statuses, for their counters, each sale with the time it was made
/// (`purchased_at`, the list's order: the counts per month and day are by it).
pub enum Change {
    /// New sales of these statuses.
    Added(Vec<(PaymentStatus, DateTime<Utc>)>),
    /// One sale moved from one status to another.
    Moved { from: PaymentStatus, to: PaymentStatus, purchased_at: DateTime<Utc> },
}

/// The statements that move the gym's purchase counters and counts per month and day by
/// `change` and bump the purchases' version (what the statistics' revenue is kept by), for a
/// [`Writes`] or to run in the write's transaction. None when nothing changes.
pub fn count_statements(backend: DbBackend, gym_id: GymId, change: Change) -> Vec<Statement> {
    let mut deltas: Vec<(String, i64)> = Vec::new();
    let days = match change {
        Change::Added(sales) if !sales.is_empty() => {
            deltas.push((PURCHASE_ROWS.name(None), i64::try_from(sales.len()).unwrap_or(i64::MAX)));
            let mut by_status: HashMap<PaymentStatus, i64> = HashMap::new();
            for (s, _) in &sales {
                *by_status.entry(*s).or_default() += 1;
            }
            deltas.extend(by_status.into_iter().map(|(s, n)| (PURCHASE_ROWS.name(Some(s.as_str())), n)));
            days::deltas(PURCHASE_ROWS, sales.iter().map(|(s, at)| (s.as_str(), *at)))
        }
        Change::Moved { from, to, purchased_at } if from != to => {
            deltas.push((PURCHASE_ROWS.name(Some(from.as_str())), -1));
            deltas.push((PURCHASE_ROWS.name(Some(to.as_str())), 1));
            days::moved(PURCHASE_ROWS, from.as_str(), to.as_str(), purchased_at)
        }
        Change::Added(_) | Change::Moved { .. } => return Vec::new(),
    };
    deltas.extend(PURCHASE_ROWS.written());
    // The days first, as for the check-ins: the gym's counters are held from their change to the
    // commit by every writer of the gym.
    let days = days::add_statement(backend, gym_id, days);
    days.into_iter().chain(counters::add_many_statement(backend, gym_id, &deltas)).collect()
}

/// Adds the event of a sale (`purchase.created` or `purchase.updated`) to `writes`, for its
/// `audience` (`webhooks::audience`, read before the change's transaction); returns whether a
/// delivery was queued.
pub fn announce(
    writes: &mut Writes,
    backend: DbBackend,
    gym_id: GymId,
    event: EventType,
    sale: &Purchase,
    audience: Audience,
) -> Queued {
    let data = crate::types::wire::value(sale);
    webhooks::emit_to_audience(writes, backend, NewEvent { gym_id, kind: event, data }, audience)
}
