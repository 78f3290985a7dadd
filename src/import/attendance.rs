//! `POST /import/attendance` and `POST /import/access_logs`: check-ins and door events, one table
//! with one legacy id space per kind. Each entry adds to its member's figures (granted check-ins
//! to the visits).

use std::collections::HashMap;

use chrono::{DateTime, Utc};
use entity::ids::{GymId, MemberId};
use entity::{
    attendance,
    states::{AttendanceKind, AttendanceStatus},
};
use sea_orm::{ActiveValue::Set, DbErr};

use super::{
    batch::{Batch, default_facility, field, finish, fresh_rows, missing, planned, run},
    facilities::facility_refs,
    members::member_refs,
    sql::{Legacy, insert_new},
};
use crate::{
    attendance::MemberEntries,
    db::Db,
    errors::{ApiError, FieldErrors},
    openapi::{ImportAttendanceRow, ImportEntity, ImportResult},
    records::{new_id, now},
};

/// Check-ins (`attendance`) and door events (`access_logs`).
pub async fn attendance(
    db: &Db,
    gym_id: GymId,
    entity: ImportEntity,
    rows: Vec<ImportAttendanceRow>,
    dry_run: bool,
) -> Result<ImportResult, ApiError> {
    let kind = match entity {
        ImportEntity::AccessLogs => AttendanceKind::Access,
        _ => AttendanceKind::CheckIn,
    };
    let batch = Batch { gym_id, entity, received: rows.len(), dry_run };
    let validate = || async {
        use attendance::{Column as C, Entity};
        let mut errors = FieldErrors::new();
        let table = Legacy {
            gym: C::GymId,
            legacy: C::LegacyId,
            id: C::Id,
            extra: C::Id,
            scope: Some((C::Kind, kind.as_str())),
        };
        let mut fresh =
            fresh_rows::<Entity, _>(db, table, gym_id, &rows, |r| r.legacy_id.as_str(), &mut errors).await?;
        // Written in the order of their legacy ids: two batches that share some wait for each
        // other's in one order, never each for the other.
        fresh.sort_unstable_by(|(_, a), (_, b)| a.legacy_id.cmp(&b.legacy_id));
        let members = member_refs(
            db,
            gym_id,
            fresh.iter().filter_map(|(_, r)| r.member_legacy_id.value().map(String::as_str)).collect(),
        )
        .await?;
        let named = fresh.iter().filter_map(|(i, r)| r.facility_legacy_id.value().map(|l| (*i, l.as_str())));
        let places = facility_refs(db, gym_id, named, false, &mut errors).await?;
        let unplaced =
            |r: &ImportAttendanceRow| r.member_legacy_id.value().is_none() && r.facility_legacy_id.value().is_none();
        let fallback =
            if fresh.iter().any(|(_, r)| unplaced(r)) { Some(default_facility(db, gym_id).await?) } else { None };
        let at = now();
        let mut models = Vec::with_capacity(fresh.len());
        for (i, r) in fresh {
            let member = match r.member_legacy_id.value() {
                Some(legacy) => match members.get(legacy) {
                    Some(found) => Some(*found),
                    None => {
                        errors.add(field(i, "member_legacy_id"), missing("member", legacy));
                        continue;
                    }
                },
                None => None,
            };
            // Where it happened: the facility named, else the member's home, else the gym's first.
            let named = r.facility_legacy_id.value().map(|l| places.get(l).copied());
            let facility_id = match (named, member, fallback) {
                (Some(Some(f)), _, _) | (None, Some((_, f)), _) | (None, None, Some(f)) => f,
                // Named but not imported (a 422 already), or no facility at all.
                _ => continue,
            };
            let member_id = member.map(|(id, _)| id);
            models.push(attendance::ActiveModel {
                id: Set(new_id()),
                gym_id: Set(gym_id),
                facility_id: Set(facility_id),
                member_id: Set(member_id),
                kind: Set(kind),
                status: Set(r.status.map_or(AttendanceStatus::Granted, Into::into)),
                occurred_at: Set(crate::records::to_micros(r.occurred_at)),
                legacy_id: Set(Some(r.legacy_id.clone())),
                created_at: Set(at),
                updated_at: Set(at),
                device_id: Set(None),
            });
        }
        planned(errors, models, at)
    };
    let write = |txn: crate::db::Writing, (models, at): (Vec<attendance::ActiveModel>, DateTime<Utc>)| async move {
        use attendance::Column as C;
        let returning = [C::MemberId, C::Kind, C::Status, C::OccurredAt];
        // The entries first, then the members they add to, in the order of their ids, the
        // counters last (see `lock_members`): a member is held only by the statements that
        // change it, and a concurrent batch of the same members waits that long, not for this
        // batch's insert too.
        let created = insert_new(&txn, models, [C::GymId, C::Kind, C::LegacyId], returning).await?;
        let members = members_entries(&created)?;
        let ids: Vec<MemberId> = members.iter().map(|m| m.member_id).collect();
        crate::attendance::lock_members(&txn, gym_id, &ids).await?;
        crate::attendance::add_entries(&txn, gym_id, &members, at).await?;
        crate::attendance::count(&txn, gym_id, &entries(&created)?).await?;
        finish(txn, batch, created.len(), at).await
    };
    run(db, batch, validate, write).await
}

/// The status and date of each entry a batch created.
fn entries(created: &[sea_orm::QueryResult]) -> Result<Vec<(AttendanceStatus, DateTime<Utc>)>, DbErr> {
    created.iter().map(|row| Ok((row.try_get("", "status")?, row.try_get("", "occurred_at")?))).collect()
}

/// What the entries a batch created add to each of their members' figures.
fn members_entries(created: &[sea_orm::QueryResult]) -> Result<Vec<MemberEntries>, DbErr> {
    let mut members: HashMap<MemberId, MemberEntries> = HashMap::new();
    for row in created {
        let kind: AttendanceKind = row.try_get("", "kind")?;
        let status: AttendanceStatus = row.try_get("", "status")?;
        let member_id: Option<MemberId> = row.try_get("", "member_id")?;
        let occurred_at: DateTime<Utc> = row.try_get("", "occurred_at")?;
        let Some(member_id) = member_id else { continue };
        let entry = MemberEntries::of(member_id, kind, status, occurred_at);
        members.entry(member_id).and_modify(|m| m.add(entry)).or_insert(entry);
    }
    let mut members: Vec<_> = members.into_values().collect();
    members.sort_unstable_by_key(|m| m.member_id);
    Ok(members)
}
