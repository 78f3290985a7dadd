//! What a request's field is told when it breaks its schema: one sentence per problem.

use jsonschema::{
    JsonType,
    error::{TypeKind, ValidationErrorKind},
};

fn type_name(t: JsonType) -> &'static str {
    match t {
        JsonType::Array => "an array",
        JsonType::Boolean => "true or false",
        JsonType::Integer => "an integer",
        JsonType::Null => "null",
        JsonType::Number => "a number",
        JsonType::Object => "an object",
        JsonType::String => "a string",
    }
}

/// The pattern of `from` and `to` (`openapi.yaml`): a day the calendar has, or an RFC 3339 time.
const DAY_OR_INSTANT: &str = concat!(
    r"^(\d{4}-((0[1-9]|1[0-2])-(0[1-9]|1\d|2[0-8])|(0[13-9]|1[0-2])-(29|30)|(0[13578]|1[02])-31)",
    r"|(\d{2}(0[48]|[2468][048]|[13579][26])|([02468][048]|[13579][26])00)-02-29)",
    r"([Tt]([01]\d|2[0-3]):[0-5]\d:[0-5]\d(\.\d{1,9})?([Zz]|[+-]([01]\d|2[0-3]):[0-5]\d))?$",
);

/// What a pattern of the documents asks for, in words, where a sentence can say it.
fn pattern_in_words(pattern: &str) -> Option<&'static str> {
    (pattern == DAY_OR_INSTANT).then_some("a date (YYYY-MM-DD) or an RFC 3339 date-time")
}

/// A sentence for one problem, in the style of Laravel's messages.
pub(super) fn describe(kind: &ValidationErrorKind, name: &str, noun: &str) -> String {
    let subject = format!("The {name} {noun}");
    match kind {
        ValidationErrorKind::Type { kind } => {
            let types: Vec<&str> = match kind {
                TypeKind::Single(t) => vec![type_name(*t)],
                TypeKind::Multiple(set) => set.into_iter().map(type_name).collect(),
            };
            format!("{subject} must be {}.", types.join(" or "))
        }
        ValidationErrorKind::Enum { options } => {
            let allowed: Vec<String> = options
                .as_array()
                .map(|a| {
                    a.iter()
                        .filter(|v| !v.is_null())
                        .map(|v| v.as_str().map_or_else(|| v.to_string(), str::to_string))
                        .collect()
                })
                .unwrap_or_default();
            format!("{subject} must be one of: {}.", allowed.join(", "))
        }
        ValidationErrorKind::MinLength { limit } if *limit == 1 => {
            format!("{subject} must not be empty.")
        }
        ValidationErrorKind::MinLength { limit } => {
            format!("{subject} must be at least {limit} characters.")
        }
        ValidationErrorKind::MaxLength { limit } => {
            format!("{subject} must not be longer than {limit} characters.")
        }
        ValidationErrorKind::Minimum { limit } => format!("{subject} must be at least {limit}."),
        ValidationErrorKind::Maximum { limit } => {
            format!("{subject} must not be greater than {limit}.")
        }
        ValidationErrorKind::MinItems { limit } => {
            format!("{subject} must have at least {limit} item(s).")
        }
        ValidationErrorKind::MaxItems { limit } => {
            format!("{subject} must not have more than {limit} items.")
        }
        ValidationErrorKind::Pattern { pattern } => match pattern_in_words(pattern) {
            Some(words) => format!("{subject} must be {words}."),
            None => format!("{subject} format is invalid."),
        },
        ValidationErrorKind::Format { format } => match format.as_str() {
            "email" => format!("{subject} must be a valid email address."),
            "date" => format!("{subject} must be a date (YYYY-MM-DD)."),
            "date-time" => {
                format!("{subject} must be an RFC 3339 date-time (2026-01-31T09:00:00Z).")
            }
            "uuid" => format!("{subject} must be a UUID."),
            other => format!("{subject} must be a valid {other}."),
        },
        other => format!("{subject} is invalid ({}).", other.keyword()),
    }
}
