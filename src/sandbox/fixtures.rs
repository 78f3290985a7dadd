//! The sandbox's fixtures (`POST /sandbox/reset?contents=fixtures`): the records the integration
//! document's examples show, with their ids, fields and states, so that a contract-test tool that
//! sends the examples finds every record they name (openapi.yaml, tag `Sandbox`).
//!
//! Each value here is the example's; `tests/it/sandbox.rs` reads every example back through the
//! API and compares it with the document, so the two cannot drift apart.

use chrono::{DateTime, NaiveDate, Utc};
use entity::{
    facility,
    ids::GymId,
    ids::MemberId,
    member, member_membership, membership_plan, product, purchase, purchase_line,
    states::{BillingInterval, MemberStatus, PaymentStatus, PlanStatus, ProductStatus},
    subscription_plan, webhook_event,
};
use sea_orm::{ActiveModelTrait, ActiveValue::Set, ConnectionTrait, DbBackend, DbErr, EntityTrait, Statement};
use uuid::{Uuid, uuid};

use crate::db::placeholders;
use crate::webhooks::{EventType, envelope, ping_data};

pub const FACILITY: Uuid = uuid!("0192f7c4-1111-7cc1-a8e3-5b8f4d1e2a90");
pub const MEMBER: Uuid = uuid!("0192f7c4-3b7e-7cc1-a8e3-5b8f4d1e2a90");
pub const MEMBERSHIP_PLAN: Uuid = uuid!("0192f7c4-2222-7cc1-a8e3-5b8f4d1e2a90");
pub const SUBSCRIPTION_PLAN: Uuid = uuid!("0192f7c4-3333-7cc1-a8e3-5b8f4d1e2a90");
pub const PRODUCT: Uuid = uuid!("0192f7c4-5555-7cc1-a8e3-5b8f4d1e2a90");
pub const PURCHASE: Uuid = uuid!("0192f7c4-6666-7cc1-a8e3-5b8f4d1e2a90");
pub const MEMBERSHIP: Uuid = uuid!("0192f7c4-7777-7cc1-a8e3-5b8f4d1e2a90");
pub const EVENT: Uuid = uuid!("0192f7c4-9999-7cc1-a8e3-5b8f4d1e2a90");
/// The kiosk that took the fixture sale (a front-desk fixture).
pub const KIOSK: Uuid = uuid!("0192f7c4-8888-7cc1-a8e3-5b8f4d1e2a90");
const RECEIPT: i64 = 1042;

/// When the catalogue and the member were set up, in the examples.
pub(super) const SET_UP: &str = "2026-01-05T09:00:00Z";

pub(super) fn at(text: &str) -> Result<DateTime<Utc>, DbErr> {
    text.parse().map_err(|e| DbErr::Custom(format!("fixture time {text}: {e}")))
}

fn day(text: &str) -> Result<NaiveDate, DbErr> {
    text.parse().map_err(|e| DbErr::Custom(format!("fixture day {text}: {e}")))
}

/// Writes the fixtures into `sandbox`, emptied in this transaction; `reset_at` dates the event
/// (events are kept 30 days from their time).
pub async fn write(txn: &impl ConnectionTrait, sandbox: GymId, reset_at: DateTime<Utc>) -> Result<(), DbErr> {
    facility_fixture(txn, sandbox).await?;
    member_fixture(sandbox)?.insert(txn).await?;
    let (membership, subscription, held) = plans(sandbox)?;
    membership.insert(txn).await?;
    subscription.insert(txn).await?;
    held.insert(txn).await?;
    product_fixture(sandbox)?.insert(txn).await?;
    purchase_fixture(sandbox)?.insert(txn).await?;
    sale_line(sandbox, PURCHASE).insert(txn).await?;
    txn.execute(receipts_after_fixture(txn.get_database_backend(), sandbox)).await?;
    let envelope = envelope(EVENT, EventType::Ping, reset_at, ping_data());
    webhook_event::ActiveModel {
        gym_id: Set(sandbox),
        id: Set(EVENT),
        event_type: Set(EventType::Ping.as_str().to_string()),
        payload: Set(envelope.to_string()),
        created_at: Set(reset_at),
    }
    .insert(txn)
    .await?;
    Ok(())
}

/// The facility: written over if the sandbox keeps one of its id (a reset keeps facilities).
async fn facility_fixture(txn: &impl ConnectionTrait, sandbox: GymId) -> Result<(), DbErr> {
    let row = facility::ActiveModel {
        gym_id: Set(sandbox),
        id: Set(FACILITY),
        name: Set("Main facility".into()),
        timezone: Set(Some("Europe/Berlin".into())),
        address: Set(Some("Hauptstraße 1\n10115 Berlin".into())),
        legacy_id: Set(None),
        archived_at: Set(None),
        open_id: Set(Some(FACILITY)),
        created_at: Set(at(SET_UP)?),
        updated_at: Set(at(SET_UP)?),
    };
    match facility::Entity::find_by_id((sandbox, FACILITY)).one(txn).await? {
        Some(_) => row.update(txn).await.map(|_| ()),
        None => row.insert(txn).await.map(|_| ()),
    }
}

fn member_fixture(sandbox: GymId) -> Result<member::ActiveModel, DbErr> {
    let (first, last, email) = ("Ada", "Lovelace", "ada@example.com");
    Ok(member::ActiveModel {
        gym_id: Set(sandbox),
        id: Set(MemberId(MEMBER)),
        facility_id: Set(FACILITY),
        first_name: Set(first.into()),
        last_name: Set(last.into()),
        email: Set(Some(email.into())),
        email_normalized: Set(Some(crate::members::normalized_email(email))),
        search_text: Set(crate::members::search_text(first, last, Some(email))),
        phone: Set(Some("+44 20 7946 0958".into())),
        gender: Set(Some("female".into())),
        date_of_birth: Set(Some(day("1990-12-10")?)),
        city: Set(Some("London".into())),
        country: Set(Some("GB".into())),
        status: Set(MemberStatus::Active),
        access_card: Set(Some("04A2B3C4D5".into())),
        legacy_id: Set(None),
        visits_count: Set(0),
        entries_count: Set(0),
        last_visit_at: Set(None),
        created_at: Set(at(SET_UP)?),
        updated_at: Set(at("2026-11-01T12:00:00Z")?),
    })
}

/// The plans, and the member's membership of one.
fn plans(
    sandbox: GymId,
) -> Result<(membership_plan::ActiveModel, subscription_plan::ActiveModel, member_membership::ActiveModel), DbErr> {
    let set_up = at(SET_UP)?;
    let membership = membership_plan::ActiveModel {
        gym_id: Set(sandbox),
        id: Set(MEMBERSHIP_PLAN),
        name: Set("10-visit card".into()),
        description: Set(Some("Ten visits within 90 days.".into())),
        price_amount: Set(9900),
        currency: Set("EUR".into()),
        duration_days: Set(Some(90)),
        visit_limit: Set(Some(10)),
        status: Set(PlanStatus::Active),
        legacy_id: Set(None),
        created_at: Set(set_up),
        updated_at: Set(set_up),
    };
    let subscription = subscription_plan::ActiveModel {
        gym_id: Set(sandbox),
        id: Set(SUBSCRIPTION_PLAN),
        name: Set("Monthly unlimited".into()),
        description: Set(None),
        price_amount: Set(4900),
        currency: Set("EUR".into()),
        billing_interval: Set(BillingInterval::Month),
        billing_interval_count: Set(1),
        status: Set(PlanStatus::Active),
        legacy_id: Set(None),
        created_at: Set(set_up),
        updated_at: Set(set_up),
    };
    let held = member_membership::ActiveModel {
        gym_id: Set(sandbox),
        id: Set(MEMBERSHIP),
        member_id: Set(MemberId(MEMBER)),
        membership_plan_id: Set(Some(MEMBERSHIP_PLAN)),
        subscription_plan_id: Set(None),
        starts_on: Set(day("2026-01-01")?),
        ends_on: Set(Some(day("2026-03-31")?)),
        legacy_id: Set(None),
        created_at: Set(set_up),
        updated_at: Set(set_up),
    };
    Ok((membership, subscription, held))
}

fn product_fixture(sandbox: GymId) -> Result<product::ActiveModel, DbErr> {
    Ok(product::ActiveModel {
        gym_id: Set(sandbox),
        id: Set(PRODUCT),
        name: Set("Protein bar".into()),
        description: Set(None),
        sku: Set(Some("PB-001".into())),
        price_amount: Set(250),
        currency: Set("EUR".into()),
        status: Set(ProductStatus::Active),
        legacy_id: Set(None),
        created_at: Set(at(SET_UP)?),
        updated_at: Set(at(SET_UP)?),
    })
}

/// The fixture sale: paid at the counter, receipt 1042 (the next receipt is 1043).
fn purchase_fixture(sandbox: GymId) -> Result<purchase::ActiveModel, DbErr> {
    Ok(sale(sandbox, PURCHASE, PaymentStatus::Paid, Some(RECEIPT), at("2026-11-20T08:02:00Z")?))
}

/// An order `id` of the kiosk for two protein bars, made at `sold`.
pub(super) fn sale(
    sandbox: GymId,
    id: Uuid,
    status: PaymentStatus,
    receipt: Option<i64>,
    sold: DateTime<Utc>,
) -> purchase::ActiveModel {
    purchase::ActiveModel {
        gym_id: Set(sandbox),
        id: Set(id),
        member_id: Set(Some(MemberId(MEMBER))),
        product_id: Set(Some(PRODUCT)),
        description: Set("Protein bar".into()),
        quantity: Set(2),
        total_amount: Set(500),
        currency: Set("EUR".into()),
        payment_status: Set(status),
        purchased_at: Set(sold),
        legacy_id: Set(None),
        created_at: Set(sold),
        updated_at: Set(sold),
        device_id: Set(Some(KIOSK)),
        facility_id: Set(Some(FACILITY)),
        receipt_number: Set(receipt),
    }
}

/// The item of the order `id`.
pub(super) fn sale_line(sandbox: GymId, id: Uuid) -> purchase_line::ActiveModel {
    purchase_line::ActiveModel {
        gym_id: Set(sandbox),
        purchase_id: Set(id),
        position: Set(1),
        product_id: Set(Some(PRODUCT)),
        description: Set("Protein bar".into()),
        quantity: Set(2),
        unit_amount: Set(250),
        line_amount: Set(500),
    }
}

/// The receipts' sequence at the fixture sale's number.
fn receipts_after_fixture(backend: DbBackend, sandbox: GymId) -> Statement {
    let sql = "INSERT INTO gym_sequences (gym_id, name, value) VALUES (?, 'receipt', ?)";
    Statement::from_sql_and_values(backend, placeholders(backend, sql), [sandbox.into(), RECEIPT.into()])
}
