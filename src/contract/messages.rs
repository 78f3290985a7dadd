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

/// A sentence for one problem, in the style of Laravel's messages. `pattern_words` is what the
/// field's pattern asks for in words, where its schema says it (`x-pattern-words`).
pub(super) fn describe(kind: &ValidationErrorKind, name: &str, noun: &str, pattern_words: Option<&str>) -> String {
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
        ValidationErrorKind::Pattern { .. } => match pattern_words {
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
