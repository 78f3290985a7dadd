//! `POST /import/facilities`: the gym's locations, before the kinds that name them by
//! `facility_legacy_id`.

use std::collections::{HashMap, HashSet};

use chrono::{DateTime, Utc};
use entity::facility;
use entity::ids::GymId;
use sea_orm::{ConnectionTrait, DbErr};
use uuid::Uuid;

use super::{
    batch::{Batch, field, finish, fresh_rows, missing, planned, run},
    sql::{Legacy, insert_new, lookup},
};
use crate::{
    db::Db,
    errors::{ApiError, FieldErrors},
    facilities::{self, FacilityError, NewFacility},
    openapi::{ImportEntity, ImportFacilityRow, ImportResult},
    records::now,
};

pub async fn facilities(
    db: &Db,
    gym_id: GymId,
    rows: Vec<ImportFacilityRow>,
    dry_run: bool,
) -> Result<ImportResult, ApiError> {
    let batch = Batch { gym_id, entity: ImportEntity::Facilities, received: rows.len(), dry_run };
    let validate = || async {
        let mut errors = FieldErrors::new();
        use facility::Column as C;
        let table = Legacy { gym: C::GymId, legacy: C::LegacyId, id: C::Id, extra: C::Id, scope: None };
        let fresh = fresh_rows::<facility::Entity, _>(db, table, gym_id, &rows, |r| &r.legacy_id, &mut errors).await?;
        let at = now();
        let mut models = Vec::with_capacity(fresh.len());
        for (i, r) in fresh {
            let new = NewFacility {
                name: r.name.clone(),
                timezone: r.timezone.value().cloned(),
                address: r.address.value().cloned(),
                legacy_id: Some(r.legacy_id.clone()),
            };
            match facilities::checked(new) {
                Ok(new) => models.push(facilities::row(gym_id, new, at)),
                Err(FacilityError::Invalid(name, message)) => errors.add(field(i, name), message),
                Err(e) => return Err(ApiError::from(e)),
            }
        }
        planned(errors, models, at)
    };
    let write = |txn: crate::db::Writing, (models, at): (Vec<facility::ActiveModel>, DateTime<Utc>)| async move {
        use facility::Column as C;
        let created = insert_new(&txn, models, [C::GymId, C::LegacyId], [C::Id]).await?;
        finish(txn, batch, created.len(), at).await
    };
    run(db, batch, validate, write).await
}

/// The facilities a batch names by `facility_legacy_id`: `legacy_id -> (id, open)`; a name not
/// imported is a 422 on the row's `facility_legacy_id`, and so is an archived facility where
/// `must_be_open` (a member's home; history may name an archived one).
pub(super) async fn facility_refs<'a>(
    db: &impl ConnectionTrait,
    gym_id: GymId,
    named: impl Iterator<Item = (usize, &'a str)> + Clone,
    must_be_open: bool,
    errors: &mut FieldErrors,
) -> Result<HashMap<String, Uuid>, DbErr> {
    use facility::Column as C;
    let table = Legacy { gym: C::GymId, legacy: C::LegacyId, id: C::Id, extra: C::OpenId, scope: None };
    let keys: HashSet<&str> = named.clone().map(|(_, l)| l).collect();
    let found = lookup::<facility::Entity, Option<Uuid>>(db, table, gym_id, keys).await?;
    for (i, legacy) in named {
        match found.get(legacy) {
            None => errors.add(field(i, "facility_legacy_id"), missing("facility", legacy)),
            Some((_, None)) if must_be_open => {
                errors.add(field(i, "facility_legacy_id"), format!("The facility \"{legacy}\" is archived."))
            }
            Some(_) => {}
        }
    }
    Ok(found.into_iter().map(|(legacy, (id, _))| (legacy, id)).collect())
}
