//! Small wire types the generated code uses beside poem-openapi's own.

use std::borrow::Cow;

use poem_openapi::{
    registry::{MetaSchemaRef, Registry},
    types::{ParseError, ParseFromJSON, ParseResult, ToJSON, Type},
};
use serde_json::Value;

/// A field that is always present and may be `null` (OpenAPI `required` + `nullable`).
///
/// poem-openapi never lists an `Option<T>` field as required; records of this API always carry every
/// field, so their optional values use this wrapper instead.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct Nullable<T>(pub Option<T>);

impl<T> From<Option<T>> for Nullable<T> {
    fn from(value: Option<T>) -> Self {
        Self(value)
    }
}

impl<T> Nullable<T> {
    pub fn as_ref(&self) -> Option<&T> {
        self.0.as_ref()
    }
}

impl<T: Type> Type for Nullable<T> {
    const IS_REQUIRED: bool = true;
    type RawValueType = T::RawValueType;
    type RawElementValueType = T::RawElementValueType;

    fn name() -> Cow<'static, str> {
        format!("nullable_{}", T::name()).into()
    }

    fn schema_ref() -> MetaSchemaRef {
        T::schema_ref()
    }

    fn register(registry: &mut Registry) {
        T::register(registry);
    }

    fn as_raw_value(&self) -> Option<&Self::RawValueType> {
        self.0.as_ref().and_then(|v| v.as_raw_value())
    }

    fn raw_element_iter<'a>(&'a self) -> Box<dyn Iterator<Item = &'a Self::RawElementValueType> + 'a> {
        match &self.0 {
            Some(v) => v.raw_element_iter(),
            None => Box::new(std::iter::empty()),
        }
    }
}

impl<T: ParseFromJSON> ParseFromJSON for Nullable<T> {
    fn parse_from_json(value: Option<Value>) -> ParseResult<Self> {
        match value {
            None | Some(Value::Null) => Ok(Self(None)),
            Some(v) => T::parse_from_json(Some(v)).map(|v| Self(Some(v))).map_err(ParseError::propagate),
        }
    }
}

impl<T: ToJSON> ToJSON for Nullable<T> {
    fn to_json(&self) -> Option<Value> {
        match &self.0 {
            Some(v) => v.to_json(),
            None => Some(Value::Null),
        }
    }
}

/// A calendar date, `YYYY-MM-DD` (OpenAPI `format: date`; poem-openapi's own `NaiveDate` says
/// `naive-date`, which no client generator knows).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Date(pub chrono::NaiveDate);

impl From<chrono::NaiveDate> for Date {
    fn from(d: chrono::NaiveDate) -> Self {
        Self(d)
    }
}

impl Type for Date {
    const IS_REQUIRED: bool = true;
    type RawValueType = Self;
    type RawElementValueType = Self;

    fn name() -> Cow<'static, str> {
        "string_date".into()
    }

    fn schema_ref() -> MetaSchemaRef {
        MetaSchemaRef::Inline(Box::new(poem_openapi::registry::MetaSchema::new_with_format("string", "date")))
    }

    fn as_raw_value(&self) -> Option<&Self::RawValueType> {
        Some(self)
    }

    fn raw_element_iter<'a>(&'a self) -> Box<dyn Iterator<Item = &'a Self::RawElementValueType> + 'a> {
        Box::new(self.as_raw_value().into_iter())
    }
}

impl ParseFromJSON for Date {
    fn parse_from_json(value: Option<Value>) -> ParseResult<Self> {
        match value.unwrap_or_default() {
            Value::String(s) => chrono::NaiveDate::parse_from_str(&s, "%Y-%m-%d")
                .map(Self)
                .map_err(|_| ParseError::custom("expected a date, YYYY-MM-DD")),
            other => Err(ParseError::expected_type(other)),
        }
    }
}

impl ToJSON for Date {
    fn to_json(&self) -> Option<Value> {
        Some(Value::String(self.0.format("%Y-%m-%d").to_string()))
    }
}
