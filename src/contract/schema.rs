//! The document's schemas as the JSON Schema requests are checked with, compiled once for every
//! operation together.

use anyhow::anyhow;
use jsonschema::{Validator, ValidatorMap};
use serde_json::{Map, Value, json};

/// The schemas of every parameter and request body, compiled together into one validator map, so
/// that the component schemas they reach by `$ref` are compiled and kept once. Compiled one by one,
/// each of the document's 85 validators held its own copy of the components: 30 MB, more than half
/// of the server's memory at rest.
#[derive(Default)]
pub(super) struct SchemaSet {
    defs: Map<String, Value>,
    /// What each schema is, for an error (`createMember: request body`), by its name's number.
    labels: Vec<String>,
}

impl SchemaSet {
    /// Adds a schema; returns its name, by which [`ValidatorMap`] knows it after `compile`.
    pub(super) fn add(&mut self, schema: &Value, label: String) -> String {
        let name = format!("s{}", self.labels.len());
        self.defs.insert(name.clone(), to_json_schema(schema.clone()));
        self.labels.push(label);
        name
    }

    /// Compiles every schema added, with the document's component schemas (JSON Schema already).
    pub(super) fn compile(self, components: Value) -> anyhow::Result<Compiled> {
        let root = json!({ "$defs": Value::Object(self.defs), "components": { "schemas": components } });
        let map = jsonschema::options()
            .with_draft(jsonschema::Draft::Draft202012)
            .should_validate_formats(true)
            .build_map(&root)
            .map_err(|e| {
                let at = e.schema_path().as_str().to_string();
                let name = at.strip_prefix("/$defs/").and_then(|rest| rest.split('/').next());
                match name.and_then(|name| label(&self.labels, name)) {
                    Some(label) => anyhow!("{label}: invalid schema: {e}"),
                    None => anyhow!("invalid schema at {at}: {e}"),
                }
            })?;
        Ok(Compiled { map, labels: self.labels })
    }
}

/// The compiled [`SchemaSet`].
pub(super) struct Compiled {
    map: ValidatorMap,
    labels: Vec<String>,
}

impl Compiled {
    /// The validator of the schema `name` (`s3`). A schema the map left out (one whose pattern is
    /// not a regular expression, say) is an error naming its operation and field.
    pub(super) fn get(&self, name: &str) -> anyhow::Result<Validator> {
        self.map.get(&format!("#/$defs/{name}")).cloned().ok_or_else(|| {
            anyhow!("{}: invalid schema, not compiled", label(&self.labels, name).map_or(name, String::as_str))
        })
    }
}

/// What the schema named `name` (`s3`) by [`SchemaSet::add`] is.
fn label<'a>(labels: &'a [String], name: &str) -> Option<&'a String> {
    labels.get(name.strip_prefix('s')?.parse::<usize>().ok()?)
}

const EXTENSIBLE: &str = "x-extensible-enum";

/// OpenAPI 3.0 schema → the JSON Schema requests are checked with: `nullable: true` becomes a
/// type union with `null`, `x-extensible-enum` an `enum`, and an object refuses fields it does not
/// name.
pub fn to_json_schema(v: Value) -> Value {
    match v {
        Value::Object(m) if m.contains_key("oneOf") && m.contains_key("discriminator") => discriminated(&m),
        Value::Object(m) => {
            let nullable = m.get("nullable").and_then(Value::as_bool).unwrap_or(false);
            let mut out: Map<String, Value> = m
                .into_iter()
                .filter(|(k, _)| k != "nullable" && k != "example")
                .map(|(k, v)| {
                    // Property names and examples are data, not schemas; everything else recurses.
                    let v = if k == "properties" {
                        match v {
                            Value::Object(props) => {
                                Value::Object(props.into_iter().map(|(n, s)| (n, to_json_schema(s))).collect())
                            }
                            other => other,
                        }
                    } else if k == "enum" || k == "required" || k == "default" || k == EXTENSIBLE {
                        v
                    } else {
                        to_json_schema(v)
                    };
                    // The values the service knows: what it accepts (it may send more later).
                    (if k == EXTENSIBLE { "enum".to_string() } else { k }, v)
                })
                .collect();
            // Requests are closed: a field the schema does not name is refused. The document
            // leaves response objects open, so that a field added later breaks no client.
            if out.contains_key("properties") && !out.contains_key("additionalProperties") {
                out.insert("additionalProperties".into(), Value::Bool(false));
            }
            if nullable {
                if let Some(Value::String(t)) = out.get("type").cloned() {
                    out.insert("type".into(), json!([t, "null"]));
                }
                if let Some(Value::Array(values)) = out.get_mut("enum") {
                    values.push(Value::Null);
                }
            }
            Value::Object(out)
        }
        Value::Array(items) => Value::Array(items.into_iter().map(to_json_schema).collect()),
        other => other,
    }
}

/// A `oneOf` told apart by a discriminator, checked branch by branch: the property must name a
/// mapped value, and the branch it names must fit. So a row's problems are named field by field
/// (`rows.3.billing_interval`) instead of "fits none of the branches".
fn discriminated(m: &Map<String, Value>) -> Value {
    let property = m["discriminator"]["propertyName"].as_str().unwrap_or_default();
    let mapping = m["discriminator"]["mapping"].as_object().cloned().unwrap_or_default();
    let values: Vec<&String> = mapping.keys().collect();
    let mut all_of = vec![json!({ "properties": { property: { "type": "string", "enum": values } } })];
    for (value, target) in &mapping {
        all_of.push(json!({
            "if": { "properties": { property: { "const": value } }, "required": [property] },
            "then": { "$ref": target },
        }));
    }
    json!({ "type": "object", "required": [property], "allOf": all_of })
}
