//! The sandbox's front-desk fixtures: the devices of the fixture facility, two rings waiting for an
//! answer, a door command handed to the door, and orders in each state an operation of the device
//! API acts on (openapi-devices.yaml, tag `Sandbox`): its path examples name them.
//!
//! A reset keeps the sandbox's devices, so the fixture devices are written over when they are
//! there; everything else here is new, in the reset's transaction.

use chrono::{DateTime, Duration, Utc};
use entity::{
    device, door_command,
    ids::GymId,
    payment_job, print_job, ring,
    states::{CommandState, DeviceKind, DoorAction, PaymentJobState, PaymentStatus, PrintJobState, RingState},
};
use sea_orm::{ActiveModelTrait, ActiveValue::Set, ConnectionTrait, DbErr, EntityTrait};
use uuid::{Uuid, uuid};

use super::fixtures::{FACILITY, KIOSK, PURCHASE, at, sale, sale_line};

pub const DOOR: Uuid = uuid!("0192f7c4-d001-7cc1-a8e3-5b8f4d1e2a90");
pub const DOORBELL: Uuid = uuid!("0192f7c4-d002-7cc1-a8e3-5b8f4d1e2a90");
pub const TERMINAL: Uuid = uuid!("0192f7c4-d004-7cc1-a8e3-5b8f4d1e2a90");
pub const PRINTER: Uuid = uuid!("0192f7c4-d005-7cc1-a8e3-5b8f4d1e2a90");
pub const RING_TO_OPEN: Uuid = uuid!("0192f7c4-e001-7cc1-a8e3-5b8f4d1e2a90");
pub const RING_TO_DISMISS: Uuid = uuid!("0192f7c4-e002-7cc1-a8e3-5b8f4d1e2a90");
pub const COMMAND: Uuid = uuid!("0192f7c4-c001-7cc1-a8e3-5b8f4d1e2a90");
/// An order whose payment the terminal declined.
pub const FAILED_ORDER: Uuid = uuid!("0192f7c4-f001-7cc1-a8e3-5b8f4d1e2a90");
/// An order no terminal took yet.
pub const PENDING_ORDER: Uuid = uuid!("0192f7c4-f002-7cc1-a8e3-5b8f4d1e2a90");
/// A paid order whose receipt the printer failed to print.
pub const REPRINTABLE_ORDER: Uuid = uuid!("0192f7c4-f003-7cc1-a8e3-5b8f4d1e2a90");
/// An order whose payment the terminal holds.
pub const HELD_ORDER: Uuid = uuid!("0192f7c4-f004-7cc1-a8e3-5b8f4d1e2a90");
/// The payment jobs of [`FAILED_ORDER`], [`PENDING_ORDER`] and [`HELD_ORDER`] (the terminal holds it).
const DECLINED_PAYMENT: Uuid = uuid!("0192f7c4-b001-7cc1-a8e3-5b8f4d1e2a90");
const PENDING_PAYMENT: Uuid = uuid!("0192f7c4-b002-7cc1-a8e3-5b8f4d1e2a90");
pub const HELD_PAYMENT: Uuid = uuid!("0192f7c4-b004-7cc1-a8e3-5b8f4d1e2a90");
/// The receipt at the printer (of the fixture sale), and the one it failed to print.
pub const PRINTING_RECEIPT: Uuid = uuid!("0192f7c4-a001-7cc1-a8e3-5b8f4d1e2a90");
const FAILED_RECEIPT: Uuid = uuid!("0192f7c4-a003-7cc1-a8e3-5b8f4d1e2a90");

/// How long the fixture rings, command and reservation wait for the operation that answers them
/// (a ring of the doorbell waits two minutes).
const WAITS: Duration = Duration::hours(1);

/// Writes the front-desk fixtures into `sandbox` at `reset_at`.
pub async fn write(txn: &impl ConnectionTrait, sandbox: GymId, reset_at: DateTime<Utc>) -> Result<(), DbErr> {
    for (id, kind, name) in [
        (DOOR, DeviceKind::Door, "Main entrance"),
        (DOORBELL, DeviceKind::Doorbell, "Main entrance bell"),
        (KIOSK, DeviceKind::Kiosk, "Lobby kiosk"),
        (TERMINAL, DeviceKind::CardTerminal, "Front desk terminal"),
        (PRINTER, DeviceKind::FiscalPrinter, "Front desk printer"),
    ] {
        device_fixture(txn, sandbox, id, kind, name).await?;
    }
    for id in [RING_TO_OPEN, RING_TO_DISMISS] {
        ring_fixture(sandbox, id, reset_at).insert(txn).await?;
    }
    command_fixture(sandbox, reset_at).insert(txn).await?;
    orders(txn, sandbox, reset_at).await
}

async fn device_fixture(
    txn: &impl ConnectionTrait,
    sandbox: GymId,
    id: Uuid,
    kind: DeviceKind,
    name: &str,
) -> Result<(), DbErr> {
    let set_up = at(super::fixtures::SET_UP)?;
    let row = device::ActiveModel {
        gym_id: Set(sandbox),
        id: Set(id),
        facility_id: Set(FACILITY),
        kind: Set(kind),
        name: Set(name.into()),
        last_seen_at: Set(None),
        created_at: Set(set_up),
        updated_at: Set(set_up),
    };
    match device::Entity::find_by_id((sandbox, id)).one(txn).await? {
        Some(_) => row.update(txn).await.map(|_| ()),
        None => row.insert(txn).await.map(|_| ()),
    }
}

fn ring_fixture(sandbox: GymId, id: Uuid, reset_at: DateTime<Utc>) -> ring::ActiveModel {
    ring::ActiveModel {
        gym_id: Set(sandbox),
        id: Set(id),
        device_id: Set(DOORBELL),
        facility_id: Set(FACILITY),
        state: Set(RingState::Pending),
        message: Set(None),
        door_id: Set(None),
        command_id: Set(None),
        expires_at: Set(reset_at + WAITS),
        answered_at: Set(None),
        created_at: Set(reset_at),
        updated_at: Set(reset_at),
    }
}

fn command_fixture(sandbox: GymId, reset_at: DateTime<Utc>) -> door_command::ActiveModel {
    door_command::ActiveModel {
        gym_id: Set(sandbox),
        id: Set(COMMAND),
        device_id: Set(DOOR),
        ring_id: Set(None),
        action: Set(DoorAction::Open),
        state: Set(CommandState::Delivered),
        expires_at: Set(reset_at + WAITS),
        delivered_at: Set(Some(reset_at)),
        reported_at: Set(None),
        detail: Set(None),
        created_at: Set(reset_at),
        updated_at: Set(reset_at),
    }
}

/// The orders, each with its item and its card payment or receipt where its state has one.
async fn orders(txn: &impl ConnectionTrait, sandbox: GymId, reset_at: DateTime<Utc>) -> Result<(), DbErr> {
    let made = [
        (FAILED_ORDER, PaymentStatus::Failed, None),
        (PENDING_ORDER, PaymentStatus::Pending, None),
        (REPRINTABLE_ORDER, PaymentStatus::Paid, Some(1041)),
        (HELD_ORDER, PaymentStatus::Pending, None),
    ];
    for (id, status, receipt) in made {
        sale(sandbox, id, status, receipt, reset_at).insert(txn).await?;
        sale_line(sandbox, id).insert(txn).await?;
    }
    let payments = [
        ((DECLINED_PAYMENT, FAILED_ORDER), PaymentJobState::Declined, Some("insufficient funds")),
        ((PENDING_PAYMENT, PENDING_ORDER), PaymentJobState::Pending, None),
        ((HELD_PAYMENT, HELD_ORDER), PaymentJobState::Reserved, None),
    ];
    for (ids, state, reason) in payments {
        payment(sandbox, ids, state, reason, reset_at).insert(txn).await?;
    }
    receipt(sandbox, (FAILED_RECEIPT, REPRINTABLE_ORDER), 1041, PrintJobState::Failed, reset_at)?.insert(txn).await?;
    receipt(sandbox, (PRINTING_RECEIPT, PURCHASE), 1042, PrintJobState::Delivered, reset_at)?.insert(txn).await?;
    Ok(())
}

/// A card payment (its id, its order's) in `state`; a taken one by the fixture terminal.
fn payment(
    sandbox: GymId,
    (id, order): (Uuid, Uuid),
    state: PaymentJobState,
    reason: Option<&str>,
    reset_at: DateTime<Utc>,
) -> payment_job::ActiveModel {
    let held = state == PaymentJobState::Reserved;
    let taken = state != PaymentJobState::Pending;
    payment_job::ActiveModel {
        gym_id: Set(sandbox),
        id: Set(id),
        purchase_id: Set(order),
        facility_id: Set(FACILITY),
        state: Set(state),
        amount: Set(500),
        currency: Set("EUR".into()),
        device_id: Set(taken.then_some(TERMINAL)),
        reserved_until: Set(held.then(|| reset_at + WAITS)),
        card_scheme: Set(None),
        card_last4: Set(None),
        reason: Set(reason.map(str::to_string)),
        reported_at: Set((taken && !held).then_some(reset_at)),
        takers: Set(if taken { crate::frontdesk::terminal::taker(TERMINAL) } else { String::new() }),
        created_at: Set(reset_at),
        updated_at: Set(reset_at),
    }
}

/// A receipt (its id, its order's) handed to the fixture printer, in `state`.
fn receipt(
    sandbox: GymId,
    (id, order): (Uuid, Uuid),
    number: i64,
    state: PrintJobState,
    reset_at: DateTime<Utc>,
) -> Result<print_job::ActiveModel, DbErr> {
    let failed = state == PrintJobState::Failed;
    Ok(print_job::ActiveModel {
        gym_id: Set(sandbox),
        id: Set(id),
        purchase_id: Set(order),
        facility_id: Set(FACILITY),
        state: Set(state),
        receipt_number: Set(number),
        device_id: Set(Some(PRINTER)),
        delivered_at: Set(Some(reset_at)),
        reason: Set(failed.then(|| "paper jam".to_string())),
        reported_at: Set(failed.then_some(reset_at)),
        created_at: Set(reset_at),
        updated_at: Set(reset_at),
        paid_at: Set(Some(at("2026-11-20T08:02:00Z")?)),
        gym_name: Set(None),
        timezone: Set(Some("Europe/Berlin".into())),
        facility_name: Set(Some("Main facility".into())),
    })
}
