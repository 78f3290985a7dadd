//! What a row of each kind holds, read from the embedded openapi.yaml: the kinds in import order,
//! and each row field with the type a cell must be turned into.

use std::collections::BTreeMap;

use serde_json::Value;

use super::ClientError;

/// A kind of `POST /import/{entity}`, in the order the server needs them (references point back).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(super) enum Entity {
    Facilities,
    Plans,
    Members,
    Memberships,
    Attendance,
    AccessLogs,
    Products,
    Purchases,
}

impl Entity {
    pub(super) const ALL: [Entity; 8] = [
        Entity::Facilities,
        Entity::Plans,
        Entity::Members,
        Entity::Memberships,
        Entity::Attendance,
        Entity::AccessLogs,
        Entity::Products,
        Entity::Purchases,
    ];

    pub(super) fn name(self) -> &'static str {
        match self {
            Entity::Facilities => "facilities",
            Entity::Plans => "plans",
            Entity::Members => "members",
            Entity::Memberships => "memberships",
            Entity::Attendance => "attendance",
            Entity::AccessLogs => "access_logs",
            Entity::Products => "products",
            Entity::Purchases => "purchases",
        }
    }

    pub(super) fn parse(name: &str) -> Result<Self, ClientError> {
        Self::ALL.into_iter().find(|e| e.name() == name).ok_or_else(|| {
            ClientError::BadInput(format!(
                "unknown entity {name:?}; one of: facilities, plans, members, memberships, attendance, access_logs, products, purchases"
            ))
        })
    }
}

/// The JSON type of a row field.
#[derive(Clone, Debug, PartialEq)]
pub(super) enum Kind {
    Text,
    /// A string with a closed set of values.
    Enum(Vec<String>),
    /// `format: date`, `YYYY-MM-DD`.
    Date,
    /// `format: date-time`, RFC 3339 with an offset.
    DateTime,
    Integer,
    Number,
    Boolean,
    /// A `Money` object: a column may fill it whole (an amount in major units) or field by field
    /// (`price.amount` in minor units, `price.currency`).
    Money,
    Object(Fields),
}

pub(super) type Fields = BTreeMap<String, Kind>;

fn resolve<'a>(doc: &'a Value, schema: &'a Value) -> &'a Value {
    match schema.get("$ref").and_then(Value::as_str).and_then(|r| r.strip_prefix("#/")) {
        Some(path) => path.split('/').fold(doc, |v, part| &v[part]),
        None => schema,
    }
}

fn kind_of(doc: &Value, schema: &Value) -> Kind {
    if schema.get("$ref").and_then(Value::as_str) == Some("#/components/schemas/Money") {
        return Kind::Money;
    }
    let s = resolve(doc, schema);
    let values = s.get("enum").or_else(|| s.get("x-extensible-enum")).and_then(Value::as_array);
    match (s.get("type").and_then(Value::as_str), s.get("format").and_then(Value::as_str)) {
        (Some("integer"), _) => Kind::Integer,
        (Some("number"), _) => Kind::Number,
        (Some("boolean"), _) => Kind::Boolean,
        (Some("object"), _) => Kind::Object(properties(doc, s)),
        (_, Some("date")) => Kind::Date,
        (_, Some("date-time")) => Kind::DateTime,
        _ => match values {
            Some(v) => Kind::Enum(v.iter().filter_map(Value::as_str).map(str::to_string).collect()),
            None => Kind::Text,
        },
    }
}

/// The fields of an object schema; of a `oneOf`, those of every branch (a kind's values are the
/// values of all branches: `kind` is `membership` or `subscription`).
fn properties(doc: &Value, schema: &Value) -> Fields {
    if let Some(branches) = schema.get("oneOf").and_then(Value::as_array) {
        let mut all = Fields::new();
        for (name, kind) in branches.iter().flat_map(|b| properties(doc, resolve(doc, b))) {
            match (all.get_mut(&name), kind) {
                (Some(Kind::Enum(known)), Kind::Enum(more)) => {
                    known.extend(more.into_iter().filter(|v| !known.contains(v)).collect::<Vec<_>>());
                }
                (Some(_), _) => {}
                (None, kind) => {
                    all.insert(name, kind);
                }
            }
        }
        return all;
    }
    schema
        .get("properties")
        .and_then(Value::as_object)
        .map(|p| p.iter().map(|(k, v)| (k.clone(), kind_of(doc, v))).collect())
        .unwrap_or_default()
}

/// The fields of one row of `POST /import/{entity}`.
pub(super) fn row_fields(entity: Entity) -> Result<Fields, ClientError> {
    let doc: Value = serde_yaml_ng::from_str(gymapi_contract::DOCUMENT)
        .map_err(|e| ClientError::Service(format!("the embedded openapi.yaml does not parse: {e}")))?;
    let op = &doc["paths"][format!("/import/{}", entity.name())]["post"];
    let request = resolve(&doc, &op["requestBody"]["content"]["application/json"]["schema"]);
    let row = resolve(&doc, &request["properties"]["rows"]["items"]);
    let fields = properties(&doc, row);
    if fields.is_empty() {
        return Err(ClientError::Service(format!("the embedded openapi.yaml has no row schema for {}", entity.name())));
    }
    Ok(fields)
}

/// The kind of the field at `path` (`price.amount`), if a cell can fill it.
pub(super) fn leaf(fields: &Fields, path: &[String]) -> Option<Kind> {
    let (first, rest) = path.split_first()?;
    match (fields.get(first)?, rest) {
        (Kind::Object(_), []) => None,
        (kind, []) => Some(kind.clone()),
        (Kind::Object(inner), rest) => leaf(inner, rest),
        (Kind::Money, [part]) if part == "amount" => Some(Kind::Integer),
        (Kind::Money, [part]) if part == "currency" => Some(Kind::Text),
        _ => None,
    }
}

/// Every field a column can name, sorted.
pub(super) fn field_names(fields: &Fields, prefix: &str) -> Vec<String> {
    fields
        .iter()
        .flat_map(|(name, kind)| match kind {
            Kind::Object(inner) => field_names(inner, &format!("{prefix}{name}.")),
            _ => vec![format!("{prefix}{name}")],
        })
        .collect()
}
