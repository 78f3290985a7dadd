//! Deliveries: sent again on request, listed for the settings area, counted by day.

use chrono::{DateTime, Duration, Utc};
use entity::ids::GymId;
use entity::{states::DeliveryStatus, webhook_delivery};
use sea_orm::{ColumnTrait, ConnectionTrait, DbErr, EntityTrait, QueryFilter, QueryOrder};
use uuid::Uuid;

use crate::{
    accounts::{self, Actor},
    records::now,
};

/// Queues a delivery of `gym_id` for an immediate attempt, whatever its state; `None` if the gym has
/// no such delivery. The dispatcher sees `updated_at` move and keeps the delivery pending even if
/// an attempt is in flight.
pub async fn redeliver(
    db: &impl ConnectionTrait,
    gym_id: GymId,
    delivery_id: Uuid,
) -> Result<Option<webhook_delivery::Model>, DbErr> {
    use sea_orm::sea_query::Expr;
    use webhook_delivery::Column as C;
    let at = now();
    let updated = webhook_delivery::Entity::update_many()
        .col_expr(C::Status, Expr::value(DeliveryStatus::Pending.as_str()))
        .col_expr(C::NextAttemptAt, Expr::value(Some(at)))
        .col_expr(C::UpdatedAt, Expr::value(at))
        .filter(C::GymId.eq(gym_id))
        .filter(C::Id.eq(delivery_id))
        .exec(db)
        .await?;
    if updated.rows_affected == 0 {
        return Ok(None);
    }
    webhook_delivery::Entity::find_by_id((gym_id, delivery_id)).one(db).await
}

/// The newest deliveries of a gym and of its sandbox, for the settings area.
pub async fn recent_deliveries(
    db: &impl ConnectionTrait,
    actor: &Actor,
    gym_id: GymId,
    limit: u64,
) -> accounts::Result<Vec<webhook_delivery::Model>> {
    use sea_orm::QuerySelect;
    actor.require_view(gym_id)?;
    let mut all = Vec::new();
    for gym in accounts::with_sandbox(db, gym_id).await? {
        all.extend(
            webhook_delivery::Entity::find()
                .filter(webhook_delivery::Column::GymId.eq(gym))
                .order_by_desc(webhook_delivery::Column::CreatedAt)
                .order_by_desc(webhook_delivery::Column::Id)
                .limit(limit)
                .all(db)
                .await?,
        );
    }
    all.sort_by_key(|d| std::cmp::Reverse((d.created_at, d.id)));
    all.truncate(usize::try_from(limit).unwrap_or(usize::MAX));
    Ok(all)
}

/// Deliveries per day (UTC) of the last `days` days by outcome: `(day, delivered, pending,
/// failed)`, oldest first, every day present.
pub async fn daily_outcomes(
    db: &impl ConnectionTrait,
    gym_id: GymId,
    days: i64,
) -> accounts::Result<Vec<(chrono::NaiveDate, i64, i64, i64)>> {
    use sea_orm::QuerySelect;
    let today = Utc::now().date_naive();
    let first = today - Duration::days(days - 1);
    let since = first.and_hms_opt(0, 0, 0).map(|t| t.and_utc()).unwrap_or_else(Utc::now);
    let mut rows: Vec<(DateTime<Utc>, DeliveryStatus)> = Vec::new();
    for gym in accounts::with_sandbox(db, gym_id).await? {
        let found: Vec<(DateTime<Utc>, DeliveryStatus)> = webhook_delivery::Entity::find()
            .select_only()
            .column(webhook_delivery::Column::CreatedAt)
            .column(webhook_delivery::Column::Status)
            .filter(webhook_delivery::Column::GymId.eq(gym))
            .filter(webhook_delivery::Column::CreatedAt.gte(since))
            .into_tuple()
            .all(db)
            .await?;
        rows.extend(found);
    }
    let mut out: Vec<(chrono::NaiveDate, i64, i64, i64)> =
        (0..days).map(|i| (first + Duration::days(i), 0, 0, 0)).collect();
    for (at, status) in rows {
        let Ok(i) = usize::try_from((at.date_naive() - first).num_days()) else { continue };
        let Some(day) = out.get_mut(i) else { continue };
        match status {
            DeliveryStatus::Delivered => day.1 += 1,
            DeliveryStatus::Failed => day.3 += 1,
            DeliveryStatus::Pending => day.2 += 1,
        }
    }
    Ok(out)
}
