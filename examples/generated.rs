//! Prints the Rust code `build.rs` generated from openapi.yaml and openapi-devices.yaml
//! (`cargo run -q --example generated`), for reading in review or next to a change of a document.

use std::io::Write as _;

fn main() {
    // A closed pipe (`| head`) ends the output; nothing to report.
    let mut out = std::io::stdout();
    for (document, code) in [
        ("openapi.yaml", include_str!(concat!(env!("OUT_DIR"), "/api.rs"))),
        ("openapi-devices.yaml", include_str!(concat!(env!("OUT_DIR"), "/devices_api.rs"))),
    ] {
        if writeln!(out, "// ---- generated from {document}\n{code}").is_err() {
            return;
        }
    }
}
