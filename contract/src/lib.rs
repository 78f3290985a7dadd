//! The two documents gymapi serves and is built from, and what every client of them must know:
//! where each API is served and how large a request body may be. The server (`gymapi`) and the
//! import client (`gymapi-import`) both read them from here.

/// The contract, embedded in the binary.
pub const DOCUMENT: &str = include_str!("../../openapi.yaml");

/// Where the document's operations are served (its `servers` entry).
pub const API_BASE: &str = "/api/v1";

/// The device API's contract, embedded in the binary.
pub const DEVICES_DOCUMENT: &str = include_str!("../../openapi-devices.yaml");

/// Where the device API's operations are served.
pub const DEVICES_BASE: &str = "/api/v1/devices";

/// Largest request body accepted (an import batch of 500 rows is far below it).
pub const MAX_BODY_BYTES: usize = 4 * 1024 * 1024;
