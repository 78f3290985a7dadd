//! Bulk import from a previous gym system: `POST /import/{entity}` (this module) and the migration
//! client `gymapi import` ([`client`]).
//!
//! A batch is validated whole before anything is written: every row whose `legacy_id` is new must
//! be valid and its references (`member_legacy_id`, ...) must name rows imported earlier. The
//! lookups are one query per referenced kind per batch. The write is one transaction: one
//! multi-row `INSERT ... ON CONFLICT (gym_id, legacy_id) DO NOTHING RETURNING ...` per table, the
//! list counters, the member visit figures and the import counters. Rows another request inserted
//! meanwhile are skipped by the conflict clause, so `created` is always what this batch wrote.

pub mod client;

use std::collections::{HashMap, HashSet};

use chrono::{DateTime, Utc};
use entity::{
    attendance, import_counter, member, member_membership, membership_plan, product, purchase, subscription_plan,
};
use sea_orm::{
    ActiveModelTrait, ColumnTrait, ConnectionTrait, DatabaseConnection, DbBackend, DbErr, EntityTrait, QueryFilter,
    QuerySelect, Set, Statement, TransactionTrait,
};
use uuid::Uuid;

use crate::{
    accounts,
    api::search_text,
    counters::{self, Counted},
    db::is_unique_violation,
    db::placeholders,
    errors::{ApiError, FieldErrors},
    openapi::{
        ImportAttendanceRow, ImportEntity, ImportEntityStatus, ImportMemberRow, ImportMembershipRow, ImportPlanRow,
        ImportProductRow, ImportPurchaseRow, ImportResult, ImportResultObject, ImportStatus, ImportStatusObject,
        PlanKind,
    },
    records::{new_id, now},
    webhooks::{self, EventType},
};

/// What a batch did (or, dry, would do).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Tally {
    received: i64,
    created: i64,
}

impl Tally {
    fn result(self, entity: ImportEntity, dry_run: bool) -> ImportResult {
        ImportResult {
            object: ImportResultObject::ImportResult,
            entity,
            dry_run,
            received: self.received,
            created: self.created,
            skipped: self.received - self.created,
        }
    }
}

fn count(n: usize) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// The field of row `i`, as the 422 body names it (`rows.12.email`).
fn field(i: usize, name: &str) -> String {
    format!("rows.{i}.{name}")
}

/// Flags a `legacy_id` that appears twice in one batch (on the later row).
fn check_batch_ids<'a>(ids: impl Iterator<Item = &'a str>, errors: &mut FieldErrors) {
    let mut seen: HashMap<&str, usize> = HashMap::new();
    for (i, id) in ids.enumerate() {
        if let Some(first) = seen.insert(id, i) {
            errors.add(
                field(i, "legacy_id"),
                format!("The legacy_id appears more than once in this batch (row {first})."),
            );
        }
    }
}

fn missing(kind: &str, legacy_id: &str) -> String {
    format!("No {kind} with legacy_id \"{legacy_id}\" has been imported.")
}

/// A lookup of a table's rows by a unique key within the gym: `key` (the legacy id, or the
/// normalized email), narrowed by `scope` where the unique key has a middle column (attendance's
/// `kind`); it reads `id` and one more value, `extra`.
struct Legacy<C> {
    gym: C,
    legacy: C,
    id: C,
    extra: C,
    scope: Option<(C, &'static str)>,
}

/// `key -> (id, extra)` of the gym's rows of one table among `keys`, in one query.
///
/// On PostgreSQL each key is a probe of the unique index (`CROSS JOIN LATERAL` over the keys), so the
/// cost follows the batch, never the gym: a plain `IN (...)` is planned from statistics, and
/// during a first import they say the table is empty, which turns it into a scan of the gym. The
/// `LIMIT 1` (a no-op: the key is unique) keeps the planner from flattening the lateral subquery
/// into a join: with statistics taken while the table was small, it chose a hash join over the
/// whole gym (931 ms for 500 keys against 521,500 check-ins, instead of 5 ms).
async fn lookup<E, X>(
    db: &impl ConnectionTrait,
    Legacy { gym, legacy, id, extra, scope }: Legacy<E::Column>,
    gym_id: Uuid,
    keys: HashSet<&str>,
) -> Result<HashMap<String, (Uuid, X)>, DbErr>
where
    E: EntityTrait,
    X: sea_orm::TryGetable,
    (Uuid, String, X): sea_orm::TryGetableMany,
{
    use sea_orm::{IdenStatic, TryGetableMany};
    if keys.is_empty() {
        return Ok(HashMap::new());
    }
    let backend = db.get_database_backend();
    if backend == DbBackend::Postgres {
        let table = E::default().table_name().to_string();
        let mut values: Vec<sea_orm::Value> = vec![gym_id.into()];
        let scope_sql = match scope {
            Some((column, value)) => {
                values.push(value.into());
                format!(" AND \"{}\" = $2", column.as_str())
            }
            None => String::new(),
        };
        // The keys are one JSON parameter: no statement with hundreds of placeholders to number.
        let list = format!("${}", values.len() + 1);
        values.push(serde_json::Value::from(keys.into_iter().collect::<Vec<&str>>()).into());
        let (id, key, extra, gym) = (id.as_str(), legacy.as_str(), extra.as_str(), gym.as_str());
        let sql = format!(
            "SELECT t.a, t.b, t.c FROM jsonb_array_elements_text({list}) AS k(v) \
             CROSS JOIN LATERAL (SELECT \"{id}\" AS a, \"{key}\" AS b, \"{extra}\" AS c FROM \"{table}\" \
             WHERE \"{gym}\" = $1{scope_sql} AND \"{key}\" = k.v LIMIT 1) AS t"
        );
        let found = db.query_all(Statement::from_sql_and_values(backend, sql, values)).await?;
        let mut out = HashMap::with_capacity(found.len());
        for row in found {
            let (id, key, x) = <(Uuid, String, X)>::try_get_many(&row, "", &["a".into(), "b".into(), "c".into()])
                .map_err(|e| DbErr::Type(format!("{e:?}")))?;
            out.insert(key, (id, x));
        }
        return Ok(out);
    }
    let mut q = E::find()
        .select_only()
        .column(id)
        .column(legacy)
        .column(extra)
        .filter(gym.eq(gym_id))
        .filter(legacy.is_in(keys.into_iter().map(str::to_owned)));
    if let Some((column, value)) = scope {
        q = q.filter(column.eq(value));
    }
    let rows: Vec<(Uuid, String, X)> = q.into_tuple().all(db).await?;
    Ok(rows.into_iter().map(|(id, legacy, x)| (legacy, (id, x))).collect())
}

/// The rows of a batch whose legacy id is not in `table` yet, with their index in the batch (one
/// query); a legacy id twice in the batch is flagged in `errors`.
async fn fresh_rows<'r, E, R>(
    db: &impl ConnectionTrait,
    table: Legacy<E::Column>,
    gym_id: Uuid,
    rows: &'r [R],
    legacy_id: impl Fn(&R) -> &str,
    errors: &mut FieldErrors,
) -> Result<Vec<(usize, &'r R)>, DbErr>
where
    E: EntityTrait,
{
    check_batch_ids(rows.iter().map(&legacy_id), errors);
    let existing = lookup::<E, Uuid>(db, table, gym_id, rows.iter().map(&legacy_id).collect()).await?;
    Ok(rows.iter().enumerate().filter(|(_, r)| !existing.contains_key(legacy_id(r))).collect())
}

/// Inserts the rows that are new, in one statement, and returns `returning` of each row written;
/// rows whose unique key exists are left alone (another request may have written them meanwhile).
///
/// The statement is written here rather than by sea-query: with 500 rows of up to 19 columns,
/// sea-query wrapped, cloned and dropped each of the 9,500 values several times: about 16% of the
/// request threads' `perf` samples over `bench/import`. The values go to the driver as they are.
///
/// On PostgreSQL the placeholders are numbered as they are written, and a column whose value is
/// the same in every row (the gym, the facility, the times, the counters) is one parameter that
/// every row names. A members batch binds about 6,000 values instead of 9,500, and sea-orm
/// clones, and the driver encodes, only those.
async fn insert_new<A>(
    db: &impl ConnectionTrait,
    models: Vec<A>,
    conflict: impl IntoIterator<Item = <A::Entity as EntityTrait>::Column>,
    returning: impl IntoIterator<Item = <A::Entity as EntityTrait>::Column>,
) -> Result<Vec<sea_orm::QueryResult>, DbErr>
where
    A: ActiveModelTrait + Send,
{
    use sea_orm::{IdenStatic, Iterable};
    use std::fmt::Write as _;
    let Some(first) = models.first() else { return Ok(Vec::new()) };
    let columns: Vec<_> = <A::Entity as EntityTrait>::Column::iter().filter(|c| !first.get(*c).is_not_set()).collect();
    let names = |cols: &mut dyn Iterator<Item = <A::Entity as EntityTrait>::Column>| {
        cols.map(|c| format!("\"{}\"", c.as_str())).collect::<Vec<_>>().join(", ")
    };
    let backend = db.get_database_backend();
    let numbered = backend == DbBackend::Postgres;
    // Each row's values, taken out of its model (not cloned).
    let mut rows: Vec<Vec<sea_orm::Value>> = Vec::with_capacity(models.len());
    for (i, mut model) in models.into_iter().enumerate() {
        let row = columns
            .iter()
            .map(|column| {
                model
                    .take(*column)
                    .into_value()
                    .ok_or_else(|| DbErr::Custom(format!("import row {i} has no value for {}", column.as_str())))
            })
            .collect::<Result<Vec<_>, _>>()?;
        rows.push(row);
    }
    let mut values: Vec<sea_orm::Value> = Vec::with_capacity(rows.len() * columns.len());
    // Per column: the parameter number every row names, where every row has the first row's value.
    let mut shared: Vec<Option<usize>> = vec![None; columns.len()];
    if numbered && rows.len() > 1 {
        for (j, number) in shared.iter_mut().enumerate() {
            if rows.iter().all(|row| row[j] == rows[0][j]) {
                values.push(rows[0][j].clone());
                *number = Some(values.len());
            }
        }
    }
    let mut sql = format!(
        "INSERT INTO \"{}\" ({}) VALUES ",
        sea_orm::EntityName::table_name(&<A::Entity as Default>::default()),
        names(&mut columns.iter().copied())
    );
    for (i, row) in rows.into_iter().enumerate() {
        sql.push_str(if i == 0 { "(" } else { ", (" });
        for (j, value) in row.into_iter().enumerate() {
            if j > 0 {
                sql.push_str(", ");
            }
            let number = match shared[j] {
                Some(n) => n,
                None => {
                    values.push(value);
                    values.len()
                }
            };
            if numbered {
                let _ = write!(sql, "${number}");
            } else {
                sql.push('?');
            }
        }
        sql.push(')');
    }
    let _ = write!(
        sql,
        " ON CONFLICT ({}) DO NOTHING RETURNING {}",
        names(&mut conflict.into_iter()),
        names(&mut returning.into_iter())
    );
    db.query_all(Statement::from_sql_and_values(backend, sql, values)).await
}

/// One column of the rows [`insert_new`] returned.
fn returned<T: sea_orm::TryGetable>(rows: &[sea_orm::QueryResult], column: &str) -> Result<Vec<T>, DbErr> {
    rows.iter().map(|r| r.try_get::<T>("", column)).collect()
}

/// Adds the rows just written to a list's counters (the total, one per label value and the list's
/// version, if it has one), in one statement.
async fn add_counts(db: &impl ConnectionTrait, gym_id: Uuid, list: Counted, labels: &[String]) -> Result<(), DbErr> {
    let mut by_label: HashMap<&str, i64> = HashMap::new();
    for label in labels {
        *by_label.entry(label).or_default() += 1;
    }
    let mut deltas = vec![(list.name(None), count(labels.len()))];
    deltas.extend(by_label.into_iter().map(|(label, n)| (list.name(Some(label)), n)));
    if !labels.is_empty() {
        deltas.extend(list.written());
    }
    counters::add_many(db, gym_id, &deltas).await
}

/// Adds a batch to the import counters of `GET /import/status`.
async fn record_batch(
    db: &impl ConnectionTrait,
    gym_id: Uuid,
    entity: ImportEntity,
    tally: Tally,
    at: DateTime<Utc>,
) -> Result<(), DbErr> {
    let backend = db.get_database_backend();
    let sql = placeholders(
        backend,
        "INSERT INTO import_counters (gym_id, entity, received, created, skipped, last_batch_at) \
         VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (gym_id, entity) DO UPDATE SET \
         received = import_counters.received + excluded.received, \
         created = import_counters.created + excluded.created, \
         skipped = import_counters.skipped + excluded.skipped, \
         last_batch_at = excluded.last_batch_at",
    );
    let values = [
        gym_id.into(),
        entity.as_str().into(),
        tally.received.into(),
        tally.created.into(),
        (tally.received - tally.created).into(),
        at.into(),
    ];
    db.execute(Statement::from_sql_and_values(backend, sql, values)).await?;
    Ok(())
}

/// The facility imported members and unattributed entries go to: the gym's oldest.
async fn default_facility(db: &impl ConnectionTrait, gym_id: Uuid) -> Result<Uuid, ApiError> {
    Ok(accounts::first_facility(db, gym_id).await?.ok_or_else(no_facility)?.id)
}

fn no_facility() -> ApiError {
    ApiError::invalid("rows", "This gym has no facility to place the imported records in.")
}

/// How often a batch runs at most when concurrent writers keep taking its unique values.
const RUNS: usize = 4;

/// Runs a batch: `validate` reads and checks (no writes) and returns what to write, or the 422;
/// `write` writes it in one transaction and returns the rows it created. A unique violation
/// outside `(gym_id, legacy_id)` (a concurrent request wrote the same member, or took an email,
/// meanwhile) runs the batch again: its validation then sees those rows, skipping the same member
/// and reporting another member's email as a 422.
async fn run<P, V, W, FV, FW>(
    db: &DatabaseConnection,
    entity: ImportEntity,
    received: usize,
    dry_run: bool,
    validate: V,
    write: W,
) -> Result<ImportResult, ApiError>
where
    V: Fn() -> FV,
    FV: Future<Output = Result<(P, usize), ApiError>>,
    W: Fn(sea_orm::DatabaseTransaction, P) -> FW,
    FW: Future<Output = Result<usize, DbErr>>,
{
    let received = count(received);
    for attempt in 0..RUNS {
        let (plan, fresh) = validate().await?;
        if dry_run {
            return Ok(Tally { received, created: count(fresh) }.result(entity, true));
        }
        let txn = db.begin().await?;
        match write(txn, plan).await {
            Ok(created) => return Ok(Tally { received, created: count(created) }.result(entity, false)),
            Err(e) if attempt + 1 < RUNS && is_unique_violation(&e) => continue,
            Err(e) if is_unique_violation(&e) => {
                return Err(ApiError::invalid(
                    "rows",
                    "Another request wrote a conflicting record meanwhile; resend the batch.",
                ));
            }
            Err(e) => return Err(e.into()),
        }
    }
    Err(ApiError::invalid("rows", "Another request wrote a conflicting record meanwhile; resend the batch."))
}

/// Ends a batch's transaction: counters of `GET /import/status`, then commit.
async fn finish(
    txn: sea_orm::DatabaseTransaction,
    gym_id: Uuid,
    entity: ImportEntity,
    received: usize,
    created: usize,
    at: DateTime<Utc>,
) -> Result<usize, DbErr> {
    let tally = Tally { received: count(received), created: count(created) };
    record_batch(&txn, gym_id, entity, tally, at).await?;
    let data = poem_openapi::types::ToJSON::to_json(&tally.result(entity, false)).unwrap_or_default();
    webhooks::emit(&txn, gym_id, EventType::ImportCompleted, data).await?;
    txn.commit().await?;
    Ok(created)
}

fn status_of<T: Copy>(value: Option<T>, default: T) -> T {
    value.unwrap_or(default)
}

// --- plans ---------------------------------------------------------------------------------------

/// Both plan tables share one legacy id space: a plan's legacy id is unique across the two.
pub async fn plans(
    db: &DatabaseConnection,
    gym_id: Uuid,
    rows: Vec<ImportPlanRow>,
    dry_run: bool,
) -> Result<ImportResult, ApiError> {
    let received = rows.len();
    let validate = || async {
        let mut errors = FieldErrors::new();
        check_batch_ids(rows.iter().map(|r| r.legacy_id.as_str()), &mut errors);
        let existing = plan_refs(db, gym_id, rows.iter().map(|r| r.legacy_id.as_str()).collect()).await?;
        let at = now();
        let mut memberships = Vec::new();
        let mut subscriptions = Vec::new();
        for (i, r) in rows.iter().enumerate() {
            if existing.contains_key(&r.legacy_id) {
                continue;
            }
            let status = status_of(r.status, crate::openapi::PlanStatus::Active).as_str().to_string();
            match r.kind {
                PlanKind::Membership => {
                    if r.billing_interval.is_some() {
                        errors
                            .add(field(i, "billing_interval"), "The billing_interval is for subscription plans only.");
                    }
                    if r.billing_interval_count.is_some() {
                        errors.add(
                            field(i, "billing_interval_count"),
                            "The billing_interval_count is for subscription plans only.",
                        );
                    }
                    memberships.push(membership_plan::ActiveModel {
                        id: Set(new_id()),
                        gym_id: Set(gym_id),
                        name: Set(r.name.clone()),
                        description: Set(r.description.value().cloned()),
                        price_amount: Set(r.price.amount),
                        currency: Set(r.price.currency.clone()),
                        duration_days: Set(r.duration_days.value().copied()),
                        visit_limit: Set(r.visit_limit.value().copied()),
                        status: Set(status),
                        legacy_id: Set(Some(r.legacy_id.clone())),
                        created_at: Set(at),
                        updated_at: Set(at),
                    });
                }
                PlanKind::Subscription => {
                    for (name, given) in [
                        ("duration_days", !r.duration_days.is_undefined()),
                        ("visit_limit", !r.visit_limit.is_undefined()),
                    ] {
                        if given {
                            errors.add(field(i, name), format!("The {name} is for membership plans only."));
                        }
                    }
                    let Some(interval) = r.billing_interval else {
                        errors.add(
                            field(i, "billing_interval"),
                            "The billing_interval is required for subscription plans.",
                        );
                        continue;
                    };
                    subscriptions.push(subscription_plan::ActiveModel {
                        id: Set(new_id()),
                        gym_id: Set(gym_id),
                        name: Set(r.name.clone()),
                        description: Set(r.description.value().cloned()),
                        price_amount: Set(r.price.amount),
                        currency: Set(r.price.currency.clone()),
                        billing_interval: Set(interval.as_str().to_string()),
                        billing_interval_count: Set(r.billing_interval_count.unwrap_or(1)),
                        status: Set(status),
                        legacy_id: Set(Some(r.legacy_id.clone())),
                        created_at: Set(at),
                        updated_at: Set(at),
                    });
                }
            }
        }
        errors.into_result()?;
        let fresh = memberships.len() + subscriptions.len();
        Ok(((memberships, subscriptions, at), fresh))
    };
    type Plans = (Vec<membership_plan::ActiveModel>, Vec<subscription_plan::ActiveModel>, DateTime<Utc>);
    let write = |txn: sea_orm::DatabaseTransaction, (memberships, subscriptions, at): Plans| async move {
        let m = insert_new(
            &txn,
            memberships,
            [membership_plan::Column::GymId, membership_plan::Column::LegacyId],
            [membership_plan::Column::Status],
        )
        .await?;
        let s = insert_new(
            &txn,
            subscriptions,
            [subscription_plan::Column::GymId, subscription_plan::Column::LegacyId],
            [subscription_plan::Column::Status],
        )
        .await?;
        add_counts(&txn, gym_id, counters::MEMBERSHIP_PLAN_ROWS, &returned::<String>(&m, "status")?).await?;
        add_counts(&txn, gym_id, counters::SUBSCRIPTION_PLAN_ROWS, &returned::<String>(&s, "status")?).await?;
        finish(txn, gym_id, ImportEntity::Plans, received, m.len() + s.len(), at).await
    };
    run(db, ImportEntity::Plans, received, dry_run, validate, write).await
}

/// `legacy_id -> (plan id, kind)` over both plan tables.
async fn plan_refs(
    db: &impl ConnectionTrait,
    gym_id: Uuid,
    ids: HashSet<&str>,
) -> Result<HashMap<String, (Uuid, PlanKind)>, DbErr> {
    let (m, s) = tokio::try_join!(
        lookup::<membership_plan::Entity, String>(
            db,
            Legacy {
                gym: membership_plan::Column::GymId,
                legacy: membership_plan::Column::LegacyId,
                id: membership_plan::Column::Id,
                extra: membership_plan::Column::Status,
                scope: None,
            },
            gym_id,
            ids.clone(),
        ),
        lookup::<subscription_plan::Entity, String>(
            db,
            Legacy {
                gym: subscription_plan::Column::GymId,
                legacy: subscription_plan::Column::LegacyId,
                id: subscription_plan::Column::Id,
                extra: subscription_plan::Column::Status,
                scope: None,
            },
            gym_id,
            ids,
        ),
    )?;
    let mut out: HashMap<String, (Uuid, PlanKind)> =
        s.into_iter().map(|(l, (id, _))| (l, (id, PlanKind::Subscription))).collect();
    out.extend(m.into_iter().map(|(l, (id, _))| (l, (id, PlanKind::Membership))));
    Ok(out)
}

// --- members -------------------------------------------------------------------------------------

/// Member references of a batch: `legacy_id -> (id, facility_id)`.
async fn member_refs(
    db: &impl ConnectionTrait,
    gym_id: Uuid,
    ids: HashSet<&str>,
) -> Result<HashMap<String, (Uuid, Uuid)>, DbErr> {
    lookup::<member::Entity, Uuid>(
        db,
        Legacy {
            gym: member::Column::GymId,
            legacy: member::Column::LegacyId,
            id: member::Column::Id,
            extra: member::Column::FacilityId,
            scope: None,
        },
        gym_id,
        ids,
    )
    .await
}

pub async fn members(
    db: &DatabaseConnection,
    gym_id: Uuid,
    rows: Vec<ImportMemberRow>,
    dry_run: bool,
) -> Result<ImportResult, ApiError> {
    let received = rows.len();
    let validate = || async {
        let mut errors = FieldErrors::new();
        check_batch_ids(rows.iter().map(|r| r.legacy_id.as_str()), &mut errors);
        // The three reads at once: which rows exist, which emails are taken, where members go.
        let all_emails: Vec<String> = rows.iter().filter_map(|r| r.email.value().map(|e| e.0.to_lowercase())).collect();
        let (existing, taken, facility) = tokio::try_join!(
            member_refs(db, gym_id, rows.iter().map(|r| r.legacy_id.as_str()).collect()),
            lookup::<member::Entity, Option<String>>(
                db,
                Legacy {
                    gym: member::Column::GymId,
                    legacy: member::Column::EmailNormalized,
                    id: member::Column::Id,
                    extra: member::Column::LegacyId,
                    scope: None,
                },
                gym_id,
                all_emails.iter().map(String::as_str).collect(),
            ),
            accounts::first_facility(db, gym_id),
        )?;
        // The reads ran apart, so a concurrent batch may show in one and not the other: a row whose
        // email belongs to the member of its own legacy id was imported meanwhile, and is skipped.
        let imported_meanwhile = |r: &ImportMemberRow| {
            r.email
                .value()
                .and_then(|e| taken.get(&e.0.to_lowercase()))
                .is_some_and(|(_, owner)| owner.as_deref() == Some(r.legacy_id.as_str()))
        };
        let fresh: Vec<(usize, &ImportMemberRow)> = rows
            .iter()
            .enumerate()
            .filter(|(_, r)| !existing.contains_key(&r.legacy_id) && !imported_meanwhile(r))
            .collect();
        // Emails of the new rows: free in the gym, and once in the batch.
        let emails: Vec<(usize, String)> =
            fresh.iter().filter_map(|(i, r)| r.email.value().map(|e| (*i, e.0.to_lowercase()))).collect();
        let mut in_batch: HashMap<&str, usize> = HashMap::new();
        for (i, email) in &emails {
            if taken.contains_key(email) {
                errors.add(field(*i, "email"), "The email has already been taken.");
            } else if let Some(first) = in_batch.insert(email, *i) {
                errors
                    .add(field(*i, "email"), format!("The email appears more than once in this batch (row {first})."));
            }
        }
        errors.into_result()?;
        let facility_id = match facility {
            Some(f) => f.id,
            None if fresh.is_empty() => Uuid::nil(),
            None => return Err(no_facility()),
        };
        let at = now();
        let models: Vec<member::ActiveModel> = fresh
            .iter()
            .map(|(_, r)| {
                let email = r.email.value().map(|e| e.0.clone());
                member::ActiveModel {
                    id: Set(new_id()),
                    gym_id: Set(gym_id),
                    facility_id: Set(facility_id),
                    search_text: Set(search_text(&r.first_name, &r.last_name, email.as_deref())),
                    first_name: Set(r.first_name.clone()),
                    last_name: Set(r.last_name.clone()),
                    email_normalized: Set(email.as_ref().map(|e| e.to_lowercase())),
                    email: Set(email),
                    phone: Set(r.phone.value().cloned()),
                    gender: Set(r.gender.value().cloned()),
                    date_of_birth: Set(r.date_of_birth.value().map(|d| d.0)),
                    city: Set(r.city.value().cloned()),
                    country: Set(r.country.value().cloned()),
                    status: Set(status_of(r.status, crate::openapi::MemberStatus::Active).as_str().to_string()),
                    legacy_id: Set(Some(r.legacy_id.clone())),
                    visits_count: Set(0),
                    last_visit_at: Set(None),
                    created_at: Set(at),
                    updated_at: Set(at),
                }
            })
            .collect();
        let fresh = models.len();
        Ok(((models, at), fresh))
    };
    let write = |txn: sea_orm::DatabaseTransaction, (models, at): (Vec<member::ActiveModel>, DateTime<Utc>)| async move {
        let created =
            insert_new(&txn, models, [member::Column::GymId, member::Column::LegacyId], [member::Column::Status])
                .await?;
        add_counts(&txn, gym_id, counters::MEMBER_ROWS, &returned::<String>(&created, "status")?).await?;
        finish(txn, gym_id, ImportEntity::Members, received, created.len(), at).await
    };
    run(db, ImportEntity::Members, received, dry_run, validate, write).await
}

// --- memberships ---------------------------------------------------------------------------------

pub async fn memberships(
    db: &DatabaseConnection,
    gym_id: Uuid,
    rows: Vec<ImportMembershipRow>,
    dry_run: bool,
) -> Result<ImportResult, ApiError> {
    let received = rows.len();
    let validate = || async {
        let mut errors = FieldErrors::new();
        let table = Legacy {
            gym: member_membership::Column::GymId,
            legacy: member_membership::Column::LegacyId,
            id: member_membership::Column::Id,
            extra: member_membership::Column::Id,
            scope: None,
        };
        let fresh =
            fresh_rows::<member_membership::Entity, _>(db, table, gym_id, &rows, |r| r.legacy_id.as_str(), &mut errors)
                .await?;
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
        errors.into_result()?;
        let fresh = models.len();
        Ok(((models, at), fresh))
    };
    let write = |txn: sea_orm::DatabaseTransaction,
                 (models, at): (Vec<member_membership::ActiveModel>, DateTime<Utc>)| async move {
        let created = insert_new(
            &txn,
            models,
            [member_membership::Column::GymId, member_membership::Column::LegacyId],
            [member_membership::Column::Id],
        )
        .await?;
        if !created.is_empty() {
            counters::add_many(&txn, gym_id, &[counters::memberships_written()]).await?;
        }
        finish(txn, gym_id, ImportEntity::Memberships, received, created.len(), at).await
    };
    run(db, ImportEntity::Memberships, received, dry_run, validate, write).await
}

// --- attendance and access logs ------------------------------------------------------------------

/// Check-ins (`attendance`) and door events (`access_logs`): one table, one legacy id space per kind.
pub async fn attendance(
    db: &DatabaseConnection,
    gym_id: Uuid,
    entity: ImportEntity,
    rows: Vec<ImportAttendanceRow>,
    dry_run: bool,
) -> Result<ImportResult, ApiError> {
    let kind = match entity {
        ImportEntity::AccessLogs => "access",
        _ => "check_in",
    };
    let received = rows.len();
    let validate = || async {
        let mut errors = FieldErrors::new();
        let table = Legacy {
            gym: attendance::Column::GymId,
            legacy: attendance::Column::LegacyId,
            id: attendance::Column::Id,
            extra: attendance::Column::Id,
            scope: Some((attendance::Column::Kind, kind)),
        };
        let fresh =
            fresh_rows::<attendance::Entity, _>(db, table, gym_id, &rows, |r| r.legacy_id.as_str(), &mut errors)
                .await?;
        let members = member_refs(
            db,
            gym_id,
            fresh.iter().filter_map(|(_, r)| r.member_legacy_id.value().map(String::as_str)).collect(),
        )
        .await?;
        let unattributed = fresh.iter().any(|(_, r)| r.member_legacy_id.value().is_none());
        let fallback = if unattributed { Some(default_facility(db, gym_id).await?) } else { None };
        let at = now();
        let mut models = Vec::with_capacity(fresh.len());
        for (i, r) in fresh {
            let (member_id, facility_id) = match (r.member_legacy_id.value(), fallback) {
                (Some(legacy), _) => match members.get(legacy) {
                    Some((id, facility)) => (Some(*id), *facility),
                    None => {
                        errors.add(field(i, "member_legacy_id"), missing("member", legacy));
                        continue;
                    }
                },
                (None, Some(facility)) => (None, facility),
                (None, None) => continue,
            };
            models.push(attendance::ActiveModel {
                id: Set(new_id()),
                gym_id: Set(gym_id),
                facility_id: Set(facility_id),
                member_id: Set(member_id),
                kind: Set(kind.to_string()),
                status: Set(status_of(r.status, crate::openapi::AttendanceStatus::Granted).as_str().to_string()),
                occurred_at: Set(r.occurred_at),
                legacy_id: Set(Some(r.legacy_id.clone())),
                created_at: Set(at),
                updated_at: Set(at),
            });
        }
        errors.into_result()?;
        let fresh = models.len();
        Ok(((models, at), fresh))
    };
    let write = |txn: sea_orm::DatabaseTransaction, (models, at): (Vec<attendance::ActiveModel>, DateTime<Utc>)| async move {
        let created = insert_new(
            &txn,
            models,
            [attendance::Column::GymId, attendance::Column::Kind, attendance::Column::LegacyId],
            [
                attendance::Column::MemberId,
                attendance::Column::Kind,
                attendance::Column::Status,
                attendance::Column::OccurredAt,
            ],
        )
        .await?;
        let statuses = returned::<String>(&created, "status")?;
        add_counts(&txn, gym_id, counters::ATTENDANCE_ROWS, &statuses).await?;
        add_visits(&txn, gym_id, &created, at).await?;
        finish(txn, gym_id, entity, received, created.len(), at).await
    };
    run(db, entity, received, dry_run, validate, write).await
}

/// A member's `visits_count` and `last_visit_at` follow their granted check-ins: one
/// `UPDATE ... FROM (VALUES ...)` for the members of a batch, adding to the stored figures (so
/// concurrent batches add up).
async fn add_visits(
    db: &impl ConnectionTrait,
    gym_id: Uuid,
    created: &[sea_orm::QueryResult],
    at: DateTime<Utc>,
) -> Result<(), DbErr> {
    let mut visits: HashMap<Uuid, (i64, DateTime<Utc>)> = HashMap::new();
    for row in created {
        let kind: String = row.try_get("", "kind")?;
        let status: String = row.try_get("", "status")?;
        let member_id: Option<Uuid> = row.try_get("", "member_id")?;
        let occurred_at: DateTime<Utc> = row.try_get("", "occurred_at")?;
        let (Some(member_id), "check_in", "granted") = (member_id, kind.as_str(), status.as_str()) else { continue };
        let v = visits.entry(member_id).or_insert((0, occurred_at));
        v.0 += 1;
        v.1 = v.1.max(occurred_at);
    }
    if visits.is_empty() {
        return Ok(());
    }
    let backend = db.get_database_backend();
    // In the order of the text: `updated_at`, the rows, the gym.
    let mut values: Vec<sea_orm::Value> = vec![at.into()];
    let mut rows = Vec::with_capacity(visits.len());
    for (id, (n, latest)) in visits {
        rows.push("(?, ?, ?)");
        values.extend([id.into(), n.into(), latest.into()]);
    }
    let sql = placeholders(
        backend,
        &format!(
            "UPDATE members SET visits_count = members.visits_count + v.column2, \
             last_visit_at = CASE WHEN members.last_visit_at IS NULL OR members.last_visit_at < v.column3 \
             THEN v.column3 ELSE members.last_visit_at END, updated_at = ? \
             FROM (VALUES {}) AS v WHERE members.gym_id = ? AND members.id = v.column1",
            rows.join(", ")
        ),
    );
    values.push(gym_id.into());
    db.execute(Statement::from_sql_and_values(backend, sql, values)).await?;
    Ok(())
}

// --- products and purchases ----------------------------------------------------------------------

pub async fn products(
    db: &DatabaseConnection,
    gym_id: Uuid,
    rows: Vec<ImportProductRow>,
    dry_run: bool,
) -> Result<ImportResult, ApiError> {
    let received = rows.len();
    let validate = || async {
        let mut errors = FieldErrors::new();
        check_batch_ids(rows.iter().map(|r| r.legacy_id.as_str()), &mut errors);
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
                status: Set(status_of(r.status, crate::openapi::ProductStatus::Active).as_str().to_string()),
                legacy_id: Set(Some(r.legacy_id.clone())),
                created_at: Set(at),
                updated_at: Set(at),
            })
            .collect();
        let fresh = models.len();
        Ok(((models, at), fresh))
    };
    let write = |txn: sea_orm::DatabaseTransaction, (models, at): (Vec<product::ActiveModel>, DateTime<Utc>)| async move {
        let created =
            insert_new(&txn, models, [product::Column::GymId, product::Column::LegacyId], [product::Column::Status])
                .await?;
        add_counts(&txn, gym_id, counters::PRODUCT_ROWS, &returned::<String>(&created, "status")?).await?;
        finish(txn, gym_id, ImportEntity::Products, received, created.len(), at).await
    };
    run(db, ImportEntity::Products, received, dry_run, validate, write).await
}

async fn product_refs(
    db: &impl ConnectionTrait,
    gym_id: Uuid,
    ids: HashSet<&str>,
) -> Result<HashMap<String, (Uuid, String)>, DbErr> {
    lookup::<product::Entity, String>(
        db,
        Legacy {
            gym: product::Column::GymId,
            legacy: product::Column::LegacyId,
            id: product::Column::Id,
            extra: product::Column::Status,
            scope: None,
        },
        gym_id,
        ids,
    )
    .await
}

pub async fn purchases(
    db: &DatabaseConnection,
    gym_id: Uuid,
    rows: Vec<ImportPurchaseRow>,
    dry_run: bool,
) -> Result<ImportResult, ApiError> {
    let received = rows.len();
    let validate = || async {
        let mut errors = FieldErrors::new();
        let table = Legacy {
            gym: purchase::Column::GymId,
            legacy: purchase::Column::LegacyId,
            id: purchase::Column::Id,
            extra: purchase::Column::Id,
            scope: None,
        };
        let fresh =
            fresh_rows::<purchase::Entity, _>(db, table, gym_id, &rows, |r| r.legacy_id.as_str(), &mut errors).await?;
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
        let at = now();
        let mut models = Vec::with_capacity(fresh.len());
        for (i, r) in fresh {
            let member_id = match r.member_legacy_id.value() {
                Some(legacy) => match members.get(legacy) {
                    Some((id, _)) => Some(*id),
                    None => {
                        errors.add(field(i, "member_legacy_id"), missing("member", legacy));
                        None
                    }
                },
                None => None,
            };
            let product_id = match r.product_legacy_id.value() {
                Some(legacy) => match products.get(legacy) {
                    Some((id, _)) => Some(*id),
                    None => {
                        errors.add(field(i, "product_legacy_id"), missing("product", legacy));
                        None
                    }
                },
                None => None,
            };
            models.push(purchase::ActiveModel {
                id: Set(new_id()),
                gym_id: Set(gym_id),
                member_id: Set(member_id),
                product_id: Set(product_id),
                description: Set(r.description.clone()),
                quantity: Set(r.quantity.unwrap_or(1)),
                total_amount: Set(r.total.amount),
                currency: Set(r.total.currency.clone()),
                payment_status: Set(r.payment_status.as_str().to_string()),
                purchased_at: Set(r.purchased_at),
                legacy_id: Set(Some(r.legacy_id.clone())),
                created_at: Set(at),
                updated_at: Set(at),
            });
        }
        errors.into_result()?;
        let fresh = models.len();
        Ok(((models, at), fresh))
    };
    let write = |txn: sea_orm::DatabaseTransaction, (models, at): (Vec<purchase::ActiveModel>, DateTime<Utc>)| async move {
        let created = insert_new(
            &txn,
            models,
            [purchase::Column::GymId, purchase::Column::LegacyId],
            [purchase::Column::PaymentStatus],
        )
        .await?;
        add_counts(&txn, gym_id, counters::PURCHASE_ROWS, &returned::<String>(&created, "payment_status")?).await?;
        finish(txn, gym_id, ImportEntity::Purchases, received, created.len(), at).await
    };
    run(db, ImportEntity::Purchases, received, dry_run, validate, write).await
}

// --- status --------------------------------------------------------------------------------------

/// Every kind in import order, with zeros for the kinds not imported yet.
pub async fn status(db: &impl ConnectionTrait, gym_id: Uuid) -> Result<ImportStatus, ApiError> {
    let rows = import_counter::Entity::find().filter(import_counter::Column::GymId.eq(gym_id)).all(db).await?;
    let mut by_entity: HashMap<String, import_counter::Model> =
        rows.into_iter().map(|r| (r.entity.clone(), r)).collect();
    let entities = ImportEntity::ALL
        .iter()
        .map(|&entity| {
            let row = by_entity.remove(entity.as_str());
            ImportEntityStatus {
                entity,
                received: row.as_ref().map_or(0, |r| r.received),
                created: row.as_ref().map_or(0, |r| r.created),
                skipped: row.as_ref().map_or(0, |r| r.skipped),
                last_batch_at: row.and_then(|r| r.last_batch_at).into(),
            }
        })
        .collect();
    Ok(ImportStatus { object: ImportStatusObject::ImportStatus, entities })
}
