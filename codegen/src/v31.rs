//! The OpenAPI 3.1 copy of a 3.0 document, for generators that read webhooks only from 3.1's
//! `webhooks` (openapi-typescript, openapi-generator): the same operations, schemas and texts,
//! with what 3.1 spells differently spelled its way. The 3.0 document stays the source.

use serde_yaml_ng::{Mapping, Value};

/// `document` (OpenAPI 3.0) as OpenAPI 3.1: `openapi: 3.1.0`; `x-webhooks` as `webhooks`; every
/// `nullable: true` as a `type` that also names `"null"` (and `null` among the values of a closed
/// enum); `nullable` dropped. A nullable schema without a `type` is refused, naming it: 3.1 would
/// need another shape for it, which this document does not use.
pub fn openapi_3_1(document: &str) -> Result<String, String> {
    let mut doc: Value =
        serde_yaml_ng::from_str(document).map_err(|e| format!("not a valid OpenAPI 3.0 document: {e}"))?;
    let root = doc.as_mapping_mut().ok_or("the document is not a mapping")?;
    root.insert("openapi".into(), "3.1.0".into());
    if let Some(hooks) = root.remove("x-webhooks") {
        root.insert("webhooks".into(), hooks);
    }
    nullable_as_types(&mut doc, "#")?;
    let text = serde_yaml_ng::to_string(&doc).map_err(|e| format!("cannot write the 3.1 document: {e}"))?;
    Ok(quote_dates(&text))
}

/// `text` with every plain scalar that a YAML 1.1 loader (PyYAML, js-yaml) would read as a date or
/// a time quoted, so that it stays the string the 3.0 document has: the writer quotes only what
/// YAML 1.2 reads as another type. Lines of block scalars (descriptions) are left as they are.
fn quote_dates(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 1024);
    let mut block: Option<usize> = None;
    for line in text.lines() {
        let indent = line.len() - line.trim_start().len();
        if let Some(at) = block {
            if line.trim().is_empty() || indent > at {
                out.push_str(line);
                out.push('\n');
                continue;
            }
            block = None;
        }
        let value_at =
            line.rfind(": ").map(|i| i + 2).or_else(|| line.trim_start().starts_with("- ").then_some(indent + 2));
        match value_at {
            Some(at) if looks_like_a_date(&line[at..]) => {
                out.push_str(&line[..at]);
                out.push('\'');
                out.push_str(&line[at..]);
                out.push('\'');
            }
            _ => out.push_str(line),
        }
        out.push('\n');
        // A block scalar's indicator ends its line, alone or after a space.
        let last = line.trim_end().rsplit(' ').next().unwrap_or_default();
        if ["|", "|-", "|+", ">", ">-", ">+"].contains(&last) {
            block = Some(indent);
        }
    }
    out
}

/// Whether a plain scalar is a YAML 1.1 timestamp: a date (`2026-11-20`), alone or followed by a
/// time and a zone.
fn looks_like_a_date(value: &str) -> bool {
    let b = value.as_bytes();
    let digits = |r: std::ops::Range<usize>| b.get(r).is_some_and(|d| d.iter().all(u8::is_ascii_digit));
    digits(0..4)
        && b.get(4) == Some(&b'-')
        && digits(5..7)
        && b.get(7) == Some(&b'-')
        && digits(8..10)
        && value[10..].bytes().all(|c| c.is_ascii_digit() || b"Tt:.Zz+- ".contains(&c))
}

fn nullable_as_types(node: &mut Value, pointer: &str) -> Result<(), String> {
    match node {
        Value::Mapping(m) => {
            if let Some(Value::Bool(nullable)) = m.get("nullable").cloned() {
                m.remove("nullable");
                if nullable {
                    with_null(m, pointer)?;
                }
            }
            for (k, v) in m.iter_mut() {
                let key = k.as_str().map_or_else(|| format!("{k:?}"), str::to_string);
                nullable_as_types(v, &format!("{pointer}/{}", key.replace('~', "~0").replace('/', "~1")))?;
            }
        }
        Value::Sequence(items) => {
            for (i, v) in items.iter_mut().enumerate() {
                nullable_as_types(v, &format!("{pointer}/{i}"))?;
            }
        }
        _ => {}
    }
    Ok(())
}

fn with_null(schema: &mut Mapping, pointer: &str) -> Result<(), String> {
    let Some(Value::String(kind)) = schema.get("type").cloned() else {
        return Err(format!("{pointer}: a nullable schema needs a `type` to become OpenAPI 3.1"));
    };
    schema.insert("type".into(), Value::Sequence(vec![kind.into(), "null".into()]));
    if let Some(Value::Sequence(values)) = schema.get_mut("enum") {
        if !values.contains(&Value::Null) {
            values.push(Value::Null);
        }
    }
    Ok(())
}
