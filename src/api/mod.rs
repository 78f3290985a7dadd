//! The handlers of the integration API, one file per tag of openapi.yaml. Each implements the trait
//! `build.rs` generated for its tag; routing, authentication and validation happen before them.

mod attendance;
mod catalog;
mod document;
mod events;
mod facilities;
mod import;
mod member_memberships;
mod members;
mod rules;
mod sandbox;
mod statistics;
mod webhooks;

use entity::ids::{GymId, MemberId};
pub use rules::WriteRules;

use crate::openapi::Money;
use sea_orm::{ConnectionTrait, DbBackend, EntityTrait, PrimaryKeyTrait};
use std::{
    collections::HashMap,
    sync::{Arc, LazyLock, RwLock},
};
use uuid::Uuid;

use crate::{errors::ApiError, state::AppState};

/// Implements every handler trait of the generated `Api`.
#[derive(Clone)]
pub struct Handlers {
    state: AppState,
}

impl Handlers {
    pub fn new(state: AppState) -> Self {
        Self { state }
    }

    fn db(&self) -> &crate::db::Db {
        &self.state.db
    }
}

/// The id of a path; anything that is not a UUID is an id that does not exist.
fn parse_id(kind: &str, id: &str) -> Result<Uuid, ApiError> {
    Uuid::parse_str(id).map_err(|_| ApiError::not_found(kind, id))
}

/// The record `id` of the tenant's gym, or 404 naming the `kind` (also for another gym's record),
/// by the table's primary key `(gym_id, id)`.
///
/// The statement is the one sea-orm writes for `find_by_id((gym, id)).one()`, built once per table
/// and backend and then reused with the request's values: building it with sea-query on every
/// request was about 8% of the server's `perf` samples on `GET /members/{id}`.
async fn find_in_gym<E>(db: &impl ConnectionTrait, gym_id: GymId, kind: &str, id: &str) -> Result<E::Model, ApiError>
where
    E: EntityTrait + 'static,
    <E::PrimaryKey as PrimaryKeyTrait>::ValueType: GymScopedKey,
{
    let uuid = parse_id(kind, id)?;
    let backend = db.get_database_backend();
    let (sql, slots) = find_statement::<E>(backend);
    let values = slots.iter().map(|slot| match slot {
        Slot::Id => uuid.into(),
        Slot::Gym => gym_id.into(),
        Slot::Fixed(v) => v.clone(),
    });
    // Straight to the model: `E::find().from_raw_sql(..)` would first build, and then drop, the
    // entity's whole `SELECT` (about a tenth of the request's instructions).
    <E::Model as sea_orm::FromQueryResult>::find_by_statement(sea_orm::Statement::from_sql_and_values(
        backend,
        sql.to_string(),
        values,
    ))
    .one(db)
    .await?
    .ok_or_else(|| ApiError::not_found(kind, id))
}

/// The primary key of a table of gym data: the gym's id, then the record's (typed or not).
trait GymScopedKey {
    fn of(gym: GymId, id: Uuid) -> Self;
}

impl GymScopedKey for (GymId, Uuid) {
    fn of(gym: GymId, id: Uuid) -> Self {
        (gym, id)
    }
}

impl GymScopedKey for (GymId, MemberId) {
    fn of(gym: GymId, id: Uuid) -> Self {
        (gym, id.into())
    }
}

/// Stand-ins for the id and the gym while `find_in_gym`'s statement is built.
const ID_SLOT: Uuid = Uuid::from_u128(0x1d);
const GYM_SLOT: Uuid = Uuid::from_u128(0x9e);

/// One value of `find_in_gym`'s statement: the request's id, its gym, or one the statement fixes
/// (the `LIMIT`).
enum Slot {
    Id,
    Gym,
    Fixed(sea_orm::Value),
}

/// Per table and backend: the statement's text and its values.
type FindStatements = HashMap<(std::any::TypeId, bool), (Arc<str>, Arc<[Slot]>)>;
static FIND_STATEMENTS: LazyLock<RwLock<FindStatements>> = LazyLock::new(Default::default);

/// The text and values of `find_in_gym`'s statement, the stand-ins found once when it is built.
fn find_statement<E>(backend: DbBackend) -> (Arc<str>, Arc<[Slot]>)
where
    E: EntityTrait + 'static,
    <E::PrimaryKey as PrimaryKeyTrait>::ValueType: GymScopedKey,
{
    use sea_orm::{QuerySelect, QueryTrait};
    let key = (std::any::TypeId::of::<E>(), backend == DbBackend::Postgres);
    if let Some((sql, values)) = FIND_STATEMENTS.read().unwrap_or_else(|e| e.into_inner()).get(&key) {
        return (sql.clone(), values.clone());
    }
    let stand_in = <E::PrimaryKey as PrimaryKeyTrait>::ValueType::of(GYM_SLOT.into(), ID_SLOT);
    let built = E::find_by_id(stand_in).limit(1).build(backend);
    let (id, gym) = (sea_orm::Value::from(ID_SLOT), sea_orm::Value::from(GYM_SLOT));
    let values: Arc<[Slot]> = built
        .values
        .map(|v| v.0)
        .unwrap_or_default()
        .into_iter()
        .map(|v| match v {
            v if v == id => Slot::Id,
            v if v == gym => Slot::Gym,
            v => Slot::Fixed(v),
        })
        .collect();
    let sql = Arc::<str>::from(built.sql);
    FIND_STATEMENTS.write().unwrap_or_else(|e| e.into_inner()).insert(key, (sql.clone(), values.clone()));
    (sql, values)
}

fn money(amount: i64, currency: &str) -> Money {
    Money { amount, currency: currency.to_string() }
}
