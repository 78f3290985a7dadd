//! Prints the Rust code `build.rs` generated from openapi.yaml (`cargo run -q --example generated`),
//! for reading in review or next to a change of the document.

use std::io::Write as _;

fn main() {
    // A closed pipe (`| head`) ends the output; nothing to report.
    let _ = std::io::stdout().write_all(include_str!(concat!(env!("OUT_DIR"), "/api.rs")).as_bytes());
}
