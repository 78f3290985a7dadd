//! Generates the poem-openapi layer of the service from its documents, the contract: `openapi.yaml`
//! (the integration API) into `$OUT_DIR/api.rs`, included by `src/openapi/mod.rs`, and
//! `openapi-devices.yaml` (the device API) into `$OUT_DIR/devices_api.rs`, included by
//! `src/openapi/device_api.rs`, with the `codegen` crate of this workspace. Anything in a document the
//! generator does not understand stops the build, naming the spot. `cargo run -q --example generated`
//! prints what was generated. Each document's OpenAPI 3.1 copy (`codegen::openapi_3_1`) is written
//! beside them (`$OUT_DIR/openapi-3.1.yaml`, `$OUT_DIR/openapi-devices-3.1.yaml`) for
//! `contract` to serve.

use std::{fs, path::PathBuf};

fn main() {
    let out = PathBuf::from(std::env::var("OUT_DIR").unwrap_or_else(|_| fail("OUT_DIR is not set")));
    let documents = [
        ("openapi.yaml", "api.rs", "openapi-3.1.yaml"),
        ("openapi-devices.yaml", "devices_api.rs", "openapi-devices-3.1.yaml"),
    ];
    for (document, file, copy) in documents {
        println!("cargo:rerun-if-changed={document}");
        let text = fs::read_to_string(document).unwrap_or_else(|e| fail(&format!("cannot read {document}: {e}")));
        let source = codegen::generate(&text).unwrap_or_else(|e| fail(&format!("{document}: {e}")));
        fs::write(out.join(file), source).unwrap_or_else(|e| fail(&format!("cannot write {file}: {e}")));
        let v31 = codegen::openapi_3_1(&text).unwrap_or_else(|e| fail(&format!("{document} as 3.1: {e}")));
        fs::write(out.join(copy), v31).unwrap_or_else(|e| fail(&format!("cannot write {copy}: {e}")));
    }
}

fn fail(msg: &str) -> ! {
    // A panic in a build script is shown with its message; make it say where to look.
    panic!("\n\npoem-openapi generation failed:\n  {msg}\n\n");
}
