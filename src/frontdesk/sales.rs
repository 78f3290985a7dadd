//! Sales at the counter: an order of a kiosk or the front desk becomes a sale (`purchases`, with
//! its items) and a payment job for the card terminals of its facility; the terminal's report makes
//! it paid (with the gym's next receipt number, and a print job for the facility's fiscal printers)
//! or failed; the front desk retries, cancels, or prints a failed receipt again. Every change of a
//! sale moves the purchase counters and fires its event in the change's transaction
//! (`crate::purchases`), and each transaction locks the sale's row before its jobs, the receipt
//! sequence and the counters, in that order.

use std::{collections::HashMap, sync::Arc};

use chrono::{DateTime, Utc};
use entity::ids::{GymId, MemberId};
use entity::{
    device, payment_job, print_job, product, purchase, purchase_line,
    states::{DeviceKind, PaymentJobState, PaymentStatus, PrintJobState, ProductStatus},
};
use sea_orm::{
    ColumnTrait, ConnectionTrait, DbBackend, EntityTrait, FromQueryResult, PaginatorTrait, QueryFilter, QueryOrder,
    QueryTrait, Statement,
};
use uuid::Uuid;

use super::printer;
use crate::{
    context::Tenant,
    db::{Db, Writes, begin_writing, for_update, placeholders},
    errors::{ApiError, FieldErrors},
    openapi::Purchase,
    purchases::{self, Change},
    records::{new_id, now},
    wake::Wakes,
    webhooks::{self, Audience, EventType, Queued},
};

/// A sale at the counter with what the front desk sees of it.
#[derive(Clone, Debug)]
pub struct Sale {
    pub purchase: purchase::Model,
    pub lines: Vec<purchase_line::Model>,
    pub payments: Vec<payment_job::Model>,
    pub receipts: Vec<print_job::Model>,
}

impl Sale {
    /// The sale as the integration API returns it (the payload of its events).
    pub fn record(&self) -> Purchase {
        purchases::record(self.purchase.clone(), Some(&self.lines), &self.payments)
    }
}

/// What an order asks for.
pub struct NewOrder {
    /// The kiosk taking it.
    pub device_id: Option<Uuid>,
    pub facility_id: Option<Uuid>,
    pub member_id: Option<MemberId>,
    /// Products and quantities, in order.
    pub lines: Vec<(Uuid, i32)>,
}

/// The topic of a facility's payments, which its card terminals wait on.
pub fn payments_topic(gym_id: GymId, facility_id: Uuid) -> String {
    format!("payments:{gym_id}:{facility_id}")
}

/// The topic of a facility's receipts, which its fiscal printers wait on.
pub fn receipts_topic(gym_id: GymId, facility_id: Uuid) -> String {
    format!("receipts:{gym_id}:{facility_id}")
}

/// Takes an order: checks it (every problem at once), prices its lines, and writes the sale, its
/// items, its payment job, the counters and `purchase.created` in one transaction. Returns the
/// sale and whether a webhook delivery was queued.
pub async fn order(db: &Db, wakes: &Arc<Wakes>, tenant: &Tenant, new: NewOrder) -> Result<(Sale, Queued), ApiError> {
    let gym_id = tenant.gym_id;
    let (facility_id, priced) = checked(db, gym_id, tenant.first_facility_id, &new).await?;
    let at = now();
    let sale = sale_of(gym_id, facility_id, &new, priced, at);
    let audience = webhooks::audience(db, gym_id, EventType::PurchaseCreated).await?;
    let txn = begin_writing(db).await?;
    let backend = txn.get_database_backend();
    let mut writes = Writes::new();
    writes.push(purchase::Entity::insert(purchase::ActiveModel::from(sale.purchase.clone())).build(backend));
    let lines = sale.lines.iter().cloned().map(purchase_line::ActiveModel::from);
    writes.push(purchase_line::Entity::insert_many(lines).build(backend));
    writes.push(
        payment_job::Entity::insert_many(sale.payments.iter().cloned().map(payment_job::ActiveModel::from))
            .build(backend),
    );
    let created = EventType::PurchaseCreated;
    let queued = purchases::announce(&mut writes, backend, gym_id, created, &sale.record(), audience);
    let made = vec![(PaymentStatus::Pending, sale.purchase.purchased_at)];
    writes.extend(purchases::count_statements(backend, gym_id, Change::Added(made)));
    writes.run(&txn).await?;
    txn.commit().await?;
    wakes.signal_after_commit(db, payments_topic(gym_id, facility_id)).await;
    Ok((sale, queued))
}

/// A line priced from its product.
struct Priced {
    product: product::Model,
    quantity: i32,
    line_amount: i64,
}

/// The order's facility and its priced lines, or the 422 naming every problem.
async fn checked(
    db: &Db,
    gym_id: GymId,
    first_facility: Option<Uuid>,
    new: &NewOrder,
) -> Result<(Uuid, Vec<Priced>), ApiError> {
    let mut errors = FieldErrors::new();
    let kiosk = match new.device_id {
        Some(id) => device::Entity::find_by_id((gym_id, id)).one(db).await?.filter(|d| d.kind == DeviceKind::Kiosk),
        None => None,
    };
    if new.device_id.is_some() && kiosk.is_none() {
        errors.add("device_id", "The device_id is not a kiosk of this gym.");
    }
    let facility_id = match (&kiosk, new.facility_id) {
        (Some(k), _) => Some(k.facility_id),
        (None, Some(f)) => {
            let found = entity::facility::Entity::find_by_id((gym_id, f)).one(db).await?;
            if found.is_none() {
                errors.add("facility_id", "The selected facility_id is not a facility of this gym.");
            }
            Some(f)
        }
        (None, None) => first_facility,
    };
    if let Some(m) = new.member_id {
        if entity::member::Entity::find_by_id((gym_id, m)).one(db).await?.is_none() {
            errors.add("member_id", "The selected member_id is not a member of this gym.");
        }
    }
    let priced = price(db, gym_id, &new.lines, &mut errors).await?;
    let Some(facility_id) = facility_id else {
        errors.add("facility_id", "This gym has no facility; give a facility_id.");
        return Err(ApiError::Validation(errors));
    };
    if errors.is_empty() && !has_terminal(db, gym_id, facility_id).await? {
        errors.add("facility_id", "The order's facility has no card terminal to take its payment.");
    }
    errors.into_result()?;
    Ok((facility_id, priced))
}

/// Each line priced from its product, all in the first line's currency; problems named by line.
async fn price(
    db: &Db,
    gym_id: GymId,
    lines: &[(Uuid, i32)],
    errors: &mut FieldErrors,
) -> Result<Vec<Priced>, ApiError> {
    let ids: Vec<Uuid> = lines.iter().map(|(id, _)| *id).collect();
    let found: HashMap<Uuid, product::Model> = product::Entity::find()
        .filter(product::Column::GymId.eq(gym_id))
        .filter(product::Column::Id.is_in(ids))
        .all(db)
        .await?
        .into_iter()
        .map(|p| (p.id, p))
        .collect();
    let mut currency: Option<String> = None;
    let mut priced = Vec::with_capacity(lines.len());
    for (i, (id, quantity)) in lines.iter().enumerate() {
        let field = format!("lines.{i}.product_id");
        let Some(p) = found.get(id) else {
            errors.add(field, "No product of this gym has this id.");
            continue;
        };
        if p.status == ProductStatus::Inactive {
            errors.add(field, "The product is archived and no longer sold.");
            continue;
        }
        let currency = currency.get_or_insert_with(|| p.currency.clone());
        if *currency != p.currency {
            errors.add(field, format!("The product is priced in {}; this order is in {currency}.", p.currency));
            continue;
        }
        match p.price_amount.checked_mul(i64::from(*quantity)) {
            Some(line_amount) => priced.push(Priced { product: p.clone(), quantity: *quantity, line_amount }),
            None => errors.add(format!("lines.{i}.quantity"), "The line's amount is too large."),
        }
    }
    let total = priced.iter().try_fold(0i64, |sum, l| sum.checked_add(l.line_amount));
    if errors.is_empty() && total.is_none_or(|t| t > crate::purchases::MAX_AMOUNT) {
        errors.add("lines", "The order's total is too large.");
    }
    Ok(priced)
}

async fn has_terminal(db: &Db, gym_id: GymId, facility_id: Uuid) -> Result<bool, ApiError> {
    let terminals = device::Entity::find()
        .filter(device::Column::GymId.eq(gym_id))
        .filter(device::Column::FacilityId.eq(facility_id))
        .filter(device::Column::Kind.eq(DeviceKind::CardTerminal))
        .count(db)
        .await?;
    Ok(terminals > 0)
}

/// The sale an order makes, with its items and its payment job, before it is written.
fn sale_of(gym_id: GymId, facility_id: Uuid, new: &NewOrder, priced: Vec<Priced>, at: DateTime<Utc>) -> Sale {
    let id = new_id();
    let currency = priced.first().map(|l| l.product.currency.clone()).unwrap_or_default();
    let total: i64 = priced.iter().map(|l| l.line_amount).sum();
    let single = (priced.len() == 1).then(|| priced[0].product.id);
    let names: Vec<&str> = priced.iter().map(|l| l.product.name.as_str()).collect();
    let purchase = purchase::Model {
        gym_id,
        id,
        member_id: new.member_id,
        product_id: single,
        description: names.join(", "),
        quantity: priced.iter().map(|l| l.quantity).sum(),
        total_amount: total,
        currency: currency.clone(),
        payment_status: PaymentStatus::Pending,
        purchased_at: at,
        legacy_id: None,
        created_at: at,
        updated_at: at,
        device_id: new.device_id,
        facility_id: Some(facility_id),
        receipt_number: None,
    };
    let lines = priced
        .iter()
        .enumerate()
        .map(|(i, l)| purchase_line::Model {
            gym_id,
            purchase_id: id,
            position: i32::try_from(i + 1).unwrap_or(i32::MAX),
            product_id: Some(l.product.id),
            description: l.product.name.clone(),
            quantity: l.quantity,
            unit_amount: l.product.price_amount,
            line_amount: l.line_amount,
        })
        .collect();
    let payments = vec![payment_job(&purchase, facility_id, at)];
    Sale { purchase, lines, payments, receipts: Vec::new() }
}

/// A new payment job for a sale's total.
fn payment_job(p: &purchase::Model, facility_id: Uuid, at: DateTime<Utc>) -> payment_job::Model {
    payment_job::Model {
        gym_id: p.gym_id,
        id: new_id(),
        purchase_id: p.id,
        facility_id,
        state: PaymentJobState::Pending,
        amount: p.total_amount,
        currency: p.currency.clone(),
        device_id: None,
        reserved_until: None,
        card_scheme: None,
        card_last4: None,
        reason: None,
        reported_at: None,
        takers: String::new(),
        created_at: at,
        updated_at: at,
    }
}

/// The order `id` of the gym (a sale made at the counter), or 404.
pub async fn find(db: &impl ConnectionTrait, gym_id: GymId, id: &str) -> Result<Sale, ApiError> {
    let missing = || ApiError::not_found("order", id);
    let uuid = Uuid::parse_str(id).map_err(|_| missing())?;
    let p = purchase::Entity::find_by_id((gym_id, uuid)).one(db).await?.filter(|p| p.facility_id.is_some());
    let p = p.ok_or_else(missing)?;
    sales_of(db, gym_id, vec![p]).await?.pop().ok_or_else(missing)
}

/// A sale of the gym with its items and, of its jobs, those `refund_due` (what its record shows),
/// its row locked for the rest of the transaction: what a change that fires the sale's event needs.
pub async fn locked_with_items(db: &impl ConnectionTrait, gym_id: GymId, id: Uuid) -> Result<Option<Sale>, ApiError> {
    let Some(purchase) = lock(db, gym_id, id).await? else { return Ok(None) };
    let mut sale = items_of(db, purchase).await?;
    sale.payments = purchases::refunds_of(db, gym_id, &[id]).await?.remove(&id).unwrap_or_default();
    Ok(Some(sale))
}

/// A sale of the gym with its items only (not its jobs): what its receipt needs.
pub async fn with_items(db: &impl ConnectionTrait, gym_id: GymId, id: Uuid) -> Result<Option<Sale>, ApiError> {
    let found = purchase::Entity::find_by_id((gym_id, id)).one(db).await?.filter(|p| p.facility_id.is_some());
    let Some(purchase) = found else { return Ok(None) };
    items_of(db, purchase).await.map(Some)
}

async fn items_of(db: &impl ConnectionTrait, purchase: purchase::Model) -> Result<Sale, ApiError> {
    let (gym_id, id) = (purchase.gym_id, purchase.id);
    let lines = purchases::lines_of(db, gym_id, &[id]).await?.remove(&id).unwrap_or_default();
    Ok(Sale { purchase, lines, payments: Vec::new(), receipts: Vec::new() })
}

/// These sales of a gym with their items and jobs (three queries however many).
pub async fn sales_of(
    db: &impl ConnectionTrait,
    gym_id: GymId,
    rows: Vec<purchase::Model>,
) -> Result<Vec<Sale>, sea_orm::DbErr> {
    let ids: Vec<Uuid> = rows.iter().map(|p| p.id).collect();
    let mut lines = purchases::lines_of(db, gym_id, &ids).await?;
    let mut payments: HashMap<Uuid, Vec<payment_job::Model>> = HashMap::new();
    let mut receipts: HashMap<Uuid, Vec<print_job::Model>> = HashMap::new();
    if !ids.is_empty() {
        use payment_job::Column as P;
        let found = payment_job::Entity::find()
            .filter(P::GymId.eq(gym_id))
            .filter(P::PurchaseId.is_in(ids.clone()))
            .order_by_asc(P::CreatedAt)
            .order_by_asc(P::Id)
            .all(db)
            .await?;
        payments = purchases::by_sale(found, |j| j.purchase_id);
        use print_job::Column as R;
        let found = print_job::Entity::find()
            .filter(R::GymId.eq(gym_id))
            .filter(R::PurchaseId.is_in(ids))
            .order_by_asc(R::CreatedAt)
            .order_by_asc(R::Id)
            .all(db)
            .await?;
        receipts = purchases::by_sale(found, |j| j.purchase_id);
    }
    Ok(rows
        .into_iter()
        .map(|p| Sale {
            lines: lines.remove(&p.id).unwrap_or_default(),
            payments: payments.remove(&p.id).unwrap_or_default(),
            receipts: receipts.remove(&p.id).unwrap_or_default(),
            purchase: p,
        })
        .collect())
}

/// The sale's row, locked for the rest of the transaction (PostgreSQL; SQLite's writer holds the
/// file): every change of a sale takes it first.
pub(super) async fn lock(
    db: &impl ConnectionTrait,
    gym_id: GymId,
    id: Uuid,
) -> Result<Option<purchase::Model>, ApiError> {
    let backend = db.get_database_backend();
    let sql = for_update(backend, "SELECT * FROM purchases WHERE gym_id = ? AND id = ?");
    let found =
        purchase::Model::find_by_statement(Statement::from_sql_and_values(backend, sql, [gym_id.into(), id.into()]))
            .one(db)
            .await?;
    Ok(found.filter(|p| p.facility_id.is_some()))
}

/// The statement that moves a sale to `to` (and gives it `receipt_number`, when paid; `to` its own
/// status only touches it, as when a refund due is recorded), with the
/// counters' move and its event for `audience` (`purchase.updated`'s, read before the
/// transaction), added to `writes`; returns whether a delivery was queued.
pub(super) fn moved(
    backend: DbBackend,
    writes: &mut Writes,
    sale: &mut Sale,
    to: PaymentStatus,
    receipt_number: Option<i64>,
    audience: Audience,
) -> Queued {
    let at = now();
    let from = sale.purchase.payment_status;
    let p = &mut sale.purchase;
    p.payment_status = to;
    p.updated_at = at;
    p.receipt_number = receipt_number.or(p.receipt_number);
    let sql = placeholders(
        backend,
        "UPDATE purchases SET payment_status = ?, receipt_number = ?, updated_at = ? WHERE gym_id = ? AND id = ?",
    );
    let values = [to.as_str().into(), p.receipt_number.into(), at.into(), p.gym_id.into(), p.id.into()];
    writes.push(Statement::from_sql_and_values(backend, sql, values));
    let gym_id = p.gym_id;
    let queued = purchases::announce(writes, backend, gym_id, EventType::PurchaseUpdated, &sale.record(), audience);
    let purchased_at = sale.purchase.purchased_at;
    writes.extend(purchases::count_statements(backend, gym_id, Change::Moved { from, to, purchased_at }));
    queued
}

/// The gym's next receipt number: one row per gym, locked from here to the commit, so numbers
/// follow the commits of paid sales, none skipped or used twice, whatever the servers.
pub(super) async fn next_receipt_number(db: &impl ConnectionTrait, gym_id: GymId) -> Result<i64, ApiError> {
    let backend = db.get_database_backend();
    let sql = placeholders(
        backend,
        "INSERT INTO gym_sequences (gym_id, name, value) VALUES (?, 'receipt', 1) \
         ON CONFLICT (gym_id, name) DO UPDATE SET value = gym_sequences.value + 1 RETURNING value",
    );
    let row = db.query_one(Statement::from_sql_and_values(backend, sql, [gym_id.into()])).await?;
    let value: Option<i64> = row.map(|r| r.try_get("", "value")).transpose()?;
    value.ok_or_else(|| ApiError::internal(anyhow::anyhow!("the receipt sequence answered no number")))
}

/// A `failed` order is `pending` again, with a new payment job. Returns the sale and whether a
/// webhook delivery was queued.
pub async fn retry(db: &Db, wakes: &Arc<Wakes>, gym_id: GymId, id: &str) -> Result<(Sale, Queued), ApiError> {
    let mut sale = find(db, gym_id, id).await?;
    let audience = webhooks::audience(db, gym_id, EventType::PurchaseUpdated).await?;
    let txn = begin_writing(db).await?;
    sale.purchase = lock(&txn, gym_id, sale.purchase.id).await?.ok_or_else(|| ApiError::not_found("order", id))?;
    if sale.purchase.payment_status != PaymentStatus::Failed {
        return Err(state_conflict(&sale.purchase, "retried"));
    }
    let facility_id = sale.purchase.facility_id.unwrap_or_default();
    let job = payment_job(&sale.purchase, facility_id, now());
    let mut writes = Writes::new();
    writes.push(
        payment_job::Entity::insert(payment_job::ActiveModel::from(job.clone())).build(txn.get_database_backend()),
    );
    let queued = moved(txn.get_database_backend(), &mut writes, &mut sale, PaymentStatus::Pending, None, audience);
    writes.run(&txn).await?;
    txn.commit().await?;
    sale.payments.push(job);
    wakes.signal_after_commit(db, payments_topic(gym_id, facility_id)).await;
    Ok((sale, queued))
}

/// A `pending` order whose payment no terminal holds, or a `failed` one, is `cancelled`. Returns
/// the sale and whether a webhook delivery was queued.
pub async fn cancel(db: &Db, gym_id: GymId, id: &str) -> Result<(Sale, Queued), ApiError> {
    let mut sale = find(db, gym_id, id).await?;
    let audience = webhooks::audience(db, gym_id, EventType::PurchaseUpdated).await?;
    let txn = begin_writing(db).await?;
    sale.purchase = lock(&txn, gym_id, sale.purchase.id).await?.ok_or_else(|| ApiError::not_found("order", id))?;
    if !matches!(sale.purchase.payment_status, PaymentStatus::Pending | PaymentStatus::Failed) {
        return Err(state_conflict(&sale.purchase, "cancelled"));
    }
    let at = now();
    let backend = txn.get_database_backend();
    let mut writes = Writes::new();
    let waiting = waiting_locked(&txn, gym_id, sale.purchase.id).await?;
    for job in &waiting {
        if job.state == PaymentJobState::Reserved && job.reserved_until.is_some_and(|t| t > at) {
            return Err(ApiError::StateConflict("A card terminal is taking the order's payment.".into()));
        }
        let sql =
            placeholders(backend, "UPDATE payment_jobs SET state = ?, updated_at = ? WHERE gym_id = ? AND id = ?");
        let values = [PaymentJobState::Cancelled.as_str().into(), at.into(), gym_id.into(), job.id.into()];
        writes.push(Statement::from_sql_and_values(backend, sql, values));
    }
    let queued = moved(backend, &mut writes, &mut sale, PaymentStatus::Cancelled, None, audience);
    writes.run(&txn).await?;
    txn.commit().await?;
    for job in &mut sale.payments {
        if waiting.iter().any(|w| w.id == job.id) {
            job.state = PaymentJobState::Cancelled;
            job.updated_at = at;
        }
    }
    Ok((sale, queued))
}

/// The sale's payment jobs that wait for a terminal or are held by one, their rows locked for the
/// rest of the transaction (PostgreSQL; SQLite's writer holds the file): a terminal's take waits
/// for the cancel or skips them, so a job is either cancelled or taken, never both.
async fn waiting_locked(
    db: &impl ConnectionTrait,
    gym_id: GymId,
    purchase_id: Uuid,
) -> Result<Vec<payment_job::Model>, ApiError> {
    let backend = db.get_database_backend();
    let sql = for_update(
        backend,
        "SELECT * FROM payment_jobs WHERE gym_id = ? AND purchase_id = ? AND state IN ('pending', 'reserved') \
         ORDER BY created_at, id",
    );
    let statement = Statement::from_sql_and_values(backend, sql, [gym_id.into(), purchase_id.into()]);
    Ok(payment_job::Entity::find().from_raw_sql(statement).all(db).await?)
}

/// A paid order whose last receipt failed to print gets a new print job with the same receipt.
pub async fn reprint(db: &Db, wakes: &Arc<Wakes>, gym_id: GymId, id: &str) -> Result<Sale, ApiError> {
    let mut sale = find(db, gym_id, id).await?;
    let txn = begin_writing(db).await?;
    sale.purchase = lock(&txn, gym_id, sale.purchase.id).await?.ok_or_else(|| ApiError::not_found("order", id))?;
    let latest = print_job::Entity::find()
        .filter(print_job::Column::GymId.eq(gym_id))
        .filter(print_job::Column::PurchaseId.eq(sale.purchase.id))
        .order_by_desc(print_job::Column::CreatedAt)
        .order_by_desc(print_job::Column::Id)
        .one(&txn)
        .await?;
    let (Some(number), Some(last)) = (sale.purchase.receipt_number, latest) else {
        return Err(state_conflict(&sale.purchase, "printed"));
    };
    if last.state != PrintJobState::Failed {
        let what = match last.state {
            PrintJobState::Printed => "The receipt was printed already.",
            _ => "The receipt is waiting for its printer.",
        };
        return Err(ApiError::StateConflict(what.into()));
    }
    let job = print_job(&sale.purchase, number, printer::Stamp::of(&last), now());
    let backend = txn.get_database_backend();
    txn.execute(print_job::Entity::insert(print_job::ActiveModel::from(job.clone())).build(backend)).await?;
    txn.commit().await?;
    sale.receipts.push(job);
    let facility_id = sale.purchase.facility_id.unwrap_or_default();
    wakes.signal_after_commit(db, receipts_topic(gym_id, facility_id)).await;
    Ok(sale)
}

/// A new print job for a paid sale's receipt, frozen with `stamp`.
pub(super) fn print_job(
    p: &purchase::Model,
    receipt_number: i64,
    stamp: Option<printer::Stamp>,
    at: DateTime<Utc>,
) -> print_job::Model {
    print_job::Model {
        gym_id: p.gym_id,
        id: new_id(),
        purchase_id: p.id,
        facility_id: p.facility_id.unwrap_or_default(),
        state: PrintJobState::Pending,
        receipt_number,
        device_id: None,
        delivered_at: None,
        reason: None,
        reported_at: None,
        created_at: at,
        updated_at: at,
        paid_at: stamp.as_ref().map(|s| s.paid_at),
        gym_name: stamp.as_ref().map(|s| s.gym_name.clone()),
        timezone: stamp.as_ref().map(|s| s.timezone.clone()),
        facility_name: stamp.and_then(|s| s.facility_name),
    }
}

/// The 409 of an order whose payment status does not allow an action.
fn state_conflict(p: &purchase::Model, action: &str) -> ApiError {
    ApiError::StateConflict(format!("A {} order cannot be {action}.", p.payment_status.as_str()))
}
