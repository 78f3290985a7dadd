"""Does SDK code written against the last release still compile against the new document?

Partners generate clients from a released document, write code against them, and regenerate
when a new version comes out. A change that breaks that code is what matters to them, and a
document diff does not see it (renaming a schema, turning an enum into a string). So this script:

1. generates the TypeScript types (openapi-typescript) and the Python client
   (openapi-python-client) from the last release and from the new document;
2. writes, from the last release's generated code, the program a partner could have written
   against it: every operation called with every parameter and body of the types it took, every
   response and error body, every webhook payload and every model read field by field into the
   types they had, every enum value named;
3. compiles that program against the new client (`tsc --strict`, `mypy --strict`).

A line that no longer compiles is a break, unless `.ci/partners/allowed-breaks.yaml` names it for
the new version with the change a partner makes. Run with the Python that has openapi-python-client,
mypy and PyYAML:

    python compat.py --document openapi.yaml --previous releases/openapi-1.4.0.yaml --tools DIR
"""

import argparse
import ast
import json
import pathlib
import re
import subprocess
import sys
import tempfile

import yaml

HERE = pathlib.Path(__file__).resolve().parent


def sh(args, cwd=None, check=True):
    done = subprocess.run(args, cwd=cwd, capture_output=True, text=True)
    if check and done.returncode != 0:
        sys.exit(f"{' '.join(map(str, args))} failed:\n{done.stdout}\n{done.stderr}")
    return done


# -- TypeScript ------------------------------------------------------------------------------------


def typescript_program(previous: dict) -> list[tuple[str, str]]:
    """(label, line) pairs: each line compiles while the new types accept what the old ones did.

    `Reads<N, O>`: a value of the new type is a value of the old one (responses, what a partner
    reads). `Sends<O, N>`: the other way round (parameters and bodies, what a partner sends).
    """
    lines = []
    for path, item in previous.get("paths", {}).items():
        for method, op in item.items():
            if not isinstance(op, dict) or "operationId" not in op:
                continue
            o = op["operationId"]
            lines.append((f"{o} parameters", f'Sends<OldOps["{o}"]["parameters"], NewOps["{o}"]["parameters"]>'))
            if "requestBody" in op:
                lines.append((f"{o} body", f'Sends<OldOps["{o}"]["requestBody"], NewOps["{o}"]["requestBody"]>'))
            for status in op.get("responses", {}):
                key = status if status == "default" else int(status)
                lines.append(
                    (f"{o} response {status}", f'Reads<NewOps["{o}"]["responses"][{json.dumps(key)}], '
                     f'OldOps["{o}"]["responses"][{json.dumps(key)}]>')
                )
    components = previous.get("components", {})
    for kind in ("schemas", "parameters", "responses", "requestBodies", "headers"):
        for name in components.get(kind, {}):
            lines.append((f"{kind} {name} exists", f'New["{kind}"]["{name}"]'))
    for event in webhook_payloads(previous):
        lines.append((f"webhook {event}", f'Reads<New["schemas"]["{event}"], Old["schemas"]["{event}"]>'))
    head = [
        'import type { components as Old, operations as OldOps } from "./old.js";',
        'import type { components as New, operations as NewOps } from "./new.js";',
        "type Reads<N extends O, O> = [N, O];",
        "type Sends<O extends N, N> = [O, N];",
    ]
    return [("", h) for h in head] + [(label, f"export type C{i} = {line};") for i, (label, line) in enumerate(lines)]


def webhook_payloads(doc: dict) -> list[str]:
    """The schemas of the payloads the document's webhooks send."""
    found = []
    for item in (doc.get("x-webhooks") or doc.get("webhooks") or {}).values():
        for op in item.values():
            ref = op.get("requestBody", {}).get("content", {}).get("application/json", {}).get("schema", {})
            if "$ref" in ref:
                found.append(ref["$ref"].rsplit("/", 1)[-1])
    return found


def typescript(previous_file, document, tools, work) -> list[tuple[str, str]]:
    bin_ = pathlib.Path(tools) / "node_modules" / ".bin"
    sh([bin_ / "openapi-typescript", previous_file, "-o", work / "old.d.ts"])
    sh([bin_ / "openapi-typescript", document, "-o", work / "new.d.ts"])
    program = typescript_program(yaml.safe_load(open(previous_file)))
    (work / "compat.ts").write_text("\n".join(line for _, line in program) + "\n")
    config = {"compilerOptions": {"strict": True, "noEmit": True, "skipLibCheck": True, "module": "esnext",
                                  "moduleResolution": "bundler", "target": "es2022"}, "files": ["compat.ts"]}
    (work / "tsconfig.json").write_text(json.dumps(config))
    out = sh([bin_ / "tsc", "-p", "tsconfig.json"], cwd=work, check=False)
    broken = []
    for m in re.finditer(r"^compat\.ts\((\d+),\d+\): error (TS\d+): (.*)$", out.stdout, re.M):
        label = program[int(m.group(1)) - 1][0]
        broken.append((label, f"{m.group(2)}: {m.group(3)}"))
    if out.returncode != 0 and not broken:
        sys.exit(f"tsc failed:\n{out.stdout}{out.stderr}")
    print(f"typescript: {len(program) - 4} checks")
    return broken


# -- Python ----------------------------------------------------------------------------------------


def generate_python(document, into: pathlib.Path, venv_bin: pathlib.Path):
    config = HERE.parent / "openapi-python-client.yaml"
    sh([venv_bin / "openapi-python-client", "generate", "--path", document, "--config", config, "--meta", "none",
        "--output-path", into / "sdk"], cwd=into)


def annotation(node) -> str:
    return ast.unparse(node).replace("'", "")


def python_program(sdk: pathlib.Path) -> list[tuple[str, str]]:
    """(label, line) pairs from the old client's source: every model read field by field, the
    models a request carries built, its enums named, its operations called, each with the types
    the old client gave them. A response model is not built: a new field of a response is required
    in its constructor, which only a test double calls (the "Compatibility" section says so)."""
    out = [("", line) for line in (
        "from __future__ import annotations",
        "import datetime",
        "from typing import Any",
        "from uuid import UUID",
        "from sdk.client import AuthenticatedClient, Client",
        "from sdk.types import UNSET, File, Response, Unset",
        "from sdk.models import *  # noqa: F403",
    )]
    classes = {}
    for f in sorted((sdk / "models").glob("*.py")):
        if f.name != "__init__.py":
            classes.update({c.name: c for c in ast.parse(f.read_text()).body if isinstance(c, ast.ClassDef)})
    calls = []
    for f in sorted((sdk / "api").glob("*/*.py")):
        if f.name != "__init__.py":
            module = ".".join(f.relative_to(sdk.parent).with_suffix("").parts)
            calls += [(module, fn) for fn in ast.parse(f.read_text()).body
                      if isinstance(fn, ast.FunctionDef) and fn.name == "sync_detailed"]
    sent = sent_models(classes, [a.annotation for _, fn in calls for a in fn.args.args + fn.args.kwonlyargs])
    for name, cls in classes.items():
        out += python_model(cls, name in sent)
    for module, fn in calls:
        out += python_call(module, fn)
    return out


def sent_models(classes: dict, annotations: list) -> set[str]:
    """The models a request can carry: named by an operation's parameters, and what they hold."""
    names = lambda node: {n.id for n in ast.walk(ast.parse(annotation(node))) if isinstance(n, ast.Name)}
    todo, seen = set().union(*(names(a) for a in annotations if a is not None)), set()
    while todo:
        name = todo.pop()
        if name in seen or name not in classes:
            continue
        seen.add(name)
        for s in classes[name].body:
            if isinstance(s, ast.AnnAssign):
                todo |= names(s.annotation)
    return seen


def python_model(cls: ast.ClassDef, sent: bool) -> list[tuple[str, str]]:
    name = cls.name
    if any(annotation(b) in ("str, Enum", "Enum") for b in cls.bases) or any(
        isinstance(b, ast.Name) and b.id in ("Enum", "StrEnum", "IntEnum") for b in cls.bases
    ):
        members = [t.id for s in cls.body if isinstance(s, ast.Assign) for t in s.targets if isinstance(t, ast.Name)]
        return [(f"enum {name}.{m}", f"_{name}_{m}: {name} = {name}.{m}") for m in members]
    fields = [s for s in cls.body if isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name)]
    fields = [s for s in fields if s.target.id != "additional_properties"]
    lines = [(f"model {name}", f"def read_{name}(x: {name}) -> None:")]
    for s in fields:
        lines.append((f"model {name}.{s.target.id} read", f"    _{s.target.id}: {annotation(s.annotation)} = x.{s.target.id}"))
    lines.append(("", "    pass"))
    if not sent:
        return lines
    params = [f"{s.target.id}: {annotation(s.annotation)}" for s in fields]
    args = [f"{s.target.id}={s.target.id}" for s in fields]
    lines.append((f"model {name}", f"def build_{name}({', '.join(params)}) -> {name}:"))
    lines.append((f"model {name} built", f"    return {name}({', '.join(args)})"))
    return lines


def python_call(module: str, fn: ast.FunctionDef) -> list[tuple[str, str]]:
    op = module.rsplit(".", 1)[-1]
    params = fn.args.args + fn.args.kwonlyargs
    typed = [f"{a.arg}: {annotation(a.annotation)}" for a in params]
    call = ", ".join(f"{a.arg}={a.arg}" for a in params)
    return [
        (f"operation {op}", f"import {module}"),
        (f"operation {op}", f"def call_{op}({', '.join(typed)}) -> None:"),
        (f"operation {op} call", f"    {module}.sync_detailed({call})"),
    ]


def python(previous_file, document, venv_bin, work) -> list[tuple[str, str]]:
    (work / "old").mkdir()
    (work / "new").mkdir()
    generate_python(previous_file, work / "old", venv_bin)
    generate_python(document, work / "new", venv_bin)
    program = python_program(work / "old" / "sdk")
    (work / "new" / "compat.py").write_text("\n".join(line for _, line in program) + "\n")
    # Partners' code is checked, not the generator's: openapi-python-client's own code has
    # mistakes mypy finds (a schema `Error` with a property `error` shadows a variable), which no
    # document change of ours breaks or mends.
    (work / "new" / "mypy.ini").write_text("[mypy]\nstrict = True\n[mypy-sdk.*]\nignore_errors = True\n")
    out = sh([venv_bin / "mypy", "--no-error-summary", "compat.py"], cwd=work / "new", check=False)
    broken = []
    for m in re.finditer(r"^compat\.py:(\d+): error: (.*)$", out.stdout, re.M):
        broken.append((program[int(m.group(1)) - 1][0], m.group(2)))
    if out.returncode != 0 and not broken:
        sys.exit(f"mypy failed:\n{out.stdout}{out.stderr}")
    print(f"python: {len([p for p in program if p[0]])} checks")
    return broken


# -- Judging ---------------------------------------------------------------------------------------


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--document", required=True)
    p.add_argument("--previous", required=True)
    p.add_argument("--tools", required=True, help="where npm installed .ci/partners/package.json")
    p.add_argument("--allowed", default=str(HERE / "allowed-breaks.yaml"))
    a = p.parse_args()
    document, previous = pathlib.Path(a.document).resolve(), pathlib.Path(a.previous).resolve()
    version = yaml.safe_load(open(document))["info"]["version"]
    allowed = [e for e in yaml.safe_load(open(a.allowed)) or []
               if e.get("version") == version and e.get("document", "openapi.yaml") == document.name]
    venv_bin = pathlib.Path(sys.executable).parent
    breaks = []
    with tempfile.TemporaryDirectory() as tmp:
        for tool, run in (("typescript", lambda w: typescript(previous, document, a.tools, w)),
                          ("python", lambda w: python(previous, document, venv_bin, w))):
            work = pathlib.Path(tmp) / tool
            work.mkdir()
            for label, error in run(work):
                ok = any(e.get("code") == tool and e.get("location") == label for e in allowed)
                print(f"{'allowed' if ok else 'BREAKING'}: {tool}: {label}: {error}")
                breaks += [] if ok else [label]
    print(f"{document.name} {version} against {previous.name}: {len(breaks)} breaking for generated SDK code")
    sys.exit(1 if breaks else 0)


if __name__ == "__main__":
    main()
