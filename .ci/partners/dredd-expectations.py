"""What Dredd should hold each answer to, read from an OpenAPI 3.0 document.

Dredd 14 reads an OpenAPI 3 document's examples but not its schemas (its parser leaves a
response's JSON Schema out) and treats every documented response header as required. Without
help it would judge an answer by the shape of one example: an example sale with items fails a
sale imported as one amount (`lines: null`, which the schema allows), and `Idempotency-Replayed`,
documented `required: false`, would be demanded of every first answer. This prints, for each
operation (`METHOD /path/template`), its first 2xx response's body schema as JSON Schema (draft
7: references inlined, `nullable` as a null type, formats JSON Schema does not name dropped) and
the headers it documents as optional; .ci/partners/dredd-hooks.js hands them to Dredd.

Usage: python3 dredd-expectations.py DOCUMENT > expectations.json
"""

import json
import sys

import yaml

KNOWN_FORMATS = {"date-time", "date", "email", "uri", "uuid"}
DROPPED = {"example", "examples", "discriminator", "readOnly", "writeOnly", "xml", "externalDocs", "deprecated"}


def resolve(doc, node):
    while isinstance(node, dict) and "$ref" in node:
        target = doc
        for part in node["$ref"].lstrip("#/").split("/"):
            target = target[part]
        node = target
    return node


def convert(doc, schema):
    schema = resolve(doc, schema)
    if isinstance(schema, list):
        return [convert(doc, s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out = {}
    for key, value in schema.items():
        if key in DROPPED or key.startswith("x-") or key == "nullable":
            continue
        if key == "format" and value not in KNOWN_FORMATS:
            continue
        if key == "properties":
            out[key] = {name: convert(doc, s) for name, s in value.items()}
        elif key in ("items", "additionalProperties", "not") and isinstance(value, dict):
            out[key] = convert(doc, value)
        elif key in ("allOf", "anyOf", "oneOf"):
            out[key] = [convert(doc, s) for s in value]
        else:
            out[key] = value
    if schema.get("nullable"):
        if "type" in out and "enum" not in out:
            out["type"] = [out["type"], "null"]
        else:
            out = {"anyOf": [out, {"type": "null"}]}
    return out


def main():
    doc = yaml.safe_load(open(sys.argv[1]))
    expectations = {}
    for path, item in doc["paths"].items():
        for method, op in item.items():
            if method not in ("get", "post", "put", "patch", "delete"):
                continue
            status = next((s for s in op["responses"] if str(s).startswith("2")), None)
            if status is None:
                continue
            response = resolve(doc, op["responses"][status])
            optional = sorted(
                name for name, h in (response.get("headers") or {}).items() if not resolve(doc, h).get("required")
            )
            body = (response.get("content") or {}).get("application/json", {}).get("schema")
            schema = None
            if body is not None:
                schema = {"$schema": "http://json-schema.org/draft-07/schema#", **convert(doc, body)}
            expectations[f"{method.upper()} {path}"] = {"schema": schema, "optional_headers": optional}
    json.dump(expectations, sys.stdout, indent=1)


main()
