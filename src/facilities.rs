//! A gym's facilities, its locations: made, renamed, archived and read. Who may do so, and for
//! which gym (the gym or its sandbox), is the caller's to settle (`accounts::facilities_gym`).
//!
//! An archived facility keeps its history (attendance, sales, receipts name it) but takes no new
//! members or devices, and only a facility nobody is placed in can be archived: its members and
//! devices move to another facility of the gym in the same transaction. The database decides
//! both (migration `facility_details`: members and devices refer to the facility's `open_id`,
//! which archiving empties), so a member written while its facility is archived is refused, never
//! left behind in it.

use chrono::{DateTime, Utc};
use entity::facility;
use entity::ids::GymId;
use sea_orm::{
    ActiveModelTrait, ColumnTrait, ConnectionTrait, DatabaseConnection, DbErr, EntityTrait, QueryFilter, QueryOrder,
    Set, Statement,
};
use uuid::Uuid;

use crate::db::placeholders;
use crate::records::{new_id, now};

/// Longest name, address and legacy id a facility takes, in characters.
pub const MAX_NAME: usize = 200;
pub const MAX_ADDRESS: usize = 500;
pub const MAX_LEGACY_ID: usize = 200;

#[derive(Debug, thiserror::Error)]
pub enum FacilityError {
    #[error("facility not found")]
    NotFound,
    /// A field (`name`, `timezone`, ...) and what is wrong with it.
    #[error("{1}")]
    Invalid(&'static str, String),
    #[error(transparent)]
    Db(#[from] DbErr),
}

pub type Result<T> = std::result::Result<T, FacilityError>;

impl From<FacilityError> for crate::errors::ApiError {
    fn from(e: FacilityError) -> Self {
        match e {
            FacilityError::NotFound => Self::invalid("facility_id", "No such facility of this gym."),
            FacilityError::Invalid(field, message) => Self::invalid(field, message),
            FacilityError::Db(e) => e.into(),
        }
    }
}

/// A facility to make: its name, and optionally its own time zone (else the gym's), address and
/// the id the gym's previous system knew it by.
#[derive(Debug, Default, Clone)]
pub struct NewFacility {
    pub name: String,
    pub timezone: Option<String>,
    pub address: Option<String>,
    pub legacy_id: Option<String>,
}

/// `name` trimmed, 1 to [`MAX_NAME`] characters.
pub fn checked_name(name: &str) -> Result<String> {
    let name = name.trim();
    if name.is_empty() || name.chars().count() > MAX_NAME {
        return Err(FacilityError::Invalid("name", format!("the name must have 1 to {MAX_NAME} characters")));
    }
    Ok(name.to_string())
}

/// The facility checked: a known IANA time zone, bounded texts, empty texts as none.
pub fn checked(new: NewFacility) -> Result<NewFacility> {
    let present = |v: Option<String>| v.map(|s| s.trim().to_string()).filter(|s| !s.is_empty());
    let timezone = present(new.timezone);
    if let Some(Err(message)) = timezone.as_deref().map(crate::records::timezone) {
        return Err(FacilityError::Invalid("timezone", message));
    }
    let address = present(new.address);
    if address.as_ref().is_some_and(|a| a.chars().count() > MAX_ADDRESS) {
        return Err(FacilityError::Invalid(
            "address",
            format!("the address must have at most {MAX_ADDRESS} characters"),
        ));
    }
    let legacy_id = present(new.legacy_id);
    if legacy_id.as_ref().is_some_and(|l| l.chars().count() > MAX_LEGACY_ID) {
        let message = format!("the legacy id must have at most {MAX_LEGACY_ID} characters");
        return Err(FacilityError::Invalid("legacy_id", message));
    }
    Ok(NewFacility { name: checked_name(&new.name)?, timezone, address, legacy_id })
}

/// The row of a new, open facility of `gym_id` (already [`checked`]).
pub fn row(gym_id: GymId, new: NewFacility, at: DateTime<Utc>) -> facility::ActiveModel {
    let id = new_id();
    facility::ActiveModel {
        gym_id: Set(gym_id),
        id: Set(id),
        name: Set(new.name),
        timezone: Set(new.timezone),
        address: Set(new.address),
        legacy_id: Set(new.legacy_id),
        archived_at: Set(None),
        open_id: Set(Some(id)),
        created_at: Set(at),
        updated_at: Set(at),
    }
}

/// Makes a facility of `gym_id`. A legacy id the gym's facilities hold already is refused.
pub async fn create(db: &impl ConnectionTrait, gym_id: GymId, new: NewFacility) -> Result<facility::Model> {
    let new = checked(new)?;
    row(gym_id, new, now()).insert(db).await.map_err(|e| {
        if crate::db::is_unique_violation(&e) {
            FacilityError::Invalid("legacy_id", "another facility of the gym has this legacy id".into())
        } else {
            e.into()
        }
    })
}

/// The facilities of the gyms, each gym's oldest first.
pub async fn of_gyms(db: &impl ConnectionTrait, gyms: &[GymId]) -> Result<Vec<facility::Model>> {
    let mut all = Vec::new();
    for gym in gyms {
        let found = facility::Entity::find()
            .filter(facility::Column::GymId.eq(*gym))
            .order_by_asc(facility::Column::CreatedAt)
            .order_by_asc(facility::Column::Id)
            .all(db)
            .await?;
        all.extend(found);
    }
    Ok(all)
}

/// The facility `id` of one of `gyms`.
pub async fn find(db: &impl ConnectionTrait, gyms: &[GymId], id: Uuid) -> Result<facility::Model> {
    for gym in gyms {
        if let Some(f) = facility::Entity::find_by_id((*gym, id)).one(db).await? {
            return Ok(f);
        }
    }
    Err(FacilityError::NotFound)
}

/// The facility `id` of any gym: an operator names one by its id alone, a read across gyms
/// (docs/scaling.md).
pub async fn find_any(db: &DatabaseConnection, id: Uuid) -> Result<facility::Model> {
    use sea_orm::{FromQueryResult, QuerySelect, QueryTrait};
    let by_id = facility::Entity::find().filter(facility::Column::Id.eq(id)).limit(1).build(db.get_database_backend());
    let rows = crate::db::query_across_gyms(db, by_id).await?;
    let found = rows.first().map(|r| facility::Model::from_query_result(r, "")).transpose()?;
    found.ok_or(FacilityError::NotFound)
}

/// Renames `found`, a facility the caller has read (`find`, `accounts::managed_facility`).
pub async fn rename(db: &DatabaseConnection, found: facility::Model, name: &str) -> Result<facility::Model> {
    let name = checked_name(name)?;
    let mut f: facility::ActiveModel = found.into();
    f.name = Set(name);
    f.updated_at = Set(now());
    Ok(f.update(db).await?)
}

/// What archiving a facility did: the facility, and how many members and devices moved.
#[derive(Debug)]
pub struct Archived {
    pub facility: facility::Model,
    pub members_moved: u64,
    pub devices_moved: u64,
}

/// Archives the facility `id` of one of `gyms`, first moving its members and devices to
/// `move_to` (an open facility of the same gym), all in one transaction. Without `move_to` a
/// facility anyone is placed in is refused, as is the gym's last open facility. Archiving an
/// archived facility changes nothing.
pub async fn archive(db: &DatabaseConnection, gyms: &[GymId], id: Uuid, move_to: Option<Uuid>) -> Result<Archived> {
    let txn = crate::db::begin_writing(db).await?;
    let gym = find(&txn, gyms, id).await?.gym_id;
    // Every facility of the gym locked, in one order, for the rest of the transaction: archives
    // of one gym take turns (two cannot each leave the other as the last open facility), and a
    // member or device being placed in one now (its key check holds the row) is written first
    // and moved below, while one placed after finds the facility archived.
    let backend = txn.get_database_backend();
    let locked = crate::db::for_update(backend, "SELECT * FROM facilities WHERE gym_id = ? ORDER BY id");
    let all = facility::Entity::find()
        .from_raw_sql(Statement::from_sql_and_values(backend, locked, [gym.into()]))
        .all(&txn)
        .await?;
    let found = all.iter().find(|f| f.id == id).cloned().ok_or(FacilityError::NotFound)?;
    if found.open_id.is_none() {
        return Ok(Archived { facility: found, members_moved: 0, devices_moved: 0 });
    }
    let open: Vec<_> = all.iter().filter(|f| f.open_id.is_some() && f.id != id).collect();
    if open.is_empty() {
        return Err(FacilityError::Invalid("facility", "the gym's last open facility cannot be archived".into()));
    }
    let at = now();
    let (mut members_moved, mut devices_moved) = (0, 0);
    if let Some(target) = move_to {
        if !open.iter().any(|f| f.id == target) {
            let message = "move_to must be another open facility of the same gym".to_string();
            return Err(FacilityError::Invalid("move_to", message));
        }
        members_moved = move_placed(&txn, "members", gym, id, target, at).await?;
        devices_moved = move_placed(&txn, "devices", gym, id, target, at).await?;
    }
    let sql = placeholders(
        backend,
        "UPDATE facilities SET open_id = NULL, archived_at = ?, updated_at = ? WHERE gym_id = ? AND id = ?",
    );
    let archived =
        txn.execute(Statement::from_sql_and_values(backend, sql, [at.into(), at.into(), gym.into(), id.into()]));
    if let Err(e) = archived.await {
        return Err(still_placed(e));
    }
    txn.commit().await?;
    let facility = facility::Model { open_id: None, archived_at: Some(at), updated_at: at, ..found };
    Ok(Archived { facility, members_moved, devices_moved })
}

/// Moves every row of `table` (members or devices) placed in `from` to `to`.
async fn move_placed(
    db: &impl ConnectionTrait,
    table: &str,
    gym: GymId,
    from: Uuid,
    to: Uuid,
    at: DateTime<Utc>,
) -> Result<u64> {
    let backend = db.get_database_backend();
    let sql = placeholders(
        backend,
        &format!("UPDATE {table} SET facility_id = ?, updated_at = ? WHERE gym_id = ? AND facility_id = ?"),
    );
    let values = [to.into(), at.into(), gym.into(), from.into()];
    Ok(db.execute(Statement::from_sql_and_values(backend, sql, values)).await?.rows_affected())
}

/// The database refused to archive a facility members or devices are still placed in (a write
/// placed one there after the move).
fn still_placed(e: DbErr) -> FacilityError {
    let refused = matches!(e.sql_err(), Some(sea_orm::SqlErr::ForeignKeyConstraintViolation(_)))
        || e.to_string().contains("the facility still has members or devices");
    if refused {
        let message = "members or devices are still placed in this facility; choose where they move to";
        return FacilityError::Invalid("move_to", message.into());
    }
    e.into()
}

/// Whether `err` is the database refusing a member or device placed in an archived facility.
pub fn archived_refusal(err: &DbErr) -> bool {
    err.to_string().contains("the facility is archived")
        || matches!(err.sql_err(), Some(sea_orm::SqlErr::ForeignKeyConstraintViolation(m)) if m.contains("open_facility"))
}
