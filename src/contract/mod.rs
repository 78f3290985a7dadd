//! openapi.yaml at run time: which operation a request is for, and whether its parameters and body
//! are what the document says. Every problem of a request is reported at once, keyed by field, in
//! the documented 422 body (`ValidationError`); poem-openapi's own parsing only ever sees valid requests.

use std::{collections::BTreeMap, sync::Arc};

use anyhow::{Context as _, anyhow, bail};
use entity::ids::GymId;
use jsonschema::{Validator, error::ValidationErrorKind};
use poem::http::{HeaderMap, Method};
use serde_json::Value;

use crate::errors::FieldErrors;

mod messages;
mod schema;

use messages::describe;
pub use schema::to_json_schema;
use schema::{Compiled, SchemaSet};

pub use gymapi_contract::{API_BASE, DEVICES_BASE, DEVICES_DOCUMENT, DOCUMENT, MAX_BODY_BYTES};

/// The two APIs, each served from its own document under its own base.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Family {
    /// The integration API of `openapi.yaml`, licensed by the plan's API access.
    Integration,
    /// The device API of `openapi-devices.yaml`, licensed by the plan's device features.
    Devices,
}

impl Family {
    pub fn base(self) -> &'static str {
        match self {
            Self::Integration => API_BASE,
            Self::Devices => DEVICES_BASE,
        }
    }

    pub fn document(self) -> &'static str {
        match self {
            Self::Integration => DOCUMENT,
            Self::Devices => DEVICES_DOCUMENT,
        }
    }

    /// The document's OpenAPI 3.1 copy, made from it by the build (`codegen::openapi_3_1`).
    pub fn document_3_1(self) -> &'static str {
        match self {
            Self::Integration => include_str!(concat!(env!("OUT_DIR"), "/openapi-3.1.yaml")),
            Self::Devices => include_str!(concat!(env!("OUT_DIR"), "/openapi-devices-3.1.yaml")),
        }
    }
}

/// What of a write the schema cannot state (an email already taken, another gym's facility, a
/// legacy id twice in an import batch), checked on what of a body the schema refused still parsed,
/// so that one 422 names every problem at once (openapi.yaml, "Errors"). The gate asks it; the
/// handlers' room implements it, since the rules are theirs.
pub trait Rules: Send + Sync {
    /// The problems of the fields (and import rows) of `body` that `refused` does not name, for
    /// the operation `operation` of the gym `gym_id` at `path` (below the family's base).
    fn check<'a>(
        &'a self,
        operation: &'a str,
        gym_id: GymId,
        path: &'a str,
        body: &'a Value,
        refused: &'a FieldErrors,
    ) -> futures_util::future::BoxFuture<'a, FieldErrors>;
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ParamLocation {
    Query,
    Path,
    Header,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Scalar {
    String,
    Integer,
    Number,
    Boolean,
}

/// A parameter; `V` is its schema's validator (while the document is read, the schema's name in
/// the [`SchemaSet`]).
struct ParamSpec<V = Validator> {
    name: String,
    location: ParamLocation,
    required: bool,
    scalar: Scalar,
    /// A `format: date-time` string, or one whose pattern takes a date or a date-time, read in the
    /// lenient forms [`date_time_spelled_strictly`] knows.
    date_time: bool,
    /// What its pattern asks for, in words (the schema's `x-pattern-words`).
    pattern_words: Option<String>,
    validator: V,
}

enum Segment {
    Literal(String),
    Param,
}

/// One operation of the document; `V` as in [`ParamSpec`].
pub struct Operation<V = Validator> {
    pub id: String,
    pub method: Method,
    /// The path template, e.g. `/members/{id}`.
    pub template: String,
    /// `x-idempotent: true`: the `Idempotency-Key` replay rules apply.
    pub idempotent: bool,
    segments: Vec<Segment>,
    params: Vec<ParamSpec<V>>,
    body: Option<V>,
}

/// What a path and method are, according to the document.
pub enum RouteMatch<'a> {
    Operation(&'a Operation),
    /// The path exists with other methods.
    MethodNotAllowed(Vec<String>),
    NotFound,
}

/// The parsed document and everything derived from it.
pub struct Contract {
    operations: Vec<Operation>,
}

impl Contract {
    /// The embedded document of a family.
    pub fn embedded(family: Family) -> anyhow::Result<Arc<Self>> {
        Ok(Arc::new(Self::parse(family.document())?))
    }

    pub fn parse(yaml: &str) -> anyhow::Result<Self> {
        let doc: Value = serde_yaml_ng::from_str(yaml).context("openapi.yaml is not valid YAML")?;
        let schemas = doc
            .pointer("/components/schemas")
            .cloned()
            .ok_or_else(|| anyhow!("openapi.yaml has no components.schemas"))?;
        let mut set = SchemaSet::default();
        let mut operations = Vec::new();
        let paths = doc.get("paths").and_then(Value::as_object).ok_or_else(|| anyhow!("openapi.yaml has no paths"))?;
        for (template, item) in paths {
            let shared_params = item.get("parameters").and_then(Value::as_array).cloned().unwrap_or_default();
            for method in ["get", "put", "post", "delete", "patch"] {
                let Some(op) = item.get(method) else { continue };
                let id = op
                    .get("operationId")
                    .and_then(Value::as_str)
                    .ok_or_else(|| anyhow!("{method} {template} has no operationId"))?
                    .to_string();
                let mut params = Vec::new();
                let op_params = op.get("parameters").and_then(Value::as_array).cloned().unwrap_or_default();
                for p in shared_params.iter().chain(op_params.iter()) {
                    let p = resolve(&doc, p)?;
                    params.push(param_spec(&doc, p, &mut set, &id).with_context(|| format!("{id}: parameter"))?);
                }
                let body = op
                    .pointer("/requestBody/content/application~1json/schema")
                    .map(|schema| set.add(schema, format!("{id}: request body")));
                operations.push(Operation {
                    id,
                    method: method.to_uppercase().parse().context("method")?,
                    template: template.clone(),
                    idempotent: op.get("x-idempotent").and_then(Value::as_bool).unwrap_or(false),
                    segments: template
                        .split('/')
                        .skip(1)
                        .map(|s| if s.starts_with('{') { Segment::Param } else { Segment::Literal(s.to_string()) })
                        .collect(),
                    params,
                    body,
                });
            }
        }
        let validators = set.compile(to_json_schema(schemas))?;
        let operations = operations.into_iter().map(|op| op.with_validators(&validators)).collect::<Result<_, _>>()?;
        Ok(Self { operations })
    }

    pub fn operations(&self) -> &[Operation] {
        &self.operations
    }

    /// The operation for a method and a path below the base (`/members/123`).
    pub fn route(&self, method: &Method, path: &str) -> RouteMatch<'_> {
        let segments: Vec<&str> = path.split('/').skip(1).collect();
        let mut allowed = Vec::new();
        for op in &self.operations {
            if op.matches(&segments) {
                if op.method == *method {
                    return RouteMatch::Operation(op);
                }
                allowed.push(op.method.to_string());
            }
        }
        if allowed.is_empty() { RouteMatch::NotFound } else { RouteMatch::MethodNotAllowed(allowed) }
    }
}

impl Operation<String> {
    /// The operation with its schemas' names replaced by their validators.
    fn with_validators(self, validators: &Compiled) -> anyhow::Result<Operation> {
        let get = |name: &str| validators.get(name);
        Ok(Operation {
            params: self
                .params
                .into_iter()
                .map(|p| {
                    Ok(ParamSpec {
                        validator: get(&p.validator)?,
                        name: p.name,
                        location: p.location,
                        required: p.required,
                        scalar: p.scalar,
                        date_time: p.date_time,
                        pattern_words: p.pattern_words,
                    })
                })
                .collect::<anyhow::Result<_>>()?,
            body: self.body.as_deref().map(get).transpose()?,
            id: self.id,
            method: self.method,
            template: self.template,
            idempotent: self.idempotent,
            segments: self.segments,
        })
    }
}

impl Operation {
    fn matches(&self, segments: &[&str]) -> bool {
        segments.len() == self.segments.len()
            && self.segments.iter().zip(segments).all(|(s, actual)| match s {
                Segment::Literal(l) => l == actual,
                Segment::Param => !actual.is_empty(),
            })
    }

    pub fn has_body(&self) -> bool {
        self.body.is_some()
    }

    /// The query with its date-time parameters spelled as RFC 3339 requires, when one was spelled
    /// in a form common generators send (an offset without its colon, `+0000`; a `+` left unencoded,
    /// which a query reads as a space); `None` when nothing needed it.
    pub fn normalized_query(&self, query: Option<&str>) -> Option<String> {
        let dated_params = || self.params.iter().filter(|p| p.date_time && p.location == ParamLocation::Query);
        // Most operations take no date-time: their query is not read a second time.
        dated_params().next()?;
        let query = query?;
        let dated = |name: &str| dated_params().any(|p| p.name == name);
        let mut changed = false;
        let pairs: Vec<(String, String)> = url::form_urlencoded::parse(query.as_bytes())
            .map(|(k, v)| {
                let strict = dated(&k).then(|| date_time_spelled_strictly(&v)).flatten();
                changed |= strict.is_some();
                (k.into_owned(), strict.unwrap_or_else(|| v.into_owned()))
            })
            .collect();
        changed.then(|| url::form_urlencoded::Serializer::new(String::new()).extend_pairs(pairs).finish())
    }

    /// Query and header parameters against their schemas. Unknown query parameters are ignored.
    pub fn validate_params(&self, query: Option<&str>, headers: &HeaderMap) -> FieldErrors {
        let mut errors = FieldErrors::new();
        let mut query_values: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for (k, v) in url::form_urlencoded::parse(query.unwrap_or_default().as_bytes()) {
            query_values.entry(k.into_owned()).or_default().push(v.into_owned());
        }
        for p in &self.params {
            let raw: Vec<String> = match p.location {
                ParamLocation::Path => continue,
                ParamLocation::Query => query_values.get(&p.name).cloned().unwrap_or_default(),
                ParamLocation::Header => headers
                    .get_all(p.name.as_str())
                    .iter()
                    .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned())
                    .collect(),
            };
            let noun = match p.location {
                ParamLocation::Header => "header",
                _ => "parameter",
            };
            if raw.iter().any(|v| v.contains('\0')) {
                errors.add(&p.name, format!("The {} {noun} must not contain the NUL character.", p.name));
                continue;
            }
            match raw.as_slice() {
                [] if p.required => errors.add(&p.name, format!("The {} {noun} is required.", p.name)),
                [] => {}
                [value] => match coerce(p.scalar, value) {
                    Some(v) => {
                        for e in p.validator.iter_errors(&v) {
                            errors.add(&p.name, describe(e.kind(), &p.name, noun, p.pattern_words.as_deref()));
                        }
                    }
                    None => errors.add(&p.name, format!("The {} {noun} must be {}.", p.name, scalar_name(p.scalar))),
                },
                _ => errors.add(&p.name, format!("The {} {noun} must be given once.", p.name)),
            }
        }
        errors
    }

    /// A JSON body against the operation's schema: every problem, keyed by dotted path.
    pub fn validate_body(&self, content_type: Option<&str>, bytes: &[u8]) -> Result<Value, FieldErrors> {
        let mut errors = FieldErrors::new();
        let Some(validator) = &self.body else {
            return Ok(Value::Null);
        };
        if bytes.iter().all(u8::is_ascii_whitespace) {
            errors.add("body", "The request body is required: send a JSON object.");
            return Err(errors);
        }
        let is_json = content_type
            .map(|ct| {
                let essence = ct.split(';').next().unwrap_or_default().trim().to_ascii_lowercase();
                essence == "application/json" || essence.ends_with("+json")
            })
            .unwrap_or(false);
        if !is_json {
            errors.add("body", "The request body must be sent with Content-Type: application/json.");
            return Err(errors);
        }
        if bytes.len() > MAX_BODY_BYTES {
            errors
                .add("body", format!("The request body must not be larger than {} MiB.", MAX_BODY_BYTES / 1024 / 1024));
            return Err(errors);
        }
        let value: Value = match serde_json::from_slice(bytes) {
            Ok(v) => v,
            Err(e) => {
                errors.add("body", format!("The request body is not valid JSON: {e}."));
                return Err(errors);
            }
        };
        // In JSON text U+0000 can only be the escape `\u0000` (a raw control character is not valid
        // JSON), so the walk, which names each field it visits, runs only when that text is there.
        if memchr::memmem::find(bytes, b"\\u0000").is_some() {
            nul_characters(&value, "", &mut errors);
        }
        // A valid body, the usual case, costs one pass that keeps no error locations.
        if errors.is_empty() && validator.is_valid(&value) {
            return Ok(value);
        }
        for e in validator.iter_errors(&value) {
            let base = dotted(e.instance_path().as_str());
            match e.kind() {
                ValidationErrorKind::Required { property } => {
                    let name = property.as_str().unwrap_or_default();
                    errors.add(join(&base, name), format!("The {name} field is required."));
                }
                ValidationErrorKind::AdditionalProperties { unexpected } => {
                    for name in unexpected {
                        errors.add(join(&base, name), format!("The {name} field is not allowed."));
                    }
                }
                kind => {
                    let field = if base.is_empty() { "body".to_string() } else { base.clone() };
                    let label = base.rsplit('.').next().filter(|s| !s.is_empty()).unwrap_or("body");
                    errors.add(field, describe(kind, label, "field", None));
                }
            }
        }
        if errors.is_empty() { Ok(value) } else { Err(errors) }
    }
}

/// Strings may not carry U+0000: PostgreSQL cannot store it, so no backend accepts it.
fn nul_characters(value: &Value, path: &str, errors: &mut FieldErrors) {
    match value {
        Value::String(s) if s.contains('\0') => {
            let field = if path.is_empty() { "body" } else { path };
            let label = field.rsplit('.').next().unwrap_or(field);
            errors.add(field, format!("The {label} field must not contain the NUL character."));
        }
        Value::Array(items) => {
            for (i, v) in items.iter().enumerate() {
                nul_characters(v, &join(path, &i.to_string()), errors);
            }
        }
        Value::Object(map) => {
            for (k, v) in map {
                nul_characters(v, &join(path, k), errors);
            }
        }
        _ => {}
    }
}

fn join(base: &str, name: &str) -> String {
    if base.is_empty() { name.to_string() } else { format!("{base}.{name}") }
}

/// `/rows/3/email` → `rows.3.email`.
fn dotted(pointer: &str) -> String {
    pointer.split('/').skip(1).map(|s| s.replace("~1", "/").replace("~0", "~")).collect::<Vec<_>>().join(".")
}

fn scalar_name(s: Scalar) -> &'static str {
    match s {
        Scalar::String => "a string",
        Scalar::Integer => "an integer",
        Scalar::Number => "a number",
        Scalar::Boolean => "true or false",
    }
}

/// A date-time whose offset lacks its colon (`+0000`, `-0530`) or whose `+` arrived as a space,
/// spelled as RFC 3339 (`+00:00`); `None` when it needs no change or is no date-time at all.
fn date_time_spelled_strictly(value: &str) -> Option<String> {
    let b = value.as_bytes();
    if b.len() < 24 || !matches!(b[10], b'T' | b't') || !b.is_ascii() {
        return None;
    }
    let digits = |s: &[u8]| s.iter().all(u8::is_ascii_digit);
    let n = b.len();
    // `+HHMM` / `-HHMM` / ` HHMM` at the end.
    if matches!(b[n - 5], b'+' | b'-' | b' ') && digits(&b[n - 4..]) {
        let sign = if b[n - 5] == b'-' { '-' } else { '+' };
        return Some(format!("{}{sign}{}:{}", &value[..n - 5], &value[n - 4..n - 2], &value[n - 2..]));
    }
    // ` HH:MM` at the end: a `+` the client did not encode.
    if b[n - 6] == b' ' && digits(&b[n - 5..n - 3]) && b[n - 3] == b':' && digits(&b[n - 2..]) {
        return Some(format!("{}+{}", &value[..n - 6], &value[n - 5..]));
    }
    None
}

fn coerce(scalar: Scalar, raw: &str) -> Option<Value> {
    Some(match scalar {
        Scalar::String => Value::String(raw.to_string()),
        Scalar::Integer => Value::from(raw.parse::<i64>().ok()?),
        Scalar::Number => Value::from(raw.parse::<f64>().ok().filter(|f| f.is_finite())?),
        Scalar::Boolean => match raw {
            "true" => Value::Bool(true),
            "false" => Value::Bool(false),
            _ => return None,
        },
    })
}

/// Follows a local `$ref` (`#/components/...`).
fn resolve<'a>(doc: &'a Value, v: &'a Value) -> anyhow::Result<&'a Value> {
    match v.get("$ref").and_then(Value::as_str) {
        Some(r) => {
            let pointer = r.strip_prefix('#').ok_or_else(|| anyhow!("only local $ref is supported: {r}"))?;
            doc.pointer(pointer).ok_or_else(|| anyhow!("unresolved $ref {r}"))
        }
        None => Ok(v),
    }
}

fn param_spec(doc: &Value, p: &Value, set: &mut SchemaSet, operation: &str) -> anyhow::Result<ParamSpec<String>> {
    let name = p.get("name").and_then(Value::as_str).ok_or_else(|| anyhow!("parameter without name"))?.to_string();
    let location = match p.get("in").and_then(Value::as_str) {
        Some("query") => ParamLocation::Query,
        Some("path") => ParamLocation::Path,
        Some("header") => ParamLocation::Header,
        other => bail!("parameter {name}: unsupported location {other:?}"),
    };
    let schema = p.get("schema").ok_or_else(|| anyhow!("parameter {name} has no schema"))?;
    let resolved = resolve(doc, schema)?;
    let pattern_words = resolved.get("x-pattern-words").and_then(Value::as_str).map(str::to_string);
    // A date-time, or a date or a date-time (`from`, `to`: their pattern's words say so).
    let date_time = resolved.get("format").and_then(Value::as_str) == Some("date-time")
        || pattern_words.as_deref().is_some_and(|w| w.contains("date-time"));
    let scalar = match resolved.get("type").and_then(Value::as_str) {
        Some("string") => Scalar::String,
        Some("integer") => Scalar::Integer,
        Some("number") => Scalar::Number,
        Some("boolean") => Scalar::Boolean,
        other => bail!("parameter {name}: unsupported type {other:?}"),
    };
    Ok(ParamSpec {
        required: p.get("required").and_then(Value::as_bool).unwrap_or(false),
        validator: set.add(schema, format!("{operation}: parameter {name}")),
        name,
        location,
        scalar,
        date_time,
        pattern_words,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn embedded_document_parses_into_operations() {
        let c = Contract::parse(DOCUMENT).unwrap();
        assert!(c.operations().iter().any(|o| o.id == "createMember" && o.idempotent && o.has_body()));
        assert!(matches!(c.route(&Method::GET, "/members/abc"), RouteMatch::Operation(o) if o.id == "getMember"));
        assert!(
            matches!(c.route(&Method::DELETE, "/members"), RouteMatch::MethodNotAllowed(a) if a.contains(&"GET".to_string()))
        );
        assert!(matches!(c.route(&Method::GET, "/nothing"), RouteMatch::NotFound));
        assert!(matches!(c.route(&Method::GET, "/members/"), RouteMatch::NotFound));
    }

    #[test]
    fn an_invalid_schema_is_named_by_its_operation_and_field() {
        let doc = r#"
paths:
  /things:
    get:
      operationId: listThings
      parameters:
        - { name: ok, in: query, schema: { type: string } }
        - { name: code, in: query, schema: { type: string, pattern: "(" } }
components:
  schemas: {}
"#;
        let err = Contract::parse(doc).err().map(|e| format!("{e:#}")).unwrap_or_default();
        assert!(err.starts_with("listThings: parameter code: invalid schema"), "{err}");
    }

    #[test]
    fn pointer_paths_become_dotted_field_names() {
        assert_eq!(dotted("/rows/3/email"), "rows.3.email");
        assert_eq!(dotted(""), "");
        assert_eq!(dotted("/a~1b"), "a/b");
    }
}
