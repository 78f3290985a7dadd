//! `POST /import/products` and `POST /import/purchases`: the shop's catalogue, and its sales,
//! which may refer to a member and a product by legacy id.

use std::collections::{HashMap, HashSet};

use chrono::{DateTime, Utc};
use entity::ids::{GymId, MemberId};
use entity::{
    product, purchase,
    states::{PaymentStatus, ProductStatus},
};
use sea_orm::{ActiveValue::Set, ConnectionTrait, DbErr};
use uuid::Uuid;

use super::{
    batch::{Batch, check_amount, check_batch_ids, field, finish, fresh_rows, missing, planned, run, write_counted},
    facilities::facility_refs,
    members::member_refs,
    sql::{Legacy, insert_new, lookup},
};
use crate::{
    counters,
    db::Db,
    errors::{ApiError, FieldErrors},
    openapi::{ImportEntity, ImportProductRow, ImportPurchaseRow, ImportResult},
    purchases::Change,
    records::{new_id, now},
};

pub async fn products(
    db: &Db,
    gym_id: GymId,
    rows: Vec<ImportProductRow>,
    dry_run: bool,
) -> Result<ImportResult, ApiError> {
    let batch = Batch { gym_id, entity: ImportEntity::Products, received: rows.len(), dry_run };
    let validate = || async {
        let mut errors = FieldErrors::new();
        check_batch_ids(rows.iter().map(|r| r.legacy_id.as_str()), &mut errors);
        for (i, r) in rows.iter().enumerate() {
            check_amount(i, "price", r.price.amount, &mut errors);
        }
        errors.into_result()?;
        let existing = product_refs(db, gym_id, rows.iter().map(|r| r.legacy_id.as_str()).collect()).await?;
        let at = now();
        let models: Vec<product::ActiveModel> = rows
            .iter()
            .filter(|r| !existing.contains_key(&r.legacy_id))
            .map(|r| product::ActiveModel {
                id: Set(new_id()),
                gym_id: Set(gym_id),
                name: Set(r.name.clone()),
                description: Set(r.description.value().cloned()),
                sku: Set(r.sku.value().cloned()),
                price_amount: Set(r.price.amount),
                currency: Set(r.price.currency.clone()),
                status: Set(r.status.map_or(ProductStatus::Active, Into::into)),
                legacy_id: Set(Some(r.legacy_id.clone())),
                created_at: Set(at),
                updated_at: Set(at),
            })
            .collect();
        planned(FieldErrors::new(), models, at)
    };
    let write = |txn, (models, at): (Vec<product::ActiveModel>, DateTime<Utc>)| {
        use product::Column as C;
        write_counted(txn, batch, models, [C::GymId, C::LegacyId], C::Status, counters::PRODUCT_ROWS, at)
    };
    run(db, batch, validate, write).await
}

async fn product_refs(
    db: &impl ConnectionTrait,
    gym_id: GymId,
    ids: HashSet<&str>,
) -> Result<HashMap<String, (Uuid, String)>, DbErr> {
    use product::Column as C;
    let table = Legacy { gym: C::GymId, legacy: C::LegacyId, id: C::Id, extra: C::Status, scope: None };
    lookup::<product::Entity, String>(db, table, gym_id, ids).await
}

pub async fn purchases(
    db: &Db,
    gym_id: GymId,
    rows: Vec<ImportPurchaseRow>,
    dry_run: bool,
) -> Result<ImportResult, ApiError> {
    let batch = Batch { gym_id, entity: ImportEntity::Purchases, received: rows.len(), dry_run };
    let validate = || async {
        use purchase::{Column as C, Entity};
        let mut errors = FieldErrors::new();
        let table = Legacy { gym: C::GymId, legacy: C::LegacyId, id: C::Id, extra: C::Id, scope: None };
        let fresh = fresh_rows::<Entity, _>(db, table, gym_id, &rows, |r| r.legacy_id.as_str(), &mut errors).await?;
        let (members, products) = tokio::try_join!(
            member_refs(
                db,
                gym_id,
                fresh.iter().filter_map(|(_, r)| r.member_legacy_id.value().map(String::as_str)).collect()
            ),
            product_refs(
                db,
                gym_id,
                fresh.iter().filter_map(|(_, r)| r.product_legacy_id.value().map(String::as_str)).collect()
            ),
        )?;
        for (i, r) in &fresh {
            check_amount(*i, "total", r.total.amount, &mut errors);
        }
        let named = fresh.iter().filter_map(|(i, r)| r.facility_legacy_id.value().map(|l| (*i, l.as_str())));
        let places = facility_refs(db, gym_id, named, false, &mut errors).await?;
        // A reference given must name a row imported earlier; none given is none.
        let mut resolve = |i: usize, name: &str, kind: &str, legacy: Option<&String>, found: Option<Uuid>| match legacy
        {
            Some(legacy) if found.is_none() => {
                errors.add(field(i, name), missing(kind, legacy));
                None
            }
            _ => found,
        };
        let at = now();
        let mut models = Vec::with_capacity(fresh.len());
        for (i, r) in fresh {
            let (member, product) = (r.member_legacy_id.value(), r.product_legacy_id.value());
            let member_id = resolve(
                i,
                "member_legacy_id",
                "member",
                member,
                member.and_then(|l| members.get(l)).map(|m| m.0.uuid()),
            );
            let product_id =
                resolve(i, "product_legacy_id", "product", product, product.and_then(|l| products.get(l)).map(|p| p.0));
            models.push(purchase::ActiveModel {
                id: Set(new_id()),
                gym_id: Set(gym_id),
                member_id: Set(member_id.map(MemberId::from)),
                product_id: Set(product_id),
                description: Set(r.description.clone()),
                quantity: Set(r.quantity.unwrap_or(1)),
                total_amount: Set(r.total.amount),
                currency: Set(r.total.currency.clone()),
                payment_status: Set(PaymentStatus::from(r.payment_status)),
                purchased_at: Set(crate::records::to_micros(r.purchased_at)),
                legacy_id: Set(Some(r.legacy_id.clone())),
                created_at: Set(at),
                updated_at: Set(at),
                device_id: Set(None),
                facility_id: Set(r.facility_legacy_id.value().and_then(|l| places.get(l).copied())),
                receipt_number: Set(None),
            });
        }
        planned(errors, models, at)
    };
    let write = |txn: crate::db::Writing, (models, at): (Vec<purchase::ActiveModel>, DateTime<Utc>)| async move {
        use purchase::Column as C;
        let created = insert_new(&txn, models, [C::GymId, C::LegacyId], [C::PaymentStatus, C::PurchasedAt]).await?;
        let sales = created
            .iter()
            .map(|row| Ok((row.try_get("", "payment_status")?, row.try_get("", "purchased_at")?)))
            .collect::<Result<Vec<(PaymentStatus, DateTime<Utc>)>, DbErr>>()?;
        let backend = txn.get_database_backend();
        for statement in crate::purchases::count_statements(backend, gym_id, Change::Added(sales)) {
            txn.execute(statement).await?;
        }
        finish(txn, batch, created.len(), at).await
    };
    run(db, batch, validate, write).await
}
