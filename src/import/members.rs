//! `POST /import/members`: members by legacy id, with their emails free in the gym and once in
//! the batch. Rows and counters go through `crate::members`, as every member write does.

use std::collections::{HashMap, HashSet};

use chrono::{DateTime, Utc};
use entity::ids::{GymId, MemberId};
use entity::{member, states::MemberStatus};
use sea_orm::{ConnectionTrait, DbErr};
use uuid::Uuid;

use super::{
    batch::{Batch, check_batch_ids, field, finish, no_facility, planned, run, twice},
    facilities::facility_refs,
    sql::{Legacy, insert_new, lookup, returned},
};
use crate::{
    accounts,
    db::Db,
    errors::{ApiError, FieldErrors},
    members::{self, Change, NewMember, normalized_email},
    openapi::{ImportEntity, ImportMemberRow, ImportResult},
    records::now,
};

/// Member references of a batch: `legacy_id -> (id, facility_id)`.
pub(super) async fn member_refs(
    db: &impl ConnectionTrait,
    gym_id: GymId,
    ids: HashSet<&str>,
) -> Result<HashMap<String, (MemberId, Uuid)>, DbErr> {
    use member::Column as C;
    let table = Legacy { gym: C::GymId, legacy: C::LegacyId, id: C::Id, extra: C::FacilityId, scope: None };
    let found = lookup::<member::Entity, Uuid>(db, table, gym_id, ids).await?;
    Ok(found.into_iter().map(|(legacy, (id, facility))| (legacy, (id.into(), facility))).collect())
}

pub async fn members(
    db: &Db,
    gym_id: GymId,
    rows: Vec<ImportMemberRow>,
    dry_run: bool,
) -> Result<ImportResult, ApiError> {
    let batch = Batch { gym_id, entity: ImportEntity::Members, received: rows.len(), dry_run };
    let validate = || async {
        let mut errors = FieldErrors::new();
        check_batch_ids(rows.iter().map(|r| r.legacy_id.as_str()), &mut errors);
        // The reads at once: which rows exist, which emails and cards are taken, where members go.
        let all_emails: Vec<String> =
            rows.iter().filter_map(|r| r.email.value().map(|e| normalized_email(&e.0))).collect();
        use member::Column as C;
        let emails = Legacy { gym: C::GymId, legacy: C::EmailNormalized, id: C::Id, extra: C::LegacyId, scope: None };
        let cards = Legacy { gym: C::GymId, legacy: C::AccessCard, id: C::Id, extra: C::LegacyId, scope: None };
        let (existing, taken, cards_taken, facility) = tokio::try_join!(
            member_refs(db, gym_id, rows.iter().map(|r| r.legacy_id.as_str()).collect()),
            lookup::<member::Entity, Option<String>>(
                db,
                emails,
                gym_id,
                all_emails.iter().map(String::as_str).collect()
            ),
            lookup::<member::Entity, Option<String>>(
                db,
                cards,
                gym_id,
                rows.iter().filter_map(|r| r.access_card.value().map(String::as_str)).collect()
            ),
            accounts::first_facility(db, gym_id),
        )?;
        // The reads ran apart, so a concurrent batch may show in one and not the other: a row whose
        // email belongs to the member of its own legacy id was imported meanwhile, and is skipped.
        let imported_meanwhile = |r: &ImportMemberRow| {
            r.email
                .value()
                .and_then(|e| taken.get(&normalized_email(&e.0)))
                .is_some_and(|(_, owner)| owner.as_deref() == Some(r.legacy_id.as_str()))
        };
        let fresh: Vec<(usize, &ImportMemberRow)> = rows
            .iter()
            .enumerate()
            .filter(|(_, r)| !existing.contains_key(&r.legacy_id) && !imported_meanwhile(r))
            .collect();
        let email = |r: &ImportMemberRow| r.email.value().map(|e| normalized_email(&e.0));
        check_unique(&fresh, "email", members::EMAIL_TAKEN, email, &taken, &mut errors);
        let card = |r: &ImportMemberRow| r.access_card.value().cloned();
        check_unique(&fresh, "access_card", members::CARD_TAKEN, card, &cards_taken, &mut errors);
        let named = fresh.iter().filter_map(|(i, r)| r.facility_legacy_id.value().map(|l| (*i, l.as_str())));
        let homes = facility_refs(db, gym_id, named, true, &mut errors).await?;
        errors.into_result()?;
        let default = facility.map(|f| f.id);
        let home = |r: &ImportMemberRow| match r.facility_legacy_id.value() {
            Some(legacy) => homes.get(legacy).copied().ok_or_else(no_facility),
            None => default.ok_or_else(no_facility),
        };
        let at = now();
        let mut models = Vec::with_capacity(fresh.len());
        for (_, r) in &fresh {
            models.push(members::row(gym_id, new_member(r, home(r)?), at));
        }
        planned(FieldErrors::new(), models, at)
    };
    let write = |txn: crate::db::Writing, (models, at): (Vec<member::ActiveModel>, DateTime<Utc>)| async move {
        use member::Column as C;
        let created = insert_new(&txn, models, [C::GymId, C::LegacyId], [C::Status]).await?;
        let statuses = returned::<MemberStatus>(&created, "status")?;
        members::count(&txn, gym_id, Change::Added(statuses)).await?;
        finish(txn, batch, created.len(), at).await
    };
    run(db, batch, validate, write).await
}

/// A value the new rows must each hold alone (`value` of a row: its email, its access card): free
/// in the gym (`taken` holds those in use), and once in the batch.
fn check_unique<T>(
    fresh: &[(usize, &ImportMemberRow)],
    name: &str,
    taken_message: &str,
    value: impl Fn(&ImportMemberRow) -> Option<String>,
    taken: &HashMap<String, T>,
    errors: &mut FieldErrors,
) {
    let mut in_batch: HashMap<String, usize> = HashMap::new();
    for (i, v) in fresh.iter().filter_map(|(i, r)| value(r).map(|v| (*i, v))) {
        if taken.contains_key(&v) {
            errors.add(field(i, name), taken_message);
        } else if let Some(first) = in_batch.insert(v, i) {
            errors.add(field(i, name), twice(name, first));
        }
    }
}

fn new_member(r: &ImportMemberRow, facility_id: Uuid) -> NewMember {
    NewMember {
        first_name: r.first_name.clone(),
        last_name: r.last_name.clone(),
        email: r.email.value().map(|e| e.0.clone()),
        phone: r.phone.value().cloned(),
        gender: r.gender.value().cloned(),
        date_of_birth: r.date_of_birth.value().map(|d| d.0),
        city: r.city.value().cloned(),
        country: r.country.value().cloned(),
        status: r.status.map_or(MemberStatus::Active, Into::into),
        facility_id,
        access_card: r.access_card.value().cloned(),
        legacy_id: Some(r.legacy_id.clone()),
    }
}
