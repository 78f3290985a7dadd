//! The statements every kind of import shares: lookups by legacy id (or another unique key of the
//! gym), the multi-row insert that skips rows already there, and the counters of a batch.

use std::collections::{HashMap, HashSet};

use entity::ids::GymId;
use sea_orm::{
    ActiveModelTrait, ColumnTrait, ConnectionTrait, DbBackend, DbErr, EntityTrait, QueryFilter, QuerySelect, Statement,
};
use uuid::Uuid;

use crate::counters::{self, Counted};

/// A lookup of a table's rows by a unique key within the gym: `key` (the legacy id, or the
/// normalized email), narrowed by `scope` where the unique key has a middle column (attendance's
/// `kind`); it reads `id` and one more value, `extra`.
pub(super) struct Legacy<C> {
    pub gym: C,
    pub legacy: C,
    pub id: C,
    pub extra: C,
    pub scope: Option<(C, &'static str)>,
}

/// `key -> (id, extra)` of the gym's rows of one table among `keys`, in one query.
///
/// On PostgreSQL each key is a probe of the unique index (`CROSS JOIN LATERAL` over the keys), so the
/// cost follows the batch, never the gym: a plain `IN (...)` is planned from statistics, and
/// during a first import they say the table is empty, which turns it into a scan of the gym. The
/// `LIMIT 1` (a no-op: the key is unique) keeps the planner from flattening the lateral subquery
/// into a join: with statistics taken while the table was small, it chose a hash join over the
/// whole gym (931 ms for 500 keys against 521,500 check-ins, instead of 5 ms).
pub(super) async fn lookup<E, X>(
    db: &impl ConnectionTrait,
    Legacy { gym, legacy, id, extra, scope }: Legacy<E::Column>,
    gym_id: GymId,
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
pub(super) async fn insert_new<A>(
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
pub(super) fn returned<T: sea_orm::TryGetable>(rows: &[sea_orm::QueryResult], column: &str) -> Result<Vec<T>, DbErr> {
    rows.iter().map(|r| r.try_get::<T>("", column)).collect()
}

/// Adds the rows just written to a list's counters (the total, one per label value and the list's
/// version, if it has one), in one statement.
pub(super) async fn add_counts(
    db: &impl ConnectionTrait,
    gym_id: GymId,
    list: Counted,
    labels: &[String],
) -> Result<(), DbErr> {
    let mut by_label: HashMap<&str, i64> = HashMap::new();
    for label in labels {
        *by_label.entry(label).or_default() += 1;
    }
    let mut deltas = vec![(list.name(None), i64::try_from(labels.len()).unwrap_or(i64::MAX))];
    deltas.extend(by_label.into_iter().map(|(label, n)| (list.name(Some(label)), n)));
    if !labels.is_empty() {
        deltas.extend(list.written());
    }
    counters::add_many(db, gym_id, &deltas).await
}
