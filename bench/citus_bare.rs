//! The ceiling for `bench/citus`: a bare poem handler on the same runtime and server as gymapi that
//! answers `GET /members/{id}` of one gym with the same primary-key `SELECT` through sqlx, on the
//! same database, with nothing else in front of it (no key, no limit, no document).
//!
//!     DATABASE_URL=postgres://… GYM_ID=… cargo run --release --example bench-citus-bare -- 127.0.0.1:8192
#![allow(clippy::unwrap_used, clippy::expect_used)]

use poem::{
    EndpointExt, Route, Server, get, handler,
    listener::TcpListener,
    web::{Data, Json, Path},
};
use sea_orm::sqlx::{self, PgPool, Row, postgres::PgPoolOptions};
use serde_json::{Value, json};
use uuid::Uuid;

#[handler]
async fn member(Path(id): Path<Uuid>, Data(state): Data<&(PgPool, Uuid)>) -> Json<Value> {
    let (pool, gym) = state;
    let row = sqlx::query(
        "SELECT id, first_name, last_name, email, status, created_at, updated_at FROM members \
         WHERE gym_id = $1 AND id = $2",
    )
    .bind(gym)
    .bind(id)
    .fetch_optional(pool)
    .await
    .unwrap();
    Json(match row {
        Some(r) => json!({
            "object": "member",
            "id": r.get::<Uuid, _>("id"),
            "first_name": r.get::<String, _>("first_name"),
            "last_name": r.get::<String, _>("last_name"),
            "email": r.get::<Option<String>, _>("email"),
            "status": r.get::<String, _>("status"),
            "created_at": r.get::<chrono::DateTime<chrono::Utc>, _>("created_at"),
            "updated_at": r.get::<chrono::DateTime<chrono::Utc>, _>("updated_at"),
        }),
        None => json!({"error": {"type": "not_found"}}),
    })
}

#[tokio::main]
async fn main() {
    let bind = std::env::args().nth(1).unwrap_or_else(|| "127.0.0.1:8192".into());
    let url = std::env::var("DATABASE_URL").expect("DATABASE_URL");
    let gym: Uuid = std::env::var("GYM_ID").expect("GYM_ID").parse().unwrap();
    let options: sqlx::postgres::PgConnectOptions = url.parse().unwrap();
    let pool = PgPoolOptions::new().max_connections(16).connect_with(options).await.unwrap();
    let app = Route::new().at("/api/v1/members/:id", get(member)).data((pool, gym));
    Server::new(TcpListener::bind(bind)).run(app).await.unwrap();
}
