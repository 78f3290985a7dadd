//! The shapes the generator supports, and the errors it gives for what it does not.

use super::generate;

/// A document with `schemas` under `components.schemas` and `paths` as they are given (YAML).
fn document(schemas: &str, paths: &str) -> String {
    let indent = |text: &str, by: usize| text.lines().map(|l| format!("{}{l}\n", " ".repeat(by))).collect::<String>();
    format!(
        "openapi: 3.0.3\ninfo: {{title: t, version: '1'}}\npaths:\n{}components:\n  schemas:\n{}",
        indent(paths, 2),
        indent(schemas, 4)
    )
}

const THING: &str = "
Thing:
  type: object
  required: [id, name, note]
  properties:
    id: {type: string, format: uuid}
    name: {type: string, description: What it is called.}
    note: {type: string, nullable: true}
    count: {type: integer, format: int64}
    maybe: {type: string, format: date, nullable: true}
    colour: {type: string, enum: [deep_red, blue]}
";

const GET_THING: &str = "
/things/{id}:
  get:
    operationId: getThing
    tags: [Things]
    parameters:
      - {name: id, in: path, required: true, schema: {type: string}}
      - {name: per_page, in: query, schema: {type: integer, format: int64, default: 25}}
    responses:
      '200':
        description: The thing.
        content: {application/json: {schema: {$ref: '#/components/schemas/Thing'}}}
";

fn generated(schemas: &str, paths: &str) -> String {
    generate(&document(schemas, paths)).unwrap_or_else(|e| panic!("{e}"))
}

fn refused(schemas: &str, paths: &str) -> String {
    match generate(&document(schemas, paths)) {
        Ok(_) => panic!("generated code for a document it should refuse"),
        Err(e) => e,
    }
}

/// Folds the generator's formatting so a test can look for a declaration on one line.
fn flat(code: &str) -> String {
    code.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[test]
fn an_object_schema_is_a_struct_whose_fields_say_required_and_nullable() {
    let code = flat(&generated(THING, GET_THING));
    assert!(code.contains("pub struct Thing {"), "{code}");
    for field in [
        "pub id: uuid::Uuid",
        "pub name: String",
        "pub note: Nullable<String>",
        "pub count: Option<i64>",
        "pub maybe: MaybeUndefined<Date>",
        "pub colour: Option<ThingColour>",
    ] {
        assert!(code.contains(field), "no `{field}` in {code}");
    }
    assert!(code.contains("///What it is called. #[oai(rename = \"name\")]"), "{code}");
}

#[test]
fn an_inline_string_enum_is_named_after_its_schema_and_property() {
    let code = flat(&generated(THING, GET_THING));
    assert!(code.contains("pub enum ThingColour {"), "{code}");
    assert!(code.contains("#[oai(rename = \"deep_red\")] #[serde(rename = \"deep_red\")] DeepRed"), "{code}");
    assert!(code.contains("Self::DeepRed => \"deep_red\""), "{code}");
    assert!(code.contains("pub const ALL: &'static [Self] = &[Self::DeepRed, Self::Blue];"), "{code}");
}

#[test]
fn an_operation_is_a_params_struct_a_response_enum_a_trait_method_and_a_route() {
    let code = flat(&generated(THING, GET_THING));
    assert!(code.contains("pub struct GetThingParams { pub id: String, pub per_page: i64, }"), "{code}");
    assert!(code.contains("fn default_get_thing_per_page() -> i64 { 25 }"), "{code}");
    assert!(code.contains("pub enum GetThingResponse {"), "{code}");
    assert!(code.contains("#[oai(status = 200u16)] Ok(crate::types::wire::Json<Thing>)"), "{code}");
    assert!(code.contains("pub trait ThingsApi: Send + Sync + 'static {"), "{code}");
    assert!(code.contains("fn get_thing( &self, ctx: &RequestContext, params: GetThingParams, )"), "{code}");
    assert!(code.contains("path = \"/things/:id\", method = \"get\", operation_id = \"getThing\""), "{code}");
    assert!(code.contains("impl<H: ThingsApi> Api<H> {"), "{code}");
    // No 422 documented: no handler turns poem-openapi's parse failures into one.
    assert!(!code.contains("bad_request"), "{code}");
}

#[test]
fn a_documented_422_turns_parse_failures_into_it() {
    let paths = "
/things:
  post:
    operationId: createThing
    tags: [Things]
    requestBody:
      required: true
      content: {application/json: {schema: {$ref: '#/components/schemas/Thing'}}}
    responses:
      '201':
        description: Created.
        content: {application/json: {schema: {$ref: '#/components/schemas/Thing'}}}
      '422':
        description: Invalid.
        content: {application/json: {schema: {$ref: '#/components/schemas/Thing'}}}
";
    let code = flat(&generated(THING, paths));
    assert!(code.contains("pub struct CreateThingParams { pub body: Thing, }"), "{code}");
    assert!(code.contains("body: crate::types::body::Body<Thing>"), "{code}");
    assert!(code.contains("#[oai(bad_request_handler = \"CreateThingResponse::bad_request\")]"), "{code}");
}

#[test]
fn what_it_cannot_generate_is_refused_at_its_spot() {
    let op = |responses: &str| {
        format!(
            "/things:\n  get:\n    operationId: listThings\n    tags: [Things]\n    responses:\n{}",
            responses.lines().map(|l| format!("      {l}\n")).collect::<String>()
        )
    };
    let answers = |schema: &str| {
        op(&format!(
            "'200':\n  description: ok\n  content: {{application/json: {{schema: {{$ref: '#/components/schemas/{schema}'}}}}}}"
        ))
    };
    let cases = [
        (
            format!("{THING}Alias: {{$ref: '#/components/schemas/Thing'}}"),
            answers("Alias"),
            "#/components/schemas/Alias: a schema alias ($ref) is not supported",
        ),
        (
            format!("{THING}Odd:\n  type: object\n  properties:\n    n: {{type: integer}}"),
            answers("Odd"),
            "#/components/schemas/Odd/properties/n: integers need `format: int32` or `format: int64`",
        ),
        (
            format!("{THING}Either:\n  oneOf: [{{type: string}}, {{type: boolean}}]"),
            answers("Either"),
            "#/components/schemas/Either: only object, string-enum and discriminated oneOf schemas may be named components",
        ),
        (
            THING.to_string(),
            op("'2XX':\n  description: ok"),
            "paths./things.get.responses: status ranges are not supported",
        ),
        (
            THING.to_string(),
            op(
                "'418':\n  description: tea\n  content: {application/json: {schema: {$ref: '#/components/schemas/Thing'}}}",
            ),
            "paths./things.get.responses.418: status 418 has no variant name",
        ),
        (
            THING.to_string(),
            "/things:\n  get:\n    operationId: listThings\n    responses: {}\n".to_string(),
            "paths./things.get: every operation needs exactly one tag",
        ),
    ];
    for (schemas, paths, expected) in cases {
        let error = refused(&schemas, &paths);
        assert!(error.contains(expected), "expected {expected:?}, got {error:?}");
    }
}

#[test]
fn a_yaml_text_response_is_the_yaml_payload_and_other_media_are_refused() {
    let op = |media: &str| {
        format!(
            "/doc:\n  get:\n    operationId: getDoc\n    tags: [Doc]\n    responses:\n      '200':\n        description: it\n        content: {{{media}: {{schema: {{type: string}}}}}}\n"
        )
    };
    let code = flat(&generated(THING, &op("application/yaml")));
    assert!(code.contains("Ok(crate::types::Yaml)"), "{code}");
    let error = refused(THING, &op("text/plain"));
    assert!(error.contains("must be application/json, or application/yaml of a string"), "{error}");
}

#[test]
fn a_schema_no_operation_reaches_becomes_no_type() {
    let schemas = format!(
        "{THING}Event:\n  oneOf: [{{$ref: '#/components/schemas/Thing'}}]\n  discriminator: {{propertyName: name}}\nLoose:\n  type: object\n  properties: {{n: {{type: integer}}}}"
    );
    let code = flat(&generated(&schemas, GET_THING));
    assert!(code.contains("pub struct Thing"), "{code}");
    assert!(!code.contains("Event") && !code.contains("Loose"), "{code}");
}

#[test]
fn a_document_that_is_not_openapi_is_refused() {
    let error = generate("openapi: 3.0.3\npaths: 7\n").map(|_| ()).unwrap_err();
    assert!(error.starts_with("not a valid OpenAPI 3.0 document"), "{error}");
}

#[test]
fn the_3_1_copy_moves_webhooks_and_spells_nullable_as_types() {
    let doc = "openapi: 3.0.3\ninfo: {title: t, version: 1.0.0}\npaths: {}\nx-webhooks:\n  thing.made:\n    post:\n      responses: {'200': {description: ok}}\ncomponents:\n  schemas:\n    Thing:\n      type: object\n      properties:\n        name: {type: string, nullable: true}\n        state: {type: string, enum: [on, off], nullable: true}\n        size: {type: integer, nullable: false}\n";
    let v31: serde_yaml_ng::Value = serde_yaml_ng::from_str(&crate::openapi_3_1(doc).unwrap()).unwrap();
    assert_eq!(v31["openapi"].as_str(), Some("3.1.0"));
    assert!(v31.get("x-webhooks").is_none() && v31["webhooks"].get("thing.made").is_some(), "{v31:?}");
    let props = &v31["components"]["schemas"]["Thing"]["properties"];
    let name: serde_yaml_ng::Value = serde_yaml_ng::from_str("{type: [string, 'null']}").unwrap();
    assert_eq!(props["name"], name);
    let state: serde_yaml_ng::Value =
        serde_yaml_ng::from_str("{type: [string, 'null'], enum: [on, off, null]}").unwrap();
    assert_eq!(props["state"], state);
    let size: serde_yaml_ng::Value = serde_yaml_ng::from_str("{type: integer}").unwrap();
    assert_eq!(props["size"], size);
    let untyped = doc.replace("{type: string, nullable: true}", "{nullable: true}");
    let error = crate::openapi_3_1(&untyped).unwrap_err();
    assert_eq!(
        error,
        "#/components/schemas/Thing/properties/name: a nullable schema needs a `type` to become OpenAPI 3.1"
    );
}

#[test]
fn the_3_1_copy_quotes_dates_and_times_but_not_in_texts() {
    let doc = "openapi: 3.0.3\ninfo:\n  title: t\n  version: 1.0.0\n  description: |\n    Days:\n    - 2026-11-20\npaths: {}\ncomponents:\n  schemas:\n    Thing:\n      type: object\n      properties:\n        at: {type: string, format: date-time, example: '2026-11-20T08:02:00.000000Z'}\n        day: {type: string, format: date, example: '2026-11-20'}\n        days: {type: array, items: {type: string}, example: ['2026-11-21']}\n        name: {type: string, example: '2026-11 plan'}\n";
    let v31 = crate::openapi_3_1(doc).unwrap();
    for quoted in ["'2026-11-20T08:02:00.000000Z'", "example: '2026-11-20'", "- '2026-11-21'"] {
        assert!(v31.contains(quoted), "{quoted} in {v31}");
    }
    assert!(v31.contains("\n    - 2026-11-20\n"), "a description keeps its text: {v31}");
    assert!(v31.contains("example: 2026-11 plan"), "{v31}");
    let again: serde_yaml_ng::Value = serde_yaml_ng::from_str(&v31).unwrap();
    assert_eq!(again["components"]["schemas"]["Thing"]["properties"]["at"]["example"], "2026-11-20T08:02:00.000000Z");
}

/// Each document's OpenAPI 3.1 copy, as the server serves it, is the one released beside its
/// version in `releases/3.1/` (`.ci/releases` checks that such a file exists and never changes).
#[test]
fn the_released_3_1_copies_are_the_served_ones() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    for (document, stem) in [("openapi.yaml", "openapi"), ("openapi-devices.yaml", "openapi-devices")] {
        let text = std::fs::read_to_string(root.join(document)).unwrap();
        let version = text.lines().find_map(|l| l.strip_prefix("  version: ")).unwrap().trim();
        let released = root.join(format!("releases/3.1/{stem}-{version}.yaml"));
        let released = std::fs::read_to_string(&released).unwrap_or_else(|e| panic!("{}: {e}", released.display()));
        assert!(
            released == crate::openapi_3_1(&text).unwrap(),
            "releases/3.1/{stem}-{version}.yaml is not the 3.1 copy of {document}"
        );
    }
}
