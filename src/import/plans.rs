//! `POST /import/plans`: membership plans and subscription plans, which share one legacy id space:
//! a plan's legacy id is unique across the two tables.

use std::collections::{HashMap, HashSet};

use chrono::{DateTime, Utc};
use entity::ids::GymId;
use entity::{membership_plan, states::PlanStatus, subscription_plan};
use sea_orm::{ActiveValue::Set, ConnectionTrait, DbErr};
use uuid::Uuid;

use super::{
    batch::{Batch, check_amount, check_batch_ids, finish, run},
    sql::{Legacy, add_counts, insert_new, lookup, returned},
};
use crate::{
    counters,
    db::Db,
    errors::{ApiError, FieldErrors},
    openapi::{
        ImportEntity, ImportMembershipPlanRow, ImportPlanRow, ImportResult, ImportSubscriptionPlanRow, PlanKind,
    },
    records::{new_id, now},
};

type Plans = (Vec<membership_plan::ActiveModel>, Vec<subscription_plan::ActiveModel>, DateTime<Utc>);

/// A row's legacy id, whichever its kind.
fn legacy_id(r: &ImportPlanRow) -> &str {
    match r {
        ImportPlanRow::Membership(m) => &m.legacy_id,
        ImportPlanRow::Subscription(s) => &s.legacy_id,
    }
}

pub async fn plans(db: &Db, gym_id: GymId, rows: Vec<ImportPlanRow>, dry_run: bool) -> Result<ImportResult, ApiError> {
    let batch = Batch { gym_id, entity: ImportEntity::Plans, received: rows.len(), dry_run };
    let validate = || async {
        let mut errors = FieldErrors::new();
        check_batch_ids(rows.iter().map(legacy_id), &mut errors);
        for (i, r) in rows.iter().enumerate() {
            let price = match r {
                ImportPlanRow::Membership(m) => m.price.amount,
                ImportPlanRow::Subscription(s) => s.price.amount,
            };
            check_amount(i, "price", price, &mut errors);
        }
        let existing = plan_refs(db, gym_id, rows.iter().map(legacy_id).collect()).await?;
        errors.into_result()?;
        let at = now();
        let (mut memberships, mut subscriptions) = (Vec::new(), Vec::new());
        for r in rows.iter().filter(|r| !existing.contains_key(legacy_id(r))) {
            match r {
                ImportPlanRow::Membership(m) => memberships.push(membership(gym_id, m, at)),
                ImportPlanRow::Subscription(s) => subscriptions.push(subscription(gym_id, s, at)),
            }
        }
        let fresh = memberships.len() + subscriptions.len();
        Ok(((memberships, subscriptions, at), fresh))
    };
    let write = |txn: crate::db::Writing, (memberships, subscriptions, at): Plans| async move {
        use membership_plan::Column as M;
        use subscription_plan::Column as S;
        let m = insert_new(&txn, memberships, [M::GymId, M::LegacyId], [M::Status]).await?;
        let s = insert_new(&txn, subscriptions, [S::GymId, S::LegacyId], [S::Status]).await?;
        add_counts(&txn, gym_id, counters::MEMBERSHIP_PLAN_ROWS, &returned::<String>(&m, "status")?).await?;
        add_counts(&txn, gym_id, counters::SUBSCRIPTION_PLAN_ROWS, &returned::<String>(&s, "status")?).await?;
        finish(txn, batch, m.len() + s.len(), at).await
    };
    run(db, batch, validate, write).await
}

fn membership(gym_id: GymId, r: &ImportMembershipPlanRow, at: DateTime<Utc>) -> membership_plan::ActiveModel {
    membership_plan::ActiveModel {
        id: Set(new_id()),
        gym_id: Set(gym_id),
        name: Set(r.name.clone()),
        description: Set(r.description.value().cloned()),
        price_amount: Set(r.price.amount),
        currency: Set(r.price.currency.clone()),
        duration_days: Set(r.duration_days.value().copied()),
        visit_limit: Set(r.visit_limit.value().copied()),
        status: Set(r.status.map_or(PlanStatus::Active, Into::into)),
        legacy_id: Set(Some(r.legacy_id.clone())),
        created_at: Set(at),
        updated_at: Set(at),
    }
}

fn subscription(gym_id: GymId, r: &ImportSubscriptionPlanRow, at: DateTime<Utc>) -> subscription_plan::ActiveModel {
    subscription_plan::ActiveModel {
        id: Set(new_id()),
        gym_id: Set(gym_id),
        name: Set(r.name.clone()),
        description: Set(r.description.value().cloned()),
        price_amount: Set(r.price.amount),
        currency: Set(r.price.currency.clone()),
        billing_interval: Set(r.billing_interval.into()),
        billing_interval_count: Set(r.billing_interval_count.unwrap_or(1)),
        status: Set(r.status.map_or(PlanStatus::Active, Into::into)),
        legacy_id: Set(Some(r.legacy_id.clone())),
        created_at: Set(at),
        updated_at: Set(at),
    }
}

/// `legacy_id -> (plan id, kind)` over both plan tables.
pub(super) async fn plan_refs(
    db: &impl ConnectionTrait,
    gym_id: GymId,
    ids: HashSet<&str>,
) -> Result<HashMap<String, (Uuid, PlanKind)>, DbErr> {
    use membership_plan::{Column as M, Entity as Memberships};
    use subscription_plan::{Column as S, Entity as Subscriptions};
    let (m, s) = tokio::try_join!(
        lookup::<Memberships, String>(
            db,
            Legacy { gym: M::GymId, legacy: M::LegacyId, id: M::Id, extra: M::Status, scope: None },
            gym_id,
            ids.clone(),
        ),
        lookup::<Subscriptions, String>(
            db,
            Legacy { gym: S::GymId, legacy: S::LegacyId, id: S::Id, extra: S::Status, scope: None },
            gym_id,
            ids,
        ),
    )?;
    let mut out: HashMap<String, (Uuid, PlanKind)> =
        s.into_iter().map(|(l, (id, _))| (l, (id, PlanKind::Subscription))).collect();
    out.extend(m.into_iter().map(|(l, (id, _))| (l, (id, PlanKind::Membership))));
    Ok(out)
}
