//! The layers around the routes: [`edge`] around everything (request id, JSON errors, the log
//! line), [`gate`] around the integration API (key, subscription, plan, rate limit, route,
//! validation), and the keyed writes' replays ([`idempotency`]), which the gate calls for an
//! operation the document marks `x-idempotent`.

mod edge;
mod gate;
mod idempotency;

pub use edge::{EdgeLimits, edge};
pub use gate::gate;
