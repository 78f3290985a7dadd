//! Generates the poem-openapi layer of the service from `openapi.yaml`, the contract, into
//! `$OUT_DIR/api.rs` (included by `src/openapi.rs`), with the `codegen` crate of this workspace.
//! Anything in the document the generator does not understand stops the build, naming the spot.
//! `cargo run -q --example generated` prints what was generated.

use std::{fs, path::PathBuf};

fn main() {
    println!("cargo:rerun-if-changed=openapi.yaml");
    let text = fs::read_to_string("openapi.yaml").unwrap_or_else(|e| fail(&format!("cannot read openapi.yaml: {e}")));
    let source = codegen::generate(&text).unwrap_or_else(|e| fail(&e));
    let out = PathBuf::from(std::env::var("OUT_DIR").unwrap_or_else(|_| fail("OUT_DIR is not set")));
    fs::write(out.join("api.rs"), source).unwrap_or_else(|e| fail(&format!("cannot write api.rs: {e}")));
}

fn fail(msg: &str) -> ! {
    // A panic in a build script is shown with its message; make it say where to look.
    panic!("\n\nopenapi.yaml → poem-openapi generation failed:\n  {msg}\n\n");
}
