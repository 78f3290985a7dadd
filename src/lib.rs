//! gymapi: a multi-tenant JSON REST API through which a gym's own software reads and writes that
//! gym's members, plans, attendance, products and sales.
//!
//! `openapi.yaml` is the contract; `build.rs` generates the poem-openapi layer from it
//! ([`openapi`]), the handlers in [`api`] implement it, and [`app::app`] wires everything.
#![forbid(unsafe_code)]

pub mod accounts;
pub mod api;
pub mod app;
pub mod attendance;
pub mod auth;
pub mod breaker;
pub mod cli;
pub mod config;
pub mod context;
pub mod contract;
pub mod counters;
pub mod db;
pub mod demo;
pub mod device_api;
pub mod errors;
pub mod facilities;
pub mod frontdesk;
pub mod health;
pub mod import;
pub mod limits;
pub mod listing;
pub mod logs;
pub mod members;
pub mod metrics;
pub mod middleware;
pub mod openapi;
pub mod pagination;
pub mod purchases;
pub mod records;
pub mod sandbox;
pub mod server;
pub mod settings;
pub mod state;
pub mod types;
pub mod usage;
pub mod wake;
pub mod webhooks;

/// mimalloc instead of the system allocator: a 500-row import batch or a list page allocates
/// thousands of small values, and glibc's malloc took about 40% of the server's time on them. Built
/// without transparent huge pages, which added about 16 MB of RSS under load for no throughput.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;
