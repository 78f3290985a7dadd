//! openapi.yaml and the service never drift apart.

use std::collections::BTreeMap;

use gymapi::{config::Config, state::AppState};
use serde_json::{Map, Value, json};

use crate::common::{Oracle, TestApp, devices_oracle, oracle};

/// Follows `$ref`s and keeps what the contract fixes: types, formats, enums, properties, required
/// lists, items, maps and defaults. Descriptions, examples, titles, bounds and nullability are left
/// out (poem-openapi cannot state all of them; live responses are checked against them instead).
fn shape(doc: &Value, schema: &Value, depth: usize) -> Value {
    assert!(depth < 20, "schema nesting too deep (cycle?)");
    if let Some(r) = schema.get("$ref").and_then(Value::as_str) {
        let target = doc.pointer(r.trim_start_matches('#')).unwrap_or_else(|| panic!("unresolved {r}"));
        return shape(doc, target, depth + 1);
    }
    if let Some(all) = schema.get("allOf").and_then(Value::as_array) {
        // poem-openapi wraps a described reference as allOf [ref, {description}], and a branch of
        // a discriminated union as allOf [{the discriminator's value}, ref]: the parts, merged.
        let parts: Vec<Value> = all
            .iter()
            .filter(|s| s.get("$ref").is_some() || s.get("type").is_some())
            .map(|s| shape(doc, s, depth + 1))
            .collect();
        return parts.into_iter().fold(json!({}), merged);
    }
    if let Some(branches) = schema.get("oneOf").and_then(Value::as_array) {
        // The branches, in any order; the discriminator's mapping names poem-openapi's wrappers.
        let mut shapes: Vec<Value> = branches.iter().map(|b| shape(doc, b, depth + 1)).collect();
        shapes.sort_by_key(Value::to_string);
        return json!({ "oneOf": shapes });
    }
    let mut out = Map::new();
    for key in ["type", "format", "default"] {
        if let Some(v) = schema.get(key) {
            out.insert(key.into(), v.clone());
        }
    }
    // The document's open enums (`x-extensible-enum`) are the service's closed ones.
    if let Some(Value::Array(values)) = schema.get("enum").or_else(|| schema.get("x-extensible-enum")) {
        let mut v: Vec<String> = values.iter().map(|x| x.to_string()).collect();
        v.sort();
        out.insert("enum".into(), json!(v));
    }
    if let Some(Value::Array(req)) = schema.get("required") {
        let mut r: Vec<String> = req.iter().filter_map(|x| x.as_str().map(str::to_string)).collect();
        r.sort();
        out.insert("required".into(), json!(r));
    }
    if let Some(Value::Object(props)) = schema.get("properties") {
        let p: Map<String, Value> = props.iter().map(|(k, v)| (k.clone(), shape(doc, v, depth + 1))).collect();
        out.insert("properties".into(), Value::Object(p));
    }
    if let Some(items) = schema.get("items") {
        out.insert("items".into(), shape(doc, items, depth + 1));
    }
    // `additionalProperties: {}` (poem-openapi's any value) is the document's `true`.
    if let Some(ap) = schema.get("additionalProperties").filter(|v| v.as_object().is_some_and(|m| !m.is_empty())) {
        out.insert("additionalProperties".into(), shape(doc, ap, depth + 1));
    }
    Value::Object(out)
}

/// Two shapes of one object as one: properties and required fields of both.
fn merged(a: Value, b: Value) -> Value {
    let (Value::Object(mut a), Value::Object(b)) = (a, b) else { return Value::Null };
    for (k, v) in b {
        match (k.as_str(), a.get_mut(&k), v) {
            ("properties", Some(Value::Object(mine)), Value::Object(theirs)) => mine.extend(theirs),
            ("required", Some(Value::Array(mine)), Value::Array(theirs)) => {
                mine.extend(theirs);
                mine.sort_by_key(Value::to_string);
                mine.dedup();
            }
            (_, _, v) => {
                a.insert(k, v);
            }
        }
    }
    Value::Object(a)
}

fn content(doc: &Value, c: &Value) -> Value {
    let mut out = Map::new();
    for (media, m) in c.as_object().into_iter().flatten() {
        let essence = media.split(';').next().unwrap_or_default().trim().to_string();
        out.insert(essence, shape(doc, &m["schema"], 0));
    }
    Value::Object(out)
}

fn resolve<'a>(doc: &'a Value, v: &'a Value) -> &'a Value {
    match v.get("$ref").and_then(Value::as_str) {
        Some(r) => doc.pointer(r.trim_start_matches('#')).unwrap(),
        None => v,
    }
}

/// Every operation as method + path → what the contract fixes about it.
fn operations(doc: &Value) -> BTreeMap<String, Value> {
    let mut ops = BTreeMap::new();
    for (path, item) in doc["paths"].as_object().unwrap() {
        let shared: Vec<Value> = item.get("parameters").and_then(Value::as_array).cloned().unwrap_or_default();
        for method in ["get", "put", "post", "delete", "patch"] {
            let Some(op) = item.get(method) else { continue };
            let mut params = Map::new();
            let own: Vec<Value> = op.get("parameters").and_then(Value::as_array).cloned().unwrap_or_default();
            for p in shared.iter().chain(own.iter()) {
                let p = resolve(doc, p);
                params.insert(
                    format!("{} in {}", p["name"].as_str().unwrap(), p["in"].as_str().unwrap()),
                    json!({ "required": p.get("required").cloned().unwrap_or(json!(false)), "schema": shape(doc, &p["schema"], 0) }),
                );
            }
            let body = op.get("requestBody").map(|b| {
                let b = resolve(doc, b);
                json!({ "required": b.get("required").cloned().unwrap_or(json!(false)), "content": content(doc, &b["content"]) })
            });
            let mut responses = Map::new();
            // `default` is the server edge's answer on any operation (405, 408, 503, ...), which no
            // handler returns: the generated layer has no variant for it.
            for (status, r) in op["responses"].as_object().unwrap().iter().filter(|(s, _)| *s != "default") {
                let r = resolve(doc, r);
                responses.insert(status.clone(), content(doc, r.get("content").unwrap_or(&Value::Null)));
            }
            let mut tags: Vec<Value> = op.get("tags").and_then(Value::as_array).cloned().unwrap_or_default();
            tags.sort_by_key(|t| t.to_string());
            ops.insert(
                format!("{} {path}", method.to_uppercase()),
                json!({
                    "operationId": op.get("operationId"),
                    "tags": tags,
                    "parameters": params,
                    "requestBody": body,
                    "responses": responses,
                }),
            );
        }
    }
    ops
}

/// Lists every difference between two JSON values, by path.
fn diff(path: &str, a: &Value, b: &Value, out: &mut Vec<String>) {
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            for (k, v) in x {
                match y.get(k) {
                    Some(w) => diff(&format!("{path}.{k}"), v, w, out),
                    None => out.push(format!("{path}.{k}: only in openapi.yaml: {v}")),
                }
            }
            for (k, w) in y {
                if !x.contains_key(k) {
                    out.push(format!("{path}.{k}: only in the emitted spec: {w}"));
                }
            }
        }
        _ if a != b => out.push(format!("{path}: openapi.yaml has {a}, the service emits {b}")),
        _ => {}
    }
}

async fn emitted_specs() -> [(&'static Oracle, Value); 2] {
    let db = gymapi::db::connect("sqlite::memory:").await.unwrap();
    let state = AppState::new(db, Config::default()).await.unwrap();
    [
        (oracle(), serde_json::from_str(&gymapi::app::openapi_service(&state).spec()).unwrap()),
        (devices_oracle(), serde_json::from_str(&gymapi::app::devices_service(&state).spec()).unwrap()),
    ]
}

/// Both documents, each with the least number of operations it must hold.
fn documents() -> [(&'static str, &'static Oracle, usize); 2] {
    [("openapi.yaml", oracle(), 20), ("openapi-devices.yaml", devices_oracle(), 11)]
}

#[tokio::test]
async fn emitted_specs_match_their_documents() {
    for ((file, _, least), (oracle, emitted)) in documents().into_iter().zip(emitted_specs().await) {
        let a = operations(oracle.doc());
        let b = operations(&emitted);
        let mut problems = Vec::new();
        diff("", &serde_json::to_value(&a).unwrap(), &serde_json::to_value(&b).unwrap(), &mut problems);
        assert!(problems.is_empty(), "{file} and the service disagree:\n{}", problems.join("\n"));
        assert!(a.len() >= least, "expected every operation of {file}, found {}", a.len());
    }
}

#[tokio::test]
async fn every_schema_has_an_example_that_fits_it() {
    for (file, oracle, _) in documents() {
        for (name, schema) in oracle.doc()["components"]["schemas"].as_object().unwrap() {
            let example =
                schema.get("example").unwrap_or_else(|| panic!("{file}: components.schemas.{name} has no example"));
            let v = oracle.validator(&json!({ "$ref": format!("#/components/schemas/{name}") }));
            let errors: Vec<String> = v.iter_errors(example).map(|e| e.to_string()).collect();
            assert!(errors.is_empty(), "{file}: the example of {name} breaks its schema: {errors:?}");
        }
    }
}

#[tokio::test]
async fn every_operation_is_fit_for_sdk_generation() {
    for (file, oracle, _) in documents() {
        let mut ids = std::collections::HashSet::new();
        for (key, op) in operations(oracle.doc()) {
            let id = op["operationId"].as_str().unwrap_or_else(|| panic!("{file}: {key} has no operationId"));
            assert!(ids.insert(id.to_string()), "{file}: operationId {id} is used twice");
            assert_eq!(op["tags"].as_array().map(Vec::len), Some(1), "{file}: {key} needs one tag");
            let responses = op["responses"].as_object().unwrap();
            for status in ["401", "402", "403", "429"] {
                assert!(responses.contains_key(status), "{file}: {key} does not document {status}");
            }
            if key.starts_with("POST") || key.starts_with("PUT") || key.starts_with("PATCH") {
                assert!(
                    op["parameters"].get("Idempotency-Key in header").is_some(),
                    "{file}: {key} lacks the Idempotency-Key header"
                );
                assert!(responses.contains_key("409"), "{file}: {key} does not document 409");
                assert!(responses.contains_key("422"), "{file}: {key} does not document 422 (a malformed key)");
            }
        }
    }
}

/// Where a document holds a null outside an example: in YAML's flow style an unquoted comma ends
/// a description, and the rest becomes a key without a value.
fn stray_nulls(v: &Value, path: &str, out: &mut Vec<String>) {
    match v {
        Value::Object(m) => {
            for (k, x) in m.iter().filter(|(k, _)| k.as_str() != "example") {
                if x.is_null() {
                    out.push(format!("{path}/{k}"));
                }
                stray_nulls(x, &format!("{path}/{k}"), out);
            }
        }
        Value::Array(a) => a.iter().enumerate().for_each(|(i, x)| stray_nulls(x, &format!("{path}/{i}"), out)),
        _ => {}
    }
}

#[tokio::test]
async fn no_document_holds_a_value_lost_to_yaml() {
    for (file, oracle, _) in documents() {
        let mut found = Vec::new();
        stray_nulls(oracle.doc(), "", &mut found);
        assert!(found.is_empty(), "{file}: keys without a value (an unquoted comma?): {found:?}");
    }
}

/// No operation id is used by both documents: SDKs generated from each may live side by side.
#[tokio::test]
async fn the_two_documents_share_no_operation_id() {
    let ids = |oracle: &Oracle| -> std::collections::HashSet<String> {
        operations(oracle.doc()).values().filter_map(|op| op["operationId"].as_str().map(String::from)).collect()
    };
    let shared: Vec<String> = ids(oracle()).intersection(&ids(devices_oracle())).cloned().collect();
    assert!(shared.is_empty(), "operation ids in both documents: {shared:?}");
}

/// Every documented operation of both documents answers 401 without a key: nothing is reachable
/// anonymously.
#[tokio::test]
async fn every_operation_requires_a_key() {
    let app = TestApp::spawn().await;
    for (base, oracle) in [("/api/v1", oracle()), ("/api/v1/devices", devices_oracle())] {
        for key in operations(oracle.doc()).keys() {
            let (method, path) = key.split_once(' ').unwrap();
            let path: Vec<&str> = path
                .split('/')
                .map(|seg| if seg.starts_with('{') { "0192f7c4-3b7e-7cc1-a8e3-5b8f4d1e2a90" } else { seg })
                .collect();
            let path = path.join("/");
            let r = app.send((base, oracle), method, &path, None, None, &[]).await;
            assert_eq!(r.status, 401, "{base} {key}");
            assert_eq!(
                r.body,
                json!({ "error": { "type": "unauthorized", "message": "Invalid or missing API key." } })
            );
        }
    }
}

#[tokio::test]
async fn the_document_is_served_to_keys_and_printed_by_the_cli() {
    let app = TestApp::spawn().await;
    let gym = app.gym("Docs").await;
    let r =
        app.client.get(format!("{}/api/v1/openapi.yaml", app.address)).bearer_auth(&gym.live_key).send().await.unwrap();
    assert_eq!(r.status(), 200);
    // An operation of the document like any other: its content type, its rate-limit headers.
    assert_eq!(r.headers()["content-type"], "application/yaml");
    assert_eq!(r.headers()["x-ratelimit-limit"], "120");
    assert_eq!(
        r.text().await.unwrap(),
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/openapi.yaml")).unwrap()
    );
    let (_, op) = oracle().operation("GET", "/openapi.yaml").expect("GET /openapi.yaml is an operation");
    assert!(op["responses"]["200"]["content"]["application/yaml"].is_object(), "{op}");
    let devices = app
        .client
        .get(format!("{}/api/v1/devices/openapi.yaml", app.address))
        .bearer_auth(&gym.live_key)
        .send()
        .await
        .unwrap();
    assert_eq!(devices.status(), 200);
    assert_eq!(
        devices.text().await.unwrap(),
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/openapi-devices.yaml")).unwrap()
    );
    let anonymous = app.client.get(format!("{}/api/v1/openapi.yaml", app.address)).send().await.unwrap();
    assert_eq!(anonymous.status(), 401);
}

/// Each document serving itself names two media types, YAML first and `text/plain` for clients
/// (and generators) that read no YAML: the server answers the one `Accept` asks for, the same text.
#[tokio::test]
async fn the_documents_are_text_to_a_client_that_asks_for_text() {
    let app = TestApp::spawn().await;
    let gym = app.gym("Docs as text").await;
    for (path, file) in [("/openapi.yaml", "openapi.yaml"), ("/devices/openapi-3.1.yaml", "")] {
        let want = match file {
            "" => None,
            file => Some(std::fs::read_to_string(format!("{}/{file}", env!("CARGO_MANIFEST_DIR"))).unwrap()),
        };
        for (accept, media) in [
            (None, "application/yaml"),
            (Some("text/plain"), "text/plain"),
            (Some("text/*;q=0.5, */*;q=0.1"), "application/yaml"),
            (Some("text/plain, application/yaml;q=0"), "text/plain"),
            (Some("application/json"), "application/yaml"),
        ] {
            let mut request = app.client.get(format!("{}/api/v1{path}", app.address)).bearer_auth(&gym.live_key);
            if let Some(accept) = accept {
                request = request.header("accept", accept);
            }
            let r = request.send().await.unwrap();
            assert_eq!(r.status(), 200, "{path} {accept:?}");
            assert_eq!(r.headers()["content-type"], media, "{path} {accept:?}");
            let text = r.text().await.unwrap();
            assert!(text.starts_with("openapi: 3."), "{path} {accept:?}");
            if let Some(want) = &want {
                assert_eq!(&text, want, "{path} {accept:?}");
            }
        }
        let oracle = if path.starts_with("/devices") { devices_oracle() } else { oracle() };
        let (_, op) = oracle.operation("GET", path.trim_start_matches("/devices")).expect("an operation");
        let media: Vec<&String> = op["responses"]["200"]["content"].as_object().unwrap().keys().collect();
        assert_eq!(media, ["application/yaml", "text/plain"], "{path}");
    }
}

/// Each document also comes as OpenAPI 3.1, served beside it and printed by the CLI alike: its
/// webhooks under `webhooks`, every nullable field a `type` list naming `"null"`, nothing else
/// changed; `gymapi openapi` prints either document in either version.
#[tokio::test]
async fn each_document_is_served_and_printed_as_openapi_3_1() {
    let app = TestApp::spawn().await;
    let gym = app.gym("Docs 3.1").await;
    for (family, oracle, file) in
        [("", oracle(), "openapi.yaml"), ("/devices", devices_oracle(), "openapi-devices.yaml")]
    {
        let url = format!("{}/api/v1{family}/openapi-3.1.yaml", app.address);
        let r = app.client.get(url).bearer_auth(&gym.live_key).send().await.unwrap();
        assert_eq!(
            (r.status().as_u16(), r.headers()["content-type"].to_str().unwrap()),
            (200, "application/yaml"),
            "{file}"
        );
        let served = r.text().await.unwrap();
        let devices: &[&str] = if family.is_empty() { &[] } else { &["--devices"] };
        let printed = |version: &str| {
            let args = [&["openapi"], devices, &["--openapi-version", version]].concat();
            let out = crate::cli::gymapi(&app.database_url, &args, None);
            assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
            String::from_utf8(out.stdout).unwrap()
        };
        assert_eq!(printed("3.1"), served, "{file}: the CLI prints what is served");
        let source = std::fs::read_to_string(format!("{}/{file}", env!("CARGO_MANIFEST_DIR"))).unwrap();
        assert_eq!(printed("3.0"), source, "{file}");
        let v31: Value = serde_yaml_ng::from_str(&served).unwrap();
        assert_eq!(v31["openapi"], "3.1.0");
        assert_eq!(v31["info"]["version"], oracle.doc()["info"]["version"]);
        assert_eq!(v31["webhooks"], oracle.doc().get("x-webhooks").cloned().unwrap_or(Value::Null), "{file}");
        assert_eq!(v31["paths"].as_object().unwrap().len(), oracle.doc()["paths"].as_object().unwrap().len());
        let mut nullable = Vec::new();
        nullables(oracle.doc(), "", &mut nullable);
        assert!(!nullable.is_empty(), "{file}");
        for (pointer, kind) in &nullable {
            let schema = v31.pointer(pointer).unwrap_or_else(|| panic!("{file}: {pointer} is gone"));
            assert_eq!(schema["type"], json!([kind, "null"]), "{file}: {pointer}");
            assert!(schema.get("nullable").is_none(), "{file}: {pointer}");
        }
        let mut left = Vec::new();
        nullables(&v31, "", &mut left);
        assert!(left.is_empty(), "{file}: nullable left in the 3.1 copy at {left:?}");
    }
}

/// The pointer and `type` of every schema of `v` marked `nullable: true`.
fn nullables(v: &Value, pointer: &str, out: &mut Vec<(String, Value)>) {
    match v {
        Value::Object(m) => {
            if m.get("nullable") == Some(&Value::Bool(true)) {
                out.push((pointer.to_string(), m.get("type").cloned().unwrap_or_default()));
            }
            for (k, v) in m {
                nullables(v, &format!("{pointer}/{}", k.replace('~', "~0").replace('/', "~1")), out);
            }
        }
        Value::Array(items) => items.iter().enumerate().for_each(|(i, v)| nullables(v, &format!("{pointer}/{i}"), out)),
        _ => {}
    }
}

/// Every OpenAPI link (what a stateful tool follows from one answer to the next request) names an
/// operation of its document and only parameters that operation takes, each from the answer's
/// body or the request's path.
#[test]
fn every_link_leads_to_a_parameter_of_an_operation() {
    for (file, oracle, _) in documents() {
        let doc = oracle.doc();
        let mut params_of = BTreeMap::new();
        for (path, item) in doc["paths"].as_object().unwrap() {
            for (method, op) in item.as_object().unwrap().iter().filter(|(_, op)| op.get("operationId").is_some()) {
                let shared = item.get("parameters").and_then(Value::as_array).into_iter().flatten();
                let own = op.get("parameters").and_then(Value::as_array).into_iter().flatten();
                let names: Vec<String> =
                    shared.chain(own).map(|p| resolve(doc, p)["name"].as_str().unwrap().to_string()).collect();
                params_of.insert(op["operationId"].as_str().unwrap().to_string(), (format!("{method} {path}"), names));
            }
        }
        let mut links = 0;
        for (source, (_, own)) in &params_of {
            let (path, item) = doc["paths"]
                .as_object()
                .unwrap()
                .iter()
                .find(|(_, i)| {
                    i.as_object()
                        .unwrap()
                        .values()
                        .any(|op| op.get("operationId").and_then(Value::as_str) == Some(source))
                })
                .unwrap();
            let op = item
                .as_object()
                .unwrap()
                .values()
                .find(|op| op.get("operationId").and_then(Value::as_str) == Some(source))
                .unwrap();
            for (status, response) in op["responses"].as_object().unwrap() {
                for (name, link) in resolve(doc, response).get("links").and_then(Value::as_object).into_iter().flatten()
                {
                    links += 1;
                    let target = link["operationId"].as_str().unwrap();
                    let (_, takes) = params_of
                        .get(target)
                        .unwrap_or_else(|| panic!("{file}: {source} {status} {name}: no operation {target}"));
                    for (param, expr) in link["parameters"].as_object().unwrap() {
                        assert!(takes.contains(param), "{file}: {source} {status} {name}: {target} takes no {param}");
                        let expr = expr.as_str().unwrap();
                        let from_path = expr
                            .strip_prefix("$request.path.")
                            .is_some_and(|p| own.iter().any(|o| o == p) && path.contains(&format!("{{{p}}}")));
                        assert!(expr.starts_with("$response.body#/") || from_path, "{file}: {source} {name}: {expr}");
                    }
                }
            }
        }
        assert!(links >= 10, "{file}: {links} links");
    }
}

/// What the service serves is a released document: the file of its version in `releases/`
/// (releases/README.md), byte for byte, for both documents.
#[tokio::test]
async fn the_served_documents_are_their_versions_release_files() {
    let app = TestApp::spawn().await;
    let gym = app.gym("Releases").await;
    for (path, name) in [("/api/v1/openapi.yaml", "openapi"), ("/api/v1/devices/openapi.yaml", "openapi-devices")] {
        let r = app.client.get(format!("{}{path}", app.address)).bearer_auth(&gym.live_key).send().await.unwrap();
        assert_eq!(r.status(), 200, "{path}");
        let served = r.text().await.unwrap();
        let doc: serde_yaml_ng::Value = serde_yaml_ng::from_str(&served).unwrap();
        let version = doc["info"]["version"].as_str().unwrap().to_string();
        let file = format!("{}/releases/{name}-{version}.yaml", env!("CARGO_MANIFEST_DIR"));
        let released = std::fs::read_to_string(&file).unwrap_or_else(|e| panic!("{file}: {e}"));
        assert!(served == released, "{path} serves {version}, which differs from {file}");
    }
}

/// The schemas a part of the document reaches, by name.
fn reached(doc: &Value, node: &Value, out: &mut std::collections::BTreeSet<String>) {
    match node {
        Value::Object(m) => {
            if let Some(name) =
                m.get("$ref").and_then(Value::as_str).and_then(|r| r.strip_prefix("#/components/schemas/"))
            {
                if out.insert(name.to_string()) {
                    reached(doc, &doc["components"]["schemas"][name], out);
                }
            }
            m.values().for_each(|v| reached(doc, v, out));
        }
        Value::Array(items) => items.iter().for_each(|v| reached(doc, v, out)),
        _ => {}
    }
}

/// A field or an enum value added later must not break a client: in both documents, no schema a
/// response reaches forbids other properties, and every named enum is open (`x-extensible-enum`).
/// Requests stay closed: an unknown field, nested ones included, is a 422 naming it.
#[tokio::test]
async fn responses_may_grow_and_requests_stay_closed() {
    for (file, oracle, _) in documents() {
        let doc = oracle.doc();
        let (mut requests, mut responses) = Default::default();
        for item in doc["paths"].as_object().unwrap().values() {
            for op in item.as_object().unwrap().values() {
                reached(doc, &op["requestBody"], &mut requests);
                reached(doc, &op["responses"], &mut responses);
            }
        }
        reached(doc, &doc["components"]["responses"], &mut responses);
        for name in &responses {
            let schema = &doc["components"]["schemas"][name];
            assert_ne!(schema["additionalProperties"], json!(false), "{file}: {name} is in a response and closed");
            assert!(schema.get("enum").is_none(), "{file}: {name} is a closed enum: make it x-extensible-enum");
        }
        for name in requests.difference(&responses) {
            let schema = &doc["components"]["schemas"][name];
            if schema["type"] == "object" {
                assert_eq!(schema["additionalProperties"], json!(false), "{file}: {name} is a request body and open");
            }
        }
    }

    let app = TestApp::spawn().await;
    let gym = app.gym("Closed").await;
    let plan = json!({"rows": [{"legacy_id": "P-1", "kind": "membership", "name": "Ten", "price": {"amount": 100, "currency": "EUR", "cents": 1}, "shade": "blue"}]});
    let r = app.post(&gym.live_key, "/import/plans", plan).await;
    assert_eq!(r.status, 422, "{}", r.body);
    assert_eq!(r.body["type"], "validation_failed", "every error body names its type");
    assert_eq!(r.body["errors"]["rows.0.price.cents"], json!(["The cents field is not allowed."]), "{}", r.body);
    assert_eq!(r.body["errors"]["rows.0.shade"], json!(["The shade field is not allowed."]), "{}", r.body);
    let r = app.get(&gym.live_key, "/members?status=frozen").await;
    assert_eq!(r.status, 422, "an open enum still takes only the values known today: {}", r.body);
}

/// `info.version` moves with the document, and CHANGELOG.md says what moved.
#[tokio::test]
async fn the_changelog_names_the_documents_version() {
    let version = oracle().doc()["info"]["version"].as_str().unwrap().to_string();
    let changelog = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/CHANGELOG.md")).unwrap();
    let newest = changelog.lines().find(|l| l.starts_with("## ")).unwrap_or_default();
    assert!(newest.starts_with(&format!("## {version} ")), "CHANGELOG.md's newest entry {newest:?} is not {version}");
}

/// Every operation of the integration API documents its `default` error response, and a 405
/// answers the `Allow` header that response documents.
#[tokio::test]
async fn every_operation_documents_its_default_error() {
    let doc = oracle().doc();
    for (path, item) in doc["paths"].as_object().unwrap() {
        for (method, op) in item.as_object().unwrap().iter().filter(|(m, _)| *m != "parameters") {
            assert!(op["responses"].get("default").is_some(), "{method} {path} does not document default");
        }
    }
    let default = &doc["components"]["responses"]["UnexpectedError"];
    assert!(default["headers"].get("Allow").is_some(), "the default response does not document Allow");
    let app = TestApp::spawn().await;
    let gym = app.gym("Allow").await;
    let r = app.request("DELETE", "/members", Some(&gym.live_key), None, &[]).await;
    assert_eq!(r.status, 405, "{}", r.body);
    assert_eq!(r.body["error"]["type"], "method_not_allowed");
    assert_eq!(r.headers.get("allow").and_then(|v| v.to_str().ok()), Some("GET, POST"));
}

/// Every event type the service can emit is in the document three times over: a value of
/// `WebhookEventType`, a branch of `WebhookEvent` (by its discriminator) whose `type` names it, and
/// an entry of `x-webhooks` with the Standard Webhooks headers; and the document names no other.
#[tokio::test]
async fn every_event_the_service_emits_is_documented_with_its_payload() {
    use gymapi::webhooks::EventType;
    let doc = oracle().doc();
    let schemas = &doc["components"]["schemas"];
    let known: Vec<&str> = EventType::ALL.iter().map(|t| t.as_str()).collect();
    let listed: Vec<&str> =
        schemas["WebhookEventType"]["x-extensible-enum"].as_array().unwrap().iter().filter_map(Value::as_str).collect();
    assert_eq!(listed, known, "WebhookEventType");
    let hooks = doc["x-webhooks"].as_object().expect("x-webhooks");
    assert_eq!(
        hooks.keys().map(String::as_str).collect::<std::collections::BTreeSet<_>>(),
        known.iter().copied().collect()
    );
    let branches: Vec<&Value> = schemas["WebhookEvent"]["oneOf"].as_array().unwrap().iter().collect();
    for t in known {
        let post = &hooks[t]["post"];
        let body = post["requestBody"]["content"]["application/json"]["schema"]["$ref"].as_str().unwrap();
        assert_eq!(schemas["WebhookEvent"]["discriminator"]["mapping"][t], body, "{t}: the discriminator's branch");
        assert!(branches.iter().any(|b| b["$ref"] == body), "{t}: {body} is no branch of WebhookEvent");
        let branch = &schemas[body.trim_start_matches("#/components/schemas/")];
        assert!(branch["properties"]["type"]["enum"].as_array().unwrap().contains(&json!(t)), "{t}: {body}");
        let headers: Vec<&str> =
            post["parameters"].as_array().unwrap().iter().map(|p| resolve(doc, p)["name"].as_str().unwrap()).collect();
        assert_eq!(headers, ["webhook-id", "webhook-timestamp", "webhook-signature"], "{t}");
        assert!(post["responses"].get("2XX").is_some(), "{t}");
    }
}
