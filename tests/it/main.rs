//! Integration tests over real HTTP against the app. With `TEST_DATABASE_URL` set they run on
//! PostgreSQL, each test in its own database; otherwise on SQLite files.

// Tests may panic on anything: a panic is a failed assertion here.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

mod auth;
mod citus;
mod cli;
mod contract;
mod counter;
mod counter_races;
mod dates;
mod devices;
mod durability;
mod errors;
mod events;
mod facilities;
mod hardening;
mod history;
mod import;
mod import_files;
mod import_hostile;
mod limits;
mod members;
mod resources;
mod sandbox;
mod schema;
mod service;
mod settings;
mod webhooks;
