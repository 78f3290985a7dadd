//! Turns an OpenAPI 3.0 document into the poem-openapi layer of a gymapi service, as Rust source:
//!
//! - one `Object` struct per object schema and one `Enum` per string enum in `components.schemas`
//!   (inline enums become `<Schema><Property>` enums);
//! - per operation: a `<Operation>Params` struct (parameters and body) and a `<Operation>Response`
//!   `ApiResponse` enum with one variant per documented status;
//! - one handler trait per tag (`MembersApi`, ...) whose methods the hand-written handlers
//!   implement, and `Api<H>`, the `#[OpenApi]` service that routes every operation to them.
//!
//! Anything in the document this generator does not understand is an error naming the spot, so the
//! build stops there. The build script of the `gymapi` crate calls [`generate`] for each of its
//! documents; the module that includes the output provides `validation_error_from_parse`, which
//! turns poem-openapi's parse failures into the document's 422 body.

use std::{collections::BTreeMap, fmt::Write as _};

use heck::{ToSnakeCase, ToUpperCamelCase};
use openapiv3::{
    IntegerFormat, OpenAPI, Operation, Parameter, ParameterSchemaOrContent, ReferenceOr, Schema, SchemaKind,
    StatusCode, StringFormat, Type, VariantOrUnknownOrEmpty,
};
use proc_macro2::TokenStream;
use quote::{format_ident, quote};

#[cfg(test)]
mod tests;
mod v31;

pub use v31::openapi_3_1;

/// The Rust source of the layer `document` (YAML or JSON) describes, formatted; or what in the
/// document it cannot generate, with the spot.
pub fn generate(document: &str) -> Result<String, String> {
    let mut doc: serde_json::Value =
        serde_yaml_ng::from_str(document).map_err(|e| format!("not a valid OpenAPI 3.0 document: {e}"))?;
    known_values(&mut doc);
    let reached = reached_schemas(&doc);
    let doc: OpenAPI = serde_json::from_value(doc).map_err(|e| format!("not a valid OpenAPI 3.0 document: {e}"))?;
    let tokens = Generator::new(&doc).run(&reached)?;
    let file: syn::File = syn::parse2(tokens).map_err(|e| format!("the generated code does not parse: {e}"))?;
    Ok(prettyplease::unparse(&file))
}

type GenResult<T> = Result<T, String>;

/// An `x-extensible-enum` lists the values the service knows today (a client must expect others
/// later): the service's own types are the closed enum of those values.
fn known_values(v: &mut serde_json::Value) {
    match v {
        serde_json::Value::Object(m) => {
            if let Some(values) = m.remove("x-extensible-enum") {
                m.insert("enum".into(), values);
            }
            m.values_mut().for_each(known_values);
        }
        serde_json::Value::Array(items) => items.iter_mut().for_each(known_values),
        _ => {}
    }
}

/// The component schemas the operations reach, through their parameters, bodies, responses and
/// the schemas those name. Only they become types: a schema no operation reaches (a webhook
/// payload, documented for its receivers) needs none, and may use what this generator does not
/// support (a `oneOf` with a discriminator).
fn reached_schemas(doc: &serde_json::Value) -> std::collections::BTreeSet<String> {
    let mut seen = std::collections::BTreeSet::new();
    let mut todo = vec![&doc["paths"]];
    while let Some(node) = todo.pop() {
        match node {
            serde_json::Value::Object(m) => {
                for (key, value) in m {
                    match (key.as_str(), value.as_str()) {
                        ("$ref", Some(r)) => {
                            if let Some(target) = doc.pointer(r.trim_start_matches('#'))
                                && seen.insert(r.to_string())
                            {
                                todo.push(target);
                            }
                        }
                        _ => todo.push(value),
                    }
                }
            }
            serde_json::Value::Array(items) => todo.extend(items),
            _ => {}
        }
    }
    seen.iter().filter_map(|r| r.strip_prefix("#/components/schemas/")).map(str::to_string).collect()
}

struct Generator<'a> {
    doc: &'a OpenAPI,
    /// Generated items, keyed by type name so that every name is emitted once.
    items: BTreeMap<String, TokenStream>,
}

/// One parameter of an operation, resolved.
struct Param {
    name: String,
    location: &'static str,
    required: bool,
    schema: ReferenceOr<Schema>,
    pointer: String,
}

impl<'a> Generator<'a> {
    fn new(doc: &'a OpenAPI) -> Self {
        Self { doc, items: BTreeMap::new() }
    }

    /// The layer, with a type for each component schema named in `reached`.
    fn run(mut self, reached: &std::collections::BTreeSet<String>) -> GenResult<TokenStream> {
        let components = self.doc.components.as_ref().ok_or("the document has no components")?;
        for (name, schema) in components.schemas.iter().filter(|(name, _)| reached.contains(*name)) {
            let pointer = format!("#/components/schemas/{name}");
            let schema = match schema {
                ReferenceOr::Item(s) => s,
                ReferenceOr::Reference { .. } => {
                    return Err(format!("{pointer}: a schema alias ($ref) is not supported"));
                }
            };
            self.named_schema(name, schema, &pointer)?;
        }

        let mut tags: Vec<String> = Vec::new();
        let mut trait_methods: BTreeMap<String, Vec<TokenStream>> = BTreeMap::new();
        let mut operations = Vec::new();
        for (path, item) in &self.doc.paths.paths {
            let item = match item {
                ReferenceOr::Item(i) => i,
                ReferenceOr::Reference { .. } => {
                    return Err(format!("paths.{path}: $ref path items are not supported"));
                }
            };
            for (method, op) in item.iter() {
                let pointer = format!("paths.{path}.{method}");
                let tag = match op.tags.as_slice() {
                    [t] => t.clone(),
                    _ => return Err(format!("{pointer}: every operation needs exactly one tag")),
                };
                if !tags.contains(&tag) {
                    tags.push(tag.clone());
                }
                let mut params: Vec<&ReferenceOr<Parameter>> = item.parameters.iter().collect();
                params.extend(op.parameters.iter());
                let (method_tokens, op_tokens) = self.operation(path, method, op, &tag, &params, &pointer)?;
                trait_methods.entry(tag).or_default().push(method_tokens);
                operations.push(op_tokens);
            }
        }

        let tag_variants = tags.iter().map(|t| {
            let ident = format_ident!("{}", t.to_upper_camel_case());
            quote! { #[oai(rename = #t)] #ident }
        });
        let mut traits = Vec::new();
        let mut bounds = Vec::new();
        for (tag, methods) in &trait_methods {
            let trait_ident = format_ident!("{}Api", tag.to_upper_camel_case());
            let doc = format!("Handlers of the operations tagged `{tag}` in openapi.yaml.");
            traits.push(quote! {
                #[doc = #doc]
                pub trait #trait_ident: Send + Sync + 'static {
                    #(#methods)*
                }
            });
            bounds.push(quote! { #trait_ident });
        }
        let items = self.items.values();
        Ok(quote! {
            use poem_openapi::{param::{Header, Path, Query}, types::{MaybeUndefined, Email}, ApiResponse, Enum, Object, OpenApi, Tags, Union};
            use poem::web::Data;
            use crate::{context::RequestContext, errors::ApiError, types::{Date, Nullable}};

            #(#items)*

            /// The tags of openapi.yaml.
            #[derive(Tags)]
            pub enum ApiTags { #(#tag_variants),* }

            #(#traits)*

            /// The operations of openapi.yaml, each routed to its handler trait.
            pub struct Api<H>(pub H);

            #[OpenApi]
            impl<H: #(#bounds)+*> Api<H> {
                #(#operations)*
            }
        })
    }

    /// A schema of `components.schemas`: an object struct, a string enum or a map alias.
    fn named_schema(&mut self, name: &str, schema: &Schema, pointer: &str) -> GenResult<()> {
        match &schema.schema_kind {
            SchemaKind::Type(Type::Object(obj)) => {
                let ident = format_ident!("{name}");
                let mut fields = Vec::new();
                for (prop, prop_schema) in &obj.properties {
                    let prop_pointer = format!("{pointer}/properties/{prop}");
                    let schema: ReferenceOr<Schema> = match prop_schema {
                        ReferenceOr::Reference { reference } => ReferenceOr::Reference { reference: reference.clone() },
                        ReferenceOr::Item(b) => ReferenceOr::Item((**b).clone()),
                    };
                    let inner =
                        self.rust_type(&schema, &format!("{name}{}", prop.to_upper_camel_case()), &prop_pointer)?;
                    let nullable = matches!(&schema, ReferenceOr::Item(s) if s.schema_data.nullable);
                    let required = obj.required.contains(prop);
                    let ty = match (required, nullable) {
                        (true, false) => inner,
                        (true, true) => quote! { Nullable<#inner> },
                        (false, false) => quote! { Option<#inner> },
                        (false, true) => quote! { MaybeUndefined<#inner> },
                    };
                    let field = rust_field_ident(prop);
                    let doc = describe(&schema);
                    let skip = if !required && nullable {
                        quote! { skip_serializing_if = "MaybeUndefined::is_undefined", }
                    } else {
                        quote! {}
                    };
                    fields.push(quote! {
                        #[doc = #doc]
                        #[oai(rename = #prop)]
                        #[serde(rename = #prop, #skip serialize_with = "crate::types::wire::ser")]
                        pub #field: #ty
                    });
                }
                for r in &obj.required {
                    if !obj.properties.contains_key(r) {
                        return Err(format!("{pointer}: required property '{r}' is not defined"));
                    }
                }
                let doc =
                    schema.schema_data.description.clone().unwrap_or_else(|| format!("`{name}` of openapi.yaml."));
                let wire = wire_impl(&ident);
                let item = if obj.properties.is_empty() {
                    return Err(format!("{pointer}: an object schema without properties is not supported"));
                } else {
                    quote! {
                        #[doc = #doc]
                        #[derive(Object, Clone, Debug, PartialEq, serde::Serialize)]
                        #[oai(rename = #name)]
                        pub struct #ident { #(#fields),* }

                        #wire
                    }
                };
                self.items.insert(name.to_string(), item);
            }
            SchemaKind::Type(Type::String(s)) if !s.enumeration.is_empty() => {
                self.string_enum(name, &s.enumeration, schema.schema_data.description.as_deref(), pointer)?;
            }
            SchemaKind::OneOf { one_of } if schema.schema_data.discriminator.is_some() => {
                self.union(name, one_of, schema, pointer)?;
            }
            _ => {
                return Err(format!(
                    "{pointer}: only object, string-enum and discriminated oneOf schemas may be named components"
                ));
            }
        }
        Ok(())
    }

    /// A `oneOf` of named objects told apart by `discriminator` (each branch names its own value
    /// of the property, as poem-openapi parses the whole object as the branch): a `Union` enum,
    /// one variant per mapped value.
    fn union(&mut self, name: &str, one_of: &[ReferenceOr<Schema>], schema: &Schema, pointer: &str) -> GenResult<()> {
        let d = schema.schema_data.discriminator.as_ref().ok_or_else(|| format!("{pointer}: no discriminator"))?;
        let branches: Vec<&str> = one_of
            .iter()
            .map(|b| match b {
                ReferenceOr::Reference { reference } => Ok(reference.as_str()),
                ReferenceOr::Item(_) => Err(format!("{pointer}/oneOf: every branch must be a $ref")),
            })
            .collect::<GenResult<_>>()?;
        if d.mapping.len() != branches.len() || !d.mapping.values().all(|t| branches.contains(&t.as_str())) {
            return Err(format!("{pointer}/discriminator: map each branch by exactly one value"));
        }
        let mut variants = Vec::new();
        let mut writes = Vec::new();
        for (value, target) in &d.mapping {
            let branch = target
                .strip_prefix("#/components/schemas/")
                .ok_or_else(|| format!("{pointer}/discriminator: {target} is not a component schema"))?;
            let (variant, ty) = (format_ident!("{}", value.to_upper_camel_case()), format_ident!("{branch}"));
            variants.push(quote! { #[oai(mapping = #value)] #variant(#ty) });
            writes.push(quote! { Self::#variant(v) => crate::types::wire::Wire::write(v, s) });
        }
        let (ident, property) = (format_ident!("{name}"), d.property_name.as_str());
        let doc = schema.schema_data.description.clone().unwrap_or_else(|| format!("`{name}` of openapi.yaml."));
        self.items.insert(
            name.to_string(),
            quote! {
                #[doc = #doc]
                #[derive(Union, Clone, Debug, PartialEq)]
                #[oai(rename = #name, one_of, discriminator_name = #property)]
                pub enum #ident { #(#variants),* }

                impl crate::types::wire::Wire for #ident {
                    fn write<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                        match self { #(#writes),* }
                    }
                }
            },
        );
        Ok(())
    }

    fn string_enum(
        &mut self,
        name: &str,
        values: &[Option<String>],
        description: Option<&str>,
        pointer: &str,
    ) -> GenResult<()> {
        let ident = format_ident!("{name}");
        let mut variants = Vec::new();
        let mut as_str = Vec::new();
        for v in values {
            let v = v.as_ref().ok_or_else(|| format!("{pointer}: null enum values are not supported"))?;
            let variant = format_ident!("{}", v.to_upper_camel_case());
            variants.push(quote! { #[oai(rename = #v)] #[serde(rename = #v)] #variant });
            as_str.push(quote! { Self::#variant => #v });
        }
        let all = values.iter().flatten().map(|v| {
            let variant = format_ident!("{}", v.to_upper_camel_case());
            quote! { Self::#variant }
        });
        let doc = description.map(str::to_string).unwrap_or_else(|| format!("`{name}` of openapi.yaml."));
        let wire = wire_impl(&ident);
        self.items.insert(
            name.to_string(),
            quote! {
                #[doc = #doc]
                #[derive(Enum, Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize)]
                #[oai(rename = #name)]
                pub enum #ident { #(#variants),* }

                #wire

                impl #ident {
                    /// Every value, in the order of the document.
                    pub const ALL: &'static [Self] = &[#(#all),*];

                    /// The value as it appears on the wire.
                    pub fn as_str(&self) -> &'static str {
                        match self { #(#as_str),* }
                    }

                    /// The variant for a wire value.
                    pub fn parse(value: &str) -> Option<Self> {
                        Self::ALL.iter().copied().find(|v| v.as_str() == value)
                    }
                }
            },
        );
        Ok(())
    }

    /// The Rust type of a schema used in a property, parameter or payload.
    fn rust_type(&mut self, schema: &ReferenceOr<Schema>, inline_name: &str, pointer: &str) -> GenResult<TokenStream> {
        let schema = match schema {
            ReferenceOr::Reference { reference } => {
                let name = reference
                    .strip_prefix("#/components/schemas/")
                    .ok_or_else(|| format!("{pointer}: only references to #/components/schemas are supported here"))?;
                let ident = format_ident!("{name}");
                return Ok(quote! { #ident });
            }
            ReferenceOr::Item(s) => s,
        };
        Ok(match &schema.schema_kind {
            SchemaKind::Type(Type::String(s)) => {
                if !s.enumeration.is_empty() {
                    self.string_enum(inline_name, &s.enumeration, schema.schema_data.description.as_deref(), pointer)?;
                    let ident = format_ident!("{inline_name}");
                    return Ok(quote! { #ident });
                }
                match &s.format {
                    VariantOrUnknownOrEmpty::Empty => quote! { String },
                    VariantOrUnknownOrEmpty::Item(StringFormat::Date) => {
                        quote! { Date }
                    }
                    VariantOrUnknownOrEmpty::Item(StringFormat::DateTime) => {
                        quote! { chrono::DateTime<chrono::Utc> }
                    }
                    VariantOrUnknownOrEmpty::Unknown(f) if f == "uuid" => quote! { uuid::Uuid },
                    VariantOrUnknownOrEmpty::Unknown(f) if f == "email" => quote! { Email },
                    other => {
                        return Err(format!("{pointer}: string format {other:?} is not supported"));
                    }
                }
            }
            SchemaKind::Type(Type::Integer(i)) => match &i.format {
                VariantOrUnknownOrEmpty::Item(IntegerFormat::Int32) => quote! { i32 },
                VariantOrUnknownOrEmpty::Item(IntegerFormat::Int64) => quote! { i64 },
                _ => {
                    return Err(format!("{pointer}: integers need `format: int32` or `format: int64`"));
                }
            },
            SchemaKind::Type(Type::Boolean(_)) => quote! { bool },
            SchemaKind::Type(Type::Number(_)) => quote! { f64 },
            SchemaKind::Type(Type::Array(a)) => {
                let items = a.items.as_ref().ok_or_else(|| format!("{pointer}: an array needs `items`"))?;
                let items: ReferenceOr<Schema> = match items {
                    ReferenceOr::Reference { reference } => ReferenceOr::Reference { reference: reference.clone() },
                    ReferenceOr::Item(b) => ReferenceOr::Item((**b).clone()),
                };
                let inner = self.rust_type(&items, &format!("{inline_name}Item"), &format!("{pointer}/items"))?;
                quote! { Vec<#inner> }
            }
            SchemaKind::Type(Type::Object(o)) if o.properties.is_empty() => match &o.additional_properties {
                Some(openapiv3::AdditionalProperties::Schema(s)) => {
                    let value =
                        self.rust_type(s, &format!("{inline_name}Value"), &format!("{pointer}/additionalProperties"))?;
                    quote! { std::collections::BTreeMap<String, #value> }
                }
                // `additionalProperties: true`: any JSON object.
                Some(openapiv3::AdditionalProperties::Any(true)) => {
                    quote! { std::collections::BTreeMap<String, serde_json::Value> }
                }
                _ => {
                    return Err(format!(
                        "{pointer}: a free-form object needs `additionalProperties: <schema>` or `additionalProperties: true`"
                    ));
                }
            },
            SchemaKind::Type(Type::Object(_)) => {
                return Err(format!("{pointer}: inline objects are not supported; name it in components.schemas"));
            }
            _ => {
                return Err(format!("{pointer}: oneOf/allOf/anyOf/not are not supported"));
            }
        })
    }

    fn resolve_param(&self, p: &ReferenceOr<Parameter>, pointer: &str) -> GenResult<Param> {
        let (param, pointer) = match p {
            ReferenceOr::Item(p) => (p, pointer.to_string()),
            ReferenceOr::Reference { reference } => {
                let name = reference
                    .strip_prefix("#/components/parameters/")
                    .ok_or_else(|| format!("{pointer}: parameter $ref must point at #/components/parameters"))?;
                let comps = self.doc.components.as_ref().ok_or("no components")?;
                match comps.parameters.get(name) {
                    Some(ReferenceOr::Item(p)) => (p, reference.clone()),
                    _ => return Err(format!("{pointer}: unknown parameter {reference}")),
                }
            }
        };
        let (data, location) = match param {
            Parameter::Query { parameter_data, .. } => (parameter_data, "query"),
            Parameter::Path { parameter_data, .. } => (parameter_data, "path"),
            Parameter::Header { parameter_data, .. } => (parameter_data, "header"),
            Parameter::Cookie { .. } => {
                return Err(format!("{pointer}: cookie parameters are not supported"));
            }
        };
        let schema = match &data.format {
            ParameterSchemaOrContent::Schema(s) => s.clone(),
            ParameterSchemaOrContent::Content(_) => {
                return Err(format!("{pointer}: parameter `content` is not supported"));
            }
        };
        Ok(Param { name: data.name.clone(), location, required: data.required, schema, pointer })
    }

    fn schema_default(&self, schema: &ReferenceOr<Schema>) -> Option<serde_json::Value> {
        match schema {
            ReferenceOr::Item(s) => s.schema_data.default.clone(),
            ReferenceOr::Reference { .. } => None,
        }
    }

    /// The trait method and the `#[OpenApi]` method of one operation; its parameters struct and
    /// response enum go to the items.
    fn operation(
        &mut self,
        path: &str,
        method: &str,
        op: &Operation,
        tag: &str,
        params: &[&ReferenceOr<Parameter>],
        pointer: &str,
    ) -> GenResult<(TokenStream, TokenStream)> {
        let op_id = op.operation_id.as_ref().ok_or_else(|| format!("{pointer}: operationId is required"))?;
        let names = OperationNames::new(op_id);
        let mut inputs = self.parameters(&names, params, pointer)?;
        self.request_body(&names, op, pointer, &mut inputs)?;
        let (variants, has_422) = self.responses(&names, op, pointer)?;
        self.operation_items(&names, &inputs, variants, has_422);
        Ok(route(path, method, op, tag, &names, inputs))
    }

    /// The route arguments and the parameters struct's fields of an operation's parameters.
    fn parameters(
        &mut self,
        names: &OperationNames,
        params: &[&ReferenceOr<Parameter>],
        pointer: &str,
    ) -> GenResult<Inputs> {
        let mut inputs = Inputs::default();
        for (i, p) in params.iter().enumerate() {
            let param = self.resolve_param(p, &format!("{pointer}.parameters[{i}]"))?;
            let inline_name = format!("{}{}", names.type_base, param.name.to_upper_camel_case());
            let inner = self.rust_type(&param.schema, &inline_name, &param.pointer)?;
            let field = format_ident!("{}", param.name.to_snake_case());
            let arg = format_ident!("p_{}", param.name.to_snake_case());
            let name = &param.name;
            let wrapper = match param.location {
                "query" => quote! { Query },
                "path" => quote! { Path },
                _ => quote! { Header },
            };
            let default = self.schema_default(&param.schema);
            let (ty, attr) = match (&default, param.required) {
                (Some(value), false) => {
                    let default_fn = format_ident!("default_{}_{}", names.snake, param.name.to_snake_case());
                    let default_path = format!("{}::{}", names.params, default_fn);
                    let lit = default_literal(value, &param.pointer)?;
                    inputs.default_fns.push(quote! { fn #default_fn() -> #inner { #lit } });
                    (inner.clone(), quote! { #[oai(name = #name, default = #default_path)] })
                }
                (None, true) => (inner.clone(), quote! { #[oai(name = #name)] }),
                (None, false) => (quote! { Option<#inner> }, quote! { #[oai(name = #name)] }),
                (Some(_), true) => {
                    return Err(format!("{}: a required parameter cannot have a default", param.pointer));
                }
            };
            inputs.route_args.push(quote! { #attr #arg: #wrapper<#ty> });
            inputs.struct_fields.push(quote! { pub #field: #ty });
            inputs.struct_init.push(quote! { #field: #arg.0 });
        }
        Ok(inputs)
    }

    /// Adds the operation's JSON body, if it has one, to its inputs.
    fn request_body(
        &mut self,
        names: &OperationNames,
        op: &Operation,
        pointer: &str,
        inputs: &mut Inputs,
    ) -> GenResult<()> {
        let Some(body) = &op.request_body else { return Ok(()) };
        let body = match body {
            ReferenceOr::Item(b) => b,
            ReferenceOr::Reference { .. } => {
                return Err(format!("{pointer}.requestBody: $ref request bodies are not supported"));
            }
        };
        if !body.required {
            return Err(format!("{pointer}.requestBody: optional request bodies are not supported"));
        }
        let media = body
            .content
            .get("application/json")
            .ok_or_else(|| format!("{pointer}.requestBody: only application/json bodies are supported"))?;
        let schema = media.schema.as_ref().ok_or_else(|| format!("{pointer}.requestBody: a schema is required"))?;
        let ty = self.rust_type(schema, &format!("{}Body", names.type_base), &format!("{pointer}.requestBody"))?;
        inputs.route_args.push(quote! { body: crate::types::body::Body<#ty> });
        inputs.struct_fields.push(quote! { pub body: #ty });
        inputs.struct_init.push(quote! { body: body.0 });
        Ok(())
    }

    /// One variant per documented status, and whether 422 is among them.
    fn responses(
        &mut self,
        names: &OperationNames,
        op: &Operation,
        pointer: &str,
    ) -> GenResult<(Vec<TokenStream>, bool)> {
        let mut variants = Vec::new();
        let mut has_422 = false;
        for (status, response) in &op.responses.responses {
            let code = match status {
                StatusCode::Code(c) => *c,
                StatusCode::Range(_) => {
                    return Err(format!("{pointer}.responses: status ranges are not supported"));
                }
            };
            let response_pointer = format!("{pointer}.responses.{code}");
            let response = self.resolve_response(response, &response_pointer)?;
            let payload = match response.content.get("application/json") {
                Some(media) => {
                    let schema =
                        media.schema.as_ref().ok_or_else(|| format!("{response_pointer}: a schema is required"))?;
                    let ty = self.rust_type(schema, &format!("{}{code}", names.type_base), &response_pointer)?;
                    quote! { crate::types::wire::Json<#ty> }
                }
                None => yaml_payload(&response, &response_pointer)?,
            };
            let variant = format_ident!("{}", status_variant(code, &response_pointer)?);
            let doc = response.description.clone();
            has_422 |= code == 422;
            variants.push(quote! { #[doc = #doc] #[oai(status = #code)] #variant(#payload) });
        }
        // `default` documents for clients what the server's edge answers on any operation (405,
        // 408, 413, 431, 503): no handler returns it, so it has no variant.
        Ok((variants, has_422))
    }

    /// The parameters struct and the response enum of an operation, among the items.
    fn operation_items(&mut self, names: &OperationNames, inputs: &Inputs, variants: Vec<TokenStream>, has_422: bool) {
        let OperationNames { op_id, params: params_ident, response: response_ident, .. } = names;
        let (bad_request, bad_request_attr) = if has_422 {
            let handler = format!("{response_ident}::bad_request");
            (
                quote! {
                    impl #response_ident {
                        fn bad_request(err: poem::Error) -> Self {
                            Self::UnprocessableEntity(crate::types::wire::Json(super::validation_error_from_parse(&err)))
                        }
                    }
                },
                quote! { #[oai(bad_request_handler = #handler)] },
            )
        } else {
            (quote! {}, quote! {})
        };
        let response_doc = format!("Responses of `{op_id}`.");
        let params_doc = format!("Parameters of `{op_id}`, as parsed from the request.");
        let (struct_fields, default_fns) = (&inputs.struct_fields, &inputs.default_fns);
        let params_item = if inputs.struct_fields.is_empty() {
            quote! {}
        } else {
            quote! {
                #[doc = #params_doc]
                #[derive(Debug, Clone)]
                pub struct #params_ident { #(#struct_fields),* }
                impl #params_ident { #(#default_fns)* }
            }
        };
        self.items.insert(
            format!("{}~op", names.type_base),
            quote! {
                #params_item
                #[doc = #response_doc]
                #[derive(ApiResponse, Debug)]
                #bad_request_attr
                pub enum #response_ident { #(#variants),* }
                #bad_request
            },
        );
    }

    fn resolve_response(&self, r: &ReferenceOr<openapiv3::Response>, pointer: &str) -> GenResult<openapiv3::Response> {
        match r {
            ReferenceOr::Item(r) => Ok(r.clone()),
            ReferenceOr::Reference { reference } => {
                let name = reference
                    .strip_prefix("#/components/responses/")
                    .ok_or_else(|| format!("{pointer}: response $ref must point at #/components/responses"))?;
                let comps = self.doc.components.as_ref().ok_or("no components")?;
                match comps.responses.get(name) {
                    Some(ReferenceOr::Item(r)) => Ok(r.clone()),
                    _ => Err(format!("{pointer}: unknown response {reference}")),
                }
            }
        }
    }
}

fn rust_field_ident(prop: &str) -> proc_macro2::Ident {
    let snake = prop.to_snake_case();
    match snake.as_str() {
        "type" | "ref" | "self" | "match" | "mod" | "move" | "use" | "where" | "enum" | "struct" => {
            format_ident!("r#{snake}")
        }
        _ => format_ident!("{snake}"),
    }
}

fn describe(schema: &ReferenceOr<Schema>) -> String {
    match schema {
        ReferenceOr::Item(s) => s.schema_data.description.clone().unwrap_or_default(),
        ReferenceOr::Reference { reference } => format!("See `{reference}`."),
    }
}

/// `types::wire::Wire` for a generated schema or enum: its `serde::Serialize`, whose fields are
/// written through `Wire` themselves.
fn wire_impl(ident: &proc_macro2::Ident) -> TokenStream {
    quote! {
        impl crate::types::wire::Wire for #ident {
            fn write<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                serde::Serialize::serialize(self, s)
            }
        }
    }
}

fn default_literal(value: &serde_json::Value, pointer: &str) -> GenResult<TokenStream> {
    Ok(match value {
        serde_json::Value::Bool(b) => quote! { #b },
        serde_json::Value::Number(n) if n.is_i64() => {
            let n = n.as_i64().unwrap_or_default();
            let lit = proc_macro2::Literal::i64_unsuffixed(n);
            quote! { #lit }
        }
        serde_json::Value::String(s) => quote! { #s.to_string() },
        other => return Err(format!("{pointer}: default {other} is not supported")),
    })
}

/// The payload of a response that is not JSON: only a YAML document (`application/yaml`, as a
/// document serving itself answers: a string, or a schema that names no type, which both a tool
/// that parses YAML and one that reads text accept) is supported.
fn yaml_payload(response: &openapiv3::Response, pointer: &str) -> GenResult<TokenStream> {
    let refused =
        || format!("{pointer}: a response must be application/json, or application/yaml of a string or of no type");
    let media = response.content.get("application/yaml").ok_or_else(refused)?;
    match media.schema.as_ref() {
        Some(ReferenceOr::Item(Schema { schema_kind: SchemaKind::Type(Type::String(_)), .. })) => {
            Ok(quote! { crate::types::Yaml })
        }
        Some(ReferenceOr::Item(Schema { schema_kind: SchemaKind::Any(any), .. })) if *any == Default::default() => {
            Ok(quote! { crate::types::Yaml })
        }
        _ => Err(refused()),
    }
}

fn status_variant(code: u16, pointer: &str) -> GenResult<&'static str> {
    Ok(match code {
        200 => "Ok",
        201 => "Created",
        202 => "Accepted",
        401 => "Unauthorized",
        402 => "PaymentRequired",
        403 => "Forbidden",
        404 => "NotFound",
        405 => "MethodNotAllowed",
        409 => "Conflict",
        422 => "UnprocessableEntity",
        429 => "TooManyRequests",
        500 => "InternalServerError",
        501 => "NotImplemented",
        503 => "ServiceUnavailable",
        _ => {
            return Err(format!("{pointer}: status {code} has no variant name in the generator (codegen)"));
        }
    })
}

/// `/members/{id}` → `/members/:id`.
fn poem_path(path: &str) -> String {
    path.split('/')
        .map(|seg| match seg.strip_prefix('{').and_then(|s| s.strip_suffix('}')) {
            Some(name) => format!(":{name}"),
            None => seg.to_string(),
        })
        .collect::<Vec<_>>()
        .join("/")
}

/// The names an operation's generated items take from its `operationId`.
struct OperationNames {
    op_id: String,
    type_base: String,
    snake: String,
    params: proc_macro2::Ident,
    response: proc_macro2::Ident,
}

impl OperationNames {
    fn new(op_id: &str) -> Self {
        let type_base = op_id.to_upper_camel_case();
        Self {
            op_id: op_id.to_string(),
            snake: op_id.to_snake_case(),
            params: format_ident!("{type_base}Params"),
            response: format_ident!("{type_base}Response"),
            type_base,
        }
    }
}

/// What the generated route takes from a request and hands the handler in one struct.
#[derive(Default)]
struct Inputs {
    route_args: Vec<TokenStream>,
    struct_fields: Vec<TokenStream>,
    struct_init: Vec<TokenStream>,
    default_fns: Vec<TokenStream>,
}

/// The handler trait's method and the `#[OpenApi]` route of an operation.
fn route(
    path: &str,
    method: &str,
    op: &Operation,
    tag: &str,
    names: &OperationNames,
    inputs: Inputs,
) -> (TokenStream, TokenStream) {
    let OperationNames { op_id, params: params_ident, response: response_ident, snake, .. } = names;
    let fn_ident = format_ident!("{snake}");
    let summary = op.summary.clone().unwrap_or_default();
    let mut doc = summary.clone();
    if let Some(d) = &op.description {
        let _ = write!(doc, "\n\n{d}");
    }
    let poem_path = poem_path(path);
    let tag_path = format!("ApiTags::{}", tag.to_upper_camel_case());
    let (route_args, struct_init) = (inputs.route_args, inputs.struct_init);
    let (trait_sig, call) = if inputs.struct_fields.is_empty() {
        (
            quote! { fn #fn_ident(&self, ctx: &RequestContext) -> impl std::future::Future<Output = Result<#response_ident, ApiError>> + Send; },
            quote! { self.0.#fn_ident(&ctx).await },
        )
    } else {
        (
            quote! { fn #fn_ident(&self, ctx: &RequestContext, params: #params_ident) -> impl std::future::Future<Output = Result<#response_ident, ApiError>> + Send; },
            quote! { self.0.#fn_ident(&ctx, #params_ident { #(#struct_init),* }).await },
        )
    };
    let trait_doc = if summary.is_empty() { op_id.clone() } else { summary };
    let trait_method = quote! { #[doc = #trait_doc] #trait_sig };
    let route = quote! {
        #[doc = #doc]
        #[oai(path = #poem_path, method = #method, operation_id = #op_id, tag = #tag_path)]
        async fn #fn_ident(&self, ctx: Data<&RequestContext>, #(#route_args),*) -> poem::Result<#response_ident> {
            #call.map_err(poem::Error::from)
        }
    };
    (trait_method, route)
}
