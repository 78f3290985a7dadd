//! The contract as an independent oracle: every response a test receives is checked against the
//! operation and status openapi.yaml documents (body schema, content type, required headers).
//! Written apart from the service's own contract code, so a bug there cannot hide here.

use std::{collections::HashMap, sync::Mutex};

use reqwest::header::HeaderMap;
use serde_json::{Map, Value, json};

pub struct Oracle {
    doc: Value,
    cache: Mutex<HashMap<String, std::sync::Arc<jsonschema::Validator>>>,
}

fn openapi_to_json_schema(v: &Value) -> Value {
    match v {
        Value::Object(m) => {
            let mut out = Map::new();
            for (k, val) in m {
                match k.as_str() {
                    "nullable" | "example" => {}
                    "properties" => {
                        let props = val
                            .as_object()
                            .map(|p| p.iter().map(|(n, s)| (n.clone(), openapi_to_json_schema(s))).collect())
                            .unwrap_or_default();
                        out.insert(k.clone(), Value::Object(props));
                    }
                    "enum" | "required" | "default" => {
                        out.insert(k.clone(), val.clone());
                    }
                    // The values known today: the service sends no other (a client must expect more).
                    "x-extensible-enum" => {
                        out.insert("enum".into(), val.clone());
                    }
                    _ => {
                        out.insert(k.clone(), openapi_to_json_schema(val));
                    }
                }
            }
            // The service sends exactly the documented fields, though the document leaves
            // response objects open for fields added later.
            if out.contains_key("properties") && !out.contains_key("additionalProperties") {
                out.insert("additionalProperties".into(), Value::Bool(false));
            }
            if m.get("nullable") == Some(&Value::Bool(true)) {
                if let Some(Value::String(t)) = out.get("type").cloned() {
                    out.insert("type".into(), json!([t, "null"]));
                }
                if let Some(Value::Array(e)) = out.get_mut("enum") {
                    e.push(Value::Null);
                }
            }
            Value::Object(out)
        }
        Value::Array(a) => Value::Array(a.iter().map(openapi_to_json_schema).collect()),
        other => other.clone(),
    }
}

impl Oracle {
    /// The integration API's document.
    pub fn load() -> Self {
        Self::load_from("openapi.yaml")
    }

    /// A document of the repository, by its file name.
    pub fn load_from(file: &str) -> Self {
        let text = std::fs::read_to_string(format!("{}/{file}", env!("CARGO_MANIFEST_DIR"))).unwrap();
        let doc: Value = serde_yaml_ng::from_str(&text).unwrap();
        Self { doc, cache: Mutex::new(HashMap::new()) }
    }

    pub fn doc(&self) -> &Value {
        &self.doc
    }

    fn resolve<'a>(&'a self, v: &'a Value) -> &'a Value {
        match v.get("$ref").and_then(Value::as_str) {
            Some(r) => self.doc.pointer(r.trim_start_matches('#')).unwrap_or_else(|| panic!("unresolved {r}")),
            None => v,
        }
    }

    /// A validator for a schema of the document, the whole document reachable by `$ref`.
    pub fn validator(&self, schema: &Value) -> std::sync::Arc<jsonschema::Validator> {
        let key = schema.to_string();
        if let Some(v) = self.cache.lock().unwrap().get(&key) {
            return v.clone();
        }
        let mut root = openapi_to_json_schema(schema).as_object().cloned().unwrap();
        root.insert("components".into(), openapi_to_json_schema(&self.doc["components"]));
        let v = std::sync::Arc::new(
            jsonschema::options()
                .with_draft(jsonschema::Draft::Draft202012)
                .should_validate_formats(true)
                .build(&Value::Object(root))
                .unwrap(),
        );
        self.cache.lock().unwrap().insert(key, v.clone());
        v
    }

    /// Fails unless `value` fits `components.schemas.<name>` (for bodies no operation answers, such
    /// as webhook events).
    pub fn check_schema(&self, name: &str, value: &Value) {
        let v = self.validator(&serde_json::json!({ "$ref": format!("#/components/schemas/{name}") }));
        let errors: Vec<String> = v.iter_errors(value).map(|e| format!("{} at {}", e, e.instance_path())).collect();
        assert!(errors.is_empty(), "{name} does not fit openapi.yaml: {errors:?}\n{value}");
    }

    /// The path template and operation of the document for a method and a path below the base.
    pub fn operation(&self, method: &str, path: &str) -> Option<(String, &Value)> {
        let segs: Vec<&str> = path.split('/').skip(1).collect();
        for (template, item) in self.doc["paths"].as_object().unwrap() {
            let t: Vec<&str> = template.split('/').skip(1).collect();
            let fits = t.len() == segs.len()
                && t.iter().zip(&segs).all(|(a, b)| a.starts_with('{') && !b.is_empty() || a == b);
            if fits {
                return item.get(method.to_lowercase()).map(|op| (template.clone(), op));
            }
        }
        None
    }

    fn path_exists(&self, path: &str) -> bool {
        let segs: Vec<&str> = path.split('/').skip(1).collect();
        self.doc["paths"].as_object().unwrap().keys().any(|template| {
            let t: Vec<&str> = template.split('/').skip(1).collect();
            t.len() == segs.len() && t.iter().zip(&segs).all(|(a, b)| a.starts_with('{') && !b.is_empty() || a == b)
        })
    }

    /// Panics, naming the operation and status, unless the response is what the document says.
    pub fn check(&self, method: &str, api_path: &str, status: u16, headers: &HeaderMap, body: &Value) {
        let response = match self.operation(method, api_path) {
            Some((template, op)) => {
                let id = op["operationId"].as_str().unwrap_or("?");
                // `default` covers the statuses its description names, no other.
                let by_default = || match status {
                    404 | 405 | 408 | 413 | 431 | 500 | 503 => op["responses"].get("default"),
                    _ => None,
                };
                let r = op["responses"].get(status.to_string()).or_else(by_default).unwrap_or_else(|| {
                    panic!(
                        "{method} {api_path} ({id}): status {status} is not documented in openapi.yaml; body: {body}"
                    )
                });
                let _ = template;
                self.resolve(r).clone()
            }
            None => {
                let name = match status {
                    401 => "Unauthorized",
                    402 => "PaymentRequired",
                    403 => "Forbidden",
                    404 => "NotFound",
                    405 if self.path_exists(api_path) => "UnexpectedError",
                    429 => "RateLimited",
                    _ => panic!("{method} {api_path}: no such operation, yet answered {status}: {body}"),
                };
                self.doc["components"]["responses"][name].clone()
            }
        };
        let ct = headers.get("content-type").and_then(|v| v.to_str().ok()).unwrap_or_default();
        // Exactly a media type the document names, as contract testers (Dredd) compare it: no
        // `charset` beside it.
        let named = response.get("content").and_then(Value::as_object).is_none_or(|c| c.contains_key(ct));
        assert!(
            ct == "application/json" && named,
            "{method} {api_path} {status}: content-type {ct:?}, not a media type the document names; body {body}"
        );
        if let Some(hs) = response.get("headers").and_then(Value::as_object) {
            for (name, h) in hs {
                let h = self.resolve(h);
                if h.get("required") == Some(&Value::Bool(true)) {
                    assert!(
                        headers.contains_key(name.as_str()),
                        "{method} {api_path} {status}: documented header {name} missing"
                    );
                }
            }
        }
        let schema = &response["content"]["application/json"]["schema"];
        let validator = self.validator(schema);
        let errors: Vec<String> =
            validator.iter_errors(body).map(|e| format!("{} at {}", e, e.instance_path())).collect();
        assert!(
            errors.is_empty(),
            "{method} {api_path} {status}: body breaks openapi.yaml:\n  {}\nbody: {body}",
            errors.join("\n  ")
        );
    }
}
