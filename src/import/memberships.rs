//! `POST /import/memberships`: the members' holdings of plans, referring to both by legacy id.

use chrono::{DateTime, Utc};
use entity::ids::GymId;
use entity::member_membership;
use sea_orm::ActiveValue::Set;

use super::{
    batch::{Batch, field, finish, fresh_rows, missing, planned, run},
    members::member_refs,
    plans::plan_refs,
    sql::{Legacy, insert_new},
};
use crate::{
    counters,
    db::Db,
    errors::{ApiError, FieldErrors},
    openapi::{ImportEntity, ImportMembershipRow, ImportResult, PlanKind},
    records::{new_id, now},
};

pub async fn memberships(
    db: &Db,
    gym_id: GymId,
    rows: Vec<ImportMembershipRow>,
    dry_run: bool,
) -> Result<ImportResult, ApiError> {
    let batch = Batch { gym_id, entity: ImportEntity::Memberships, received: rows.len(), dry_run };
    let validate = || async {
        use member_membership::{Column as C, Entity};
        let mut errors = FieldErrors::new();
        let table = Legacy { gym: C::GymId, legacy: C::LegacyId, id: C::Id, extra: C::Id, scope: None };
        let fresh = fresh_rows::<Entity, _>(db, table, gym_id, &rows, |r| r.legacy_id.as_str(), &mut errors).await?;
        let (members, plans) = tokio::try_join!(
            member_refs(db, gym_id, fresh.iter().map(|(_, r)| r.member_legacy_id.as_str()).collect()),
            plan_refs(db, gym_id, fresh.iter().map(|(_, r)| r.plan_legacy_id.as_str()).collect()),
        )?;
        let at = now();
        let mut models = Vec::with_capacity(fresh.len());
        for (i, r) in fresh {
            let member = members.get(&r.member_legacy_id);
            let plan = plans.get(&r.plan_legacy_id);
            if member.is_none() {
                errors.add(field(i, "member_legacy_id"), missing("member", &r.member_legacy_id));
            }
            if plan.is_none() {
                errors.add(field(i, "plan_legacy_id"), missing("plan", &r.plan_legacy_id));
            }
            if let Some(end) = r.ends_on.value()
                && end.0 < r.starts_on.0
            {
                errors.add(field(i, "ends_on"), "The ends_on must be on or after starts_on.");
            }
            let (Some((member_id, _)), Some((plan_id, kind))) = (member, plan) else { continue };
            models.push(member_membership::ActiveModel {
                id: Set(new_id()),
                gym_id: Set(gym_id),
                member_id: Set(*member_id),
                membership_plan_id: Set((*kind == PlanKind::Membership).then_some(*plan_id)),
                subscription_plan_id: Set((*kind == PlanKind::Subscription).then_some(*plan_id)),
                starts_on: Set(r.starts_on.0),
                ends_on: Set(r.ends_on.value().map(|d| d.0)),
                legacy_id: Set(Some(r.legacy_id.clone())),
                created_at: Set(at),
                updated_at: Set(at),
            });
        }
        planned(errors, models, at)
    };
    let write = |txn: crate::db::Writing, (models, at): (Vec<member_membership::ActiveModel>, DateTime<Utc>)| async move {
        use member_membership::Column as C;
        let created = insert_new(&txn, models, [C::GymId, C::LegacyId], [C::Id]).await?;
        if !created.is_empty() {
            counters::add_many(&txn, gym_id, &[counters::memberships_written()]).await?;
        }
        finish(txn, batch, created.len(), at).await
    };
    run(db, batch, validate, write).await
}
