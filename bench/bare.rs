//! The ceiling of our stack for `bench/run`: a bare poem handler answering a constant JSON body, on
//! the same runtime and server as gymapi, with nothing in front of it.
//!
//!     cargo run --release --example bench-bare -- 127.0.0.1:8091
#![allow(clippy::unwrap_used, clippy::expect_used)]

use poem::{Route, Server, get, handler, listener::TcpListener, web::Json};
use serde_json::{Value, json};

#[handler]
fn constant() -> Json<Value> {
    Json(json!({"error": {"type": "not_found", "message": "No such path: /api/v1/nothing."}}))
}

#[tokio::main]
async fn main() {
    let bind = std::env::args().nth(1).unwrap_or_else(|| "127.0.0.1:8091".into());
    let app = Route::new().at("/*path", get(constant));
    Server::new(TcpListener::bind(bind)).run(app).await.unwrap();
}
