//! The rules of a batch, whatever its kind: validated whole before anything is written, written in
//! one transaction, run again when a concurrent writer took one of its unique values meanwhile,
//! and counted for `GET /import/status` and the `import.completed` event.

use std::collections::HashMap;

use chrono::{DateTime, Utc};
use entity::ids::GymId;
use sea_orm::{ActiveModelTrait, ConnectionTrait, DbErr, EntityTrait, Statement};
use uuid::Uuid;

use super::sql::{Legacy, add_counts, insert_new, lookup, returned};
use crate::{
    accounts,
    counters::Counted,
    db::Db,
    db::{is_unique_violation, placeholders},
    errors::{ApiError, FieldErrors},
    openapi::{ImportEntity, ImportResult, ImportResultObject},
    webhooks::{self, EventType},
};

/// A batch as it arrived: whose, of what kind, how many rows, and whether it only asks what it
/// would do.
#[derive(Clone, Copy, Debug)]
pub(super) struct Batch {
    pub gym_id: GymId,
    pub entity: ImportEntity,
    pub received: usize,
    pub dry_run: bool,
}

/// What a batch did (or, dry, would do).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Tally {
    pub received: i64,
    pub created: i64,
}

impl Tally {
    pub(super) fn result(self, entity: ImportEntity, dry_run: bool) -> ImportResult {
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

pub(super) fn count(n: usize) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// The field of row `i`, as the 422 body names it (`rows.12.email`).
pub(super) fn field(i: usize, name: &str) -> String {
    format!("rows.{i}.{name}")
}

/// The problem of a value that an earlier row of the batch (`first`) holds already.
pub(super) fn twice(name: &str, first: usize) -> String {
    format!("The {name} appears more than once in this batch (row {first}).")
}

/// The problems of a batch made of some rows of a larger one (`places[j]` is the place of row `j`
/// in it), named as in the larger batch: `rows.J.field` and "(row J)" become `rows.I...`.
pub fn in_batch(problems: FieldErrors, places: &[usize]) -> FieldErrors {
    let place = |j: &str| j.parse::<usize>().ok().and_then(|j| places.get(j)).map(usize::to_string);
    let mut renamed = FieldErrors::new();
    for (field, messages) in problems.0 {
        let field = match field.strip_prefix("rows.").map(|rest| rest.split_once('.').unwrap_or((rest, ""))) {
            Some((j, rest)) => match (place(j), rest) {
                (Some(i), "") => format!("rows.{i}"),
                (Some(i), rest) => format!("rows.{i}.{rest}"),
                (None, _) => field,
            },
            None => field,
        };
        for m in messages {
            let renumbered = m.strip_suffix(").").and_then(|head| head.rsplit_once("(row "));
            let m = match renumbered.and_then(|(text, j)| Some((text, place(j)?))) {
                Some((text, i)) => format!("{text}(row {i})."),
                None => m,
            };
            renamed.add(field.clone(), m);
        }
    }
    renamed
}

/// Flags a `legacy_id` that appears twice in one batch (on the later row).
pub(super) fn check_batch_ids<'a>(ids: impl Iterator<Item = &'a str>, errors: &mut FieldErrors) {
    let mut seen: HashMap<&str, usize> = HashMap::new();
    for (i, id) in ids.enumerate() {
        if let Some(first) = seen.insert(id, i) {
            errors.add(field(i, "legacy_id"), twice("legacy_id", first));
        }
    }
}

/// An amount a row sends (`rows.I.{name}.amount`) beyond `purchases::MAX_AMOUNT` is a 422.
pub(super) fn check_amount(i: usize, name: &str, amount: i64, errors: &mut FieldErrors) {
    if amount > crate::purchases::MAX_AMOUNT {
        let message = format!("The amount must not be greater than {}.", crate::purchases::MAX_AMOUNT);
        errors.add(field(i, &format!("{name}.amount")), message);
    }
}

pub(super) fn missing(kind: &str, legacy_id: &str) -> String {
    format!("No {kind} with legacy_id \"{legacy_id}\" has been imported.")
}

/// The rows of a batch whose legacy id is not in `table` yet, with their index in the batch (one
/// query); a legacy id twice in the batch is flagged in `errors`.
pub(super) async fn fresh_rows<'r, E, R>(
    db: &impl ConnectionTrait,
    table: Legacy<E::Column>,
    gym_id: GymId,
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

/// What a batch's validation hands its write: the rows to insert and their time, with how many
/// there are; or its 422 when any row has a problem.
pub(super) type Planned<M> = Result<((Vec<M>, DateTime<Utc>), usize), ApiError>;

/// The end of a validation: the 422 of every problem found, or the rows to write.
pub(super) fn planned<M>(errors: FieldErrors, models: Vec<M>, at: DateTime<Utc>) -> Planned<M> {
    errors.into_result()?;
    let fresh = models.len();
    Ok(((models, at), fresh))
}

/// The facility imported members and unattributed entries go to: the gym's oldest.
pub(super) async fn default_facility(db: &impl ConnectionTrait, gym_id: GymId) -> Result<Uuid, ApiError> {
    Ok(accounts::first_facility(db, gym_id).await?.ok_or_else(no_facility)?.id)
}

pub(super) fn no_facility() -> ApiError {
    ApiError::invalid("rows", "This gym has no facility to place the imported records in.")
}

/// How often a batch runs at most when concurrent writers keep taking its unique values.
const RUNS: usize = 4;

/// Runs a batch: `validate` reads and checks (no writes) and returns what to write, or the 422;
/// `write` writes it in one transaction and returns the rows it created. A unique violation
/// outside `(gym_id, legacy_id)` (a concurrent request wrote the same member, or took an email,
/// meanwhile), or a facility's refusal of new members (archived meanwhile), runs the batch again:
/// its validation then sees what changed, skipping the same member and reporting another
/// member's email, or the archived facility, as a 422.
pub(super) async fn run<P, V, W, FV, FW>(db: &Db, batch: Batch, validate: V, write: W) -> Result<ImportResult, ApiError>
where
    V: Fn() -> FV,
    FV: Future<Output = Result<(P, usize), ApiError>>,
    W: Fn(crate::db::Writing, P) -> FW,
    FW: Future<Output = Result<usize, DbErr>>,
{
    let (received, entity) = (count(batch.received), batch.entity);
    let changed_meanwhile = |e: &DbErr| is_unique_violation(e) || crate::facilities::archived_refusal(e);
    for attempt in 0..RUNS {
        let (plan, fresh) = validate().await?;
        if batch.dry_run {
            return Ok(Tally { received, created: count(fresh) }.result(entity, true));
        }
        let txn = crate::db::begin_writing(db).await?;
        match write(txn, plan).await {
            Ok(created) => return Ok(Tally { received, created: count(created) }.result(entity, false)),
            Err(e) if attempt + 1 < RUNS && changed_meanwhile(&e) => continue,
            Err(e) if changed_meanwhile(&e) => {
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
pub(super) async fn finish(
    txn: crate::db::Writing,
    batch: Batch,
    created: usize,
    at: DateTime<Utc>,
) -> Result<usize, DbErr> {
    let Batch { gym_id, entity, received, .. } = batch;
    let tally = Tally { received: count(received), created: count(created) };
    record_batch(&txn, gym_id, entity, tally, at).await?;
    let data = crate::types::wire::value(&tally.result(entity, false));
    webhooks::emit(&txn, gym_id, EventType::ImportCompleted, data).await?;
    txn.commit().await?;
    Ok(created)
}

/// The common write of a batch of one table: its new rows (one statement), its list's counters
/// by the value of `label`, then [`finish`]. Returns how many rows it created.
pub(super) async fn write_counted<A>(
    txn: crate::db::Writing,
    batch: Batch,
    models: Vec<A>,
    conflict: impl IntoIterator<Item = <A::Entity as EntityTrait>::Column>,
    label: <A::Entity as EntityTrait>::Column,
    list: Counted,
    at: DateTime<Utc>,
) -> Result<usize, DbErr>
where
    A: ActiveModelTrait + Send,
{
    use sea_orm::IdenStatic;
    let created = insert_new(&txn, models, conflict, [label]).await?;
    add_counts(&txn, batch.gym_id, list, &returned::<String>(&created, label.as_str())?).await?;
    finish(txn, batch, created.len(), at).await
}

/// Adds a batch to the import counters of `GET /import/status`.
async fn record_batch(
    db: &impl ConnectionTrait,
    gym_id: GymId,
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn some_rows_problems_are_named_by_their_place_in_the_whole_batch() {
        let mut problems = FieldErrors::new();
        problems.add("rows.1.email", twice("email", 0));
        problems.add("rows.0", "The row is odd.");
        problems.add("rows", "The batch is odd.");
        let renamed = in_batch(problems, &[2, 5]);
        let expected = [
            ("rows", "The batch is odd."),
            ("rows.2", "The row is odd."),
            ("rows.5.email", "The email appears more than once in this batch (row 2)."),
        ];
        let got: Vec<(&str, &str)> = renamed.0.iter().map(|(f, m)| (f.as_str(), m[0].as_str())).collect();
        assert_eq!(got, expected);
    }
}
