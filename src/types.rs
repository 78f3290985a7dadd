//! Small wire types the generated code uses beside poem-openapi's own.

use std::borrow::Cow;

use poem_openapi::{
    registry::{MetaSchemaRef, Registry},
    types::{ParseError, ParseFromJSON, ParseFromParameter, ParseResult, ToJSON, Type},
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

/// How a [`Date`] is read and written.
const DATE_FORMAT: &str = "%Y-%m-%d";

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
            Value::String(s) => chrono::NaiveDate::parse_from_str(&s, DATE_FORMAT)
                .map(Self)
                .map_err(|_| ParseError::custom("expected a date, YYYY-MM-DD")),
            other => Err(ParseError::expected_type(other)),
        }
    }
}

impl ParseFromParameter for Date {
    fn parse_from_parameter(value: &str) -> ParseResult<Self> {
        chrono::NaiveDate::parse_from_str(value, DATE_FORMAT)
            .ok()
            .filter(|_| value.len() == 10)
            .map(Self)
            .ok_or_else(|| ParseError::custom("expected a date, YYYY-MM-DD"))
    }
}

impl ToJSON for Date {
    fn to_json(&self) -> Option<Value> {
        Some(Value::String(self.0.format(DATE_FORMAT).to_string()))
    }
}

/// A YAML document response: a document serving itself, as `application/yaml` (RFC 9512) or, to a
/// client whose `Accept` names `text/plain` (or `text/*`) and not YAML, as `text/plain`. Both are
/// documented, YAML first: generators that read no YAML responses (openapi-python-client) read the
/// text one without being told to.
#[derive(Debug)]
pub struct Yaml {
    text: &'static str,
    media: &'static str,
}

impl Yaml {
    const MEDIA: [&'static str; 2] = ["application/yaml", "text/plain"];

    /// `text` in the media type `accept` (the request's `Accept`) asks for.
    pub fn negotiated(text: &'static str, accept: Option<&str>) -> Self {
        // The media ranges the client takes (a `q` of 0 refuses one), without their parameters.
        let ranges: Vec<&str> = accept
            .into_iter()
            .flat_map(|a| a.split(','))
            .filter_map(|range| {
                let mut parts = range.split(';');
                let media = parts.next().unwrap_or_default().trim();
                let q = parts.find_map(|p| p.trim().strip_prefix("q=")).and_then(|q| q.parse::<f32>().ok());
                (q.unwrap_or(1.0) > 0.0).then_some(media)
            })
            .collect();
        let yaml = ranges.iter().any(|r| matches!(*r, "application/yaml" | "application/*" | "*/*"));
        let text_only = !yaml && ranges.iter().any(|r| matches!(*r, "text/plain" | "text/*"));
        Self { text, media: if text_only { Self::MEDIA[1] } else { Self::MEDIA[0] } }
    }
}

impl poem_openapi::ResponseContent for Yaml {
    fn media_types() -> Vec<poem_openapi::registry::MetaMediaType> {
        Self::MEDIA
            .into_iter()
            .map(|content_type| poem_openapi::registry::MetaMediaType {
                content_type,
                // No `type`: YAML text, which a tool that parses YAML bodies reads as a mapping.
                schema: poem_openapi::registry::MetaSchemaRef::Inline(Box::new(
                    poem_openapi::registry::MetaSchema::ANY,
                )),
            })
            .collect()
    }
}

impl poem::IntoResponse for Yaml {
    fn into_response(self) -> poem::Response {
        poem::Response::builder().content_type(self.media).body(self.text)
    }
}

/// `Payload` for a JSON payload type of ours (`wire::Json`, `body::Body`): the content type and
/// schema of poem-openapi's `Json`, so the emitted document is the same.
macro_rules! json_payload {
    ($payload:ident) => {
        impl<T: poem_openapi::types::Type> poem_openapi::payload::Payload for $payload<T> {
            // JSON's media type as the documents name it, with no `charset` (RFC 8259 defines
            // none: JSON is UTF-8): contract testers compare the header with the document's.
            const CONTENT_TYPE: &'static str = "application/json";

            fn check_content_type(content_type: &str) -> bool {
                <poem_openapi::payload::Json<T> as poem_openapi::payload::Payload>::check_content_type(content_type)
            }

            fn schema_ref() -> poem_openapi::registry::MetaSchemaRef {
                <T as poem_openapi::types::Type>::schema_ref()
            }

            fn register(registry: &mut poem_openapi::registry::Registry) {
                <T as poem_openapi::types::Type>::register(registry);
            }
        }
    };
}
use json_payload;

/// Writing response bodies straight to bytes, the same as poem-openapi's `ToJSON` would.
///
/// poem-openapi's `Json` first builds a `serde_json::Value` of the whole body and then writes that
/// tree out; for one member that tree was about half of the instructions of turning the answer
/// into bytes. The generated schemas also derive `serde::Serialize`, and every field goes through
/// [`Wire`], which writes each value the way its `ToJSON` does, but for times, which it writes in
/// the API's one form (`records::rfc3339`: UTC, microseconds, `Z`): dates as `YYYY-MM-DD`, `Nullable` as `null`,
/// emails as their text. An undefined `MaybeUndefined` is left out, as `ToJSON` leaves it out. In
/// debug builds (every test) each body is also built the old way and the two are compared, so a
/// difference fails the request that shows it.
pub mod wire {
    use poem_openapi::types::{Email, MaybeUndefined, ToJSON};
    use serde::{Serialize, Serializer};

    use super::{Date, Nullable};

    /// A value of a generated schema's field, written as its `ToJSON` writes it.
    pub trait Wire {
        fn write<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error>;
    }

    /// `serialize_with` of every generated field.
    pub fn ser<T: Wire, S: Serializer>(value: &T, s: S) -> Result<S::Ok, S::Error> {
        value.write(s)
    }

    macro_rules! as_serde {
        ($($t:ty),*) => {$(
            impl Wire for $t {
                fn write<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                    self.serialize(s)
                }
            }
        )*};
    }
    as_serde!(String, bool, i32, i64, uuid::Uuid, serde_json::Value);

    impl Wire for f64 {
        fn write<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
            // `ToJSON` has no number for NaN or infinity either; it drops the field, which serde
            // cannot do from here, so such a value is `null`.
            if self.is_finite() { s.serialize_f64(*self) } else { s.serialize_none() }
        }
    }

    /// Every time of a body in the one form of links and webhook envelopes: UTC, microseconds,
    /// `Z` (poem-openapi's own writes `+00:00` and as many digits as the value has).
    impl Wire for chrono::DateTime<chrono::Utc> {
        fn write<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
            s.serialize_str(&crate::records::rfc3339(*self))
        }
    }

    impl Wire for Date {
        fn write<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
            s.collect_str(&self.0.format(super::DATE_FORMAT))
        }
    }

    impl Wire for Email {
        fn write<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
            s.serialize_str(&self.0)
        }
    }

    /// A body as a JSON tree, written exactly as a response writes it (for a webhook's `data`,
    /// which must equal what the API answers).
    pub fn value<T: Wire>(body: &T) -> serde_json::Value {
        serde_json::to_value(By(body)).unwrap_or_default()
    }

    /// Writes a [`Wire`] value where serde wants a `Serialize` one.
    struct By<'a, T>(&'a T);

    impl<T: Wire> Serialize for By<'_, T> {
        fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
            self.0.write(s)
        }
    }

    impl<T: Wire> Wire for Option<T> {
        fn write<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
            match self {
                Some(v) => v.write(s),
                None => s.serialize_none(),
            }
        }
    }

    impl<T: Wire> Wire for Nullable<T> {
        fn write<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
            self.0.write(s)
        }
    }

    impl<T: Wire> Wire for MaybeUndefined<T> {
        fn write<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
            match self {
                MaybeUndefined::Value(v) => v.write(s),
                _ => s.serialize_none(),
            }
        }
    }

    impl<T: Wire> Wire for Vec<T> {
        fn write<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
            s.collect_seq(self.iter().map(By))
        }
    }

    impl<T: Wire> Wire for std::collections::BTreeMap<String, T> {
        fn write<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
            s.collect_map(self.iter().map(|(k, v)| (k, By(v))))
        }
    }

    /// Whether two bodies say the same: equal, except that a time may be written in another
    /// RFC 3339 form of the same instant (`Z` and microseconds here, `+00:00` in `ToJSON`).
    #[cfg(debug_assertions)]
    fn same_body(a: &serde_json::Value, b: &serde_json::Value) -> bool {
        use serde_json::Value;
        let instant = |s: &str| chrono::DateTime::parse_from_rfc3339(s).ok();
        match (a, b) {
            (Value::String(x), Value::String(y)) => x == y || instant(x).is_some_and(|t| Some(t) == instant(y)),
            (Value::Array(x), Value::Array(y)) => x.len() == y.len() && x.iter().zip(y).all(|(x, y)| same_body(x, y)),
            (Value::Object(x), Value::Object(y)) => {
                x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| same_body(v, w)))
            }
            _ => a == b,
        }
    }

    /// A response body: the JSON payload of every generated response, written without the
    /// intermediate tree (see the module).
    #[derive(Debug)]
    pub struct Json<T>(pub T);

    super::json_payload!(Json);

    impl<T: Wire + ToJSON + Send> poem::IntoResponse for Json<T> {
        fn into_response(self) -> poem::Response {
            let mut body = Vec::with_capacity(512);
            let written = self.0.write(&mut serde_json::Serializer::new(&mut body));
            #[cfg(debug_assertions)]
            {
                let ours: serde_json::Value = serde_json::from_slice(&body).unwrap_or_default();
                let theirs = self.0.to_json().unwrap_or_default();
                assert!(
                    same_body(&ours, &theirs),
                    "a response body differs from what ToJSON writes:\n{ours}\n{theirs}"
                );
            }
            match written {
                Ok(()) => poem::Response::builder()
                    .content_type(<Self as poem_openapi::payload::Payload>::CONTENT_TYPE)
                    .body(body),
                Err(e) => poem::error::ResponseError::as_response(&crate::errors::ApiError::internal(anyhow::anyhow!(
                    "response body: {e}"
                ))),
            }
        }
    }
}

/// Request bodies parsed once.
///
/// The gate (`app.rs`) parses every JSON body to check it against openapi.yaml. It leaves that
/// tree in the request's extensions as [`Parsed`], and [`Body`], the payload type of every
/// generated operation with a body, builds the operation's type from it. poem-openapi's `Json`
/// would read the bytes and parse them a second time; for a 500-row import batch that second
/// parse, with its allocations, was a few percent of the server's time.
pub mod body {
    use std::sync::{Arc, Mutex, PoisonError};

    use poem::{Request, RequestBody};
    use poem_openapi::{
        error::ParseRequestPayloadError,
        payload::{ParsePayload, Payload},
        types::ParseFromJSON,
    };
    use serde_json::Value;

    /// The body the gate parsed, for the handler to take (once).
    #[derive(Clone)]
    pub struct Parsed(Arc<Mutex<Option<Value>>>);

    impl Parsed {
        pub fn new(value: Value) -> Self {
            Self(Arc::new(Mutex::new(Some(value))))
        }

        fn take(&self) -> Option<Value> {
            self.0.lock().unwrap_or_else(PoisonError::into_inner).take()
        }
    }

    /// A JSON request body: poem-openapi's `Json` in the document, parsed from the gate's tree.
    #[derive(Debug)]
    pub struct Body<T>(pub T);

    super::json_payload!(Body);

    impl<T: ParseFromJSON> ParsePayload for Body<T> {
        const IS_REQUIRED: bool = T::IS_REQUIRED;

        async fn from_request(request: &Request, body: &mut RequestBody) -> poem::Result<Self> {
            let value = match request.extensions().get::<Parsed>().and_then(Parsed::take) {
                Some(value) => value,
                // Not through the gate (it parses every body it lets through): parse it here.
                None => <poem_openapi::payload::Json<Value> as ParsePayload>::from_request(request, body).await?.0,
            };
            T::parse_from_json(Some(value))
                .map(Self)
                .map_err(|err| ParseRequestPayloadError { reason: err.into_message() }.into())
        }
    }

    poem_openapi::impl_apirequest_for_payload!(Body<T>, T: ParseFromJSON);
}
