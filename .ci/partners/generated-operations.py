"""Every operation of a document is a method of the client openapi-generator made from it.

Usage: generated-operations.py DOCUMENT LANGUAGE CLIENT_DIR

Each `operationId` of the document's paths is looked for, under the generator's name for it, in
the client's operation sources: `async listMembersRaw(` (typescript-fetch), `def list_members(`
(python), `func (a *MembersAPIService) ListMembers(` (go), `public … listMembers(` (java).
Prints the count, and every operation missing; exits 1 if any is.
"""

import pathlib
import re
import sys

import yaml

METHODS = ("get", "put", "post", "delete", "patch", "head", "options", "trace")


def operation_ids(document):
    paths = yaml.safe_load(document.read_text())["paths"]
    return [op["operationId"] for item in paths.values() for m, op in item.items() if m in METHODS]


def snake(name):
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


# Per language: the operation sources, and the pattern that declares an operation's method.
LANGUAGES = {
    "typescript-fetch": ("src/apis/*.ts", lambda op: rf"\basync {op}Raw\("),
    "python": ("gymapi/api/*.py", lambda op: rf"^    def {snake(op)}\("),
    "go": ("api_*.go", lambda op: rf"^func \(a \*\w+\) {op[0].upper() + op[1:]}\("),
    "java": ("src/main/java/**/api/*.java", lambda op: rf"^  public [\w<>, ]+ {op}\("),
}


def main():
    document, language, client = pathlib.Path(sys.argv[1]), sys.argv[2], pathlib.Path(sys.argv[3])
    sources_glob, pattern = LANGUAGES[language]
    sources = "\n".join(p.read_text() for p in sorted(client.glob(sources_glob)))
    ids = operation_ids(document)
    missing = [op for op in ids if not re.search(pattern(op), sources, re.MULTILINE)]
    print(f"{document}, {language}: compiles; {len(ids) - len(missing)} of {len(ids)} operations present")
    for op in missing:
        print(f"  missing: {op}")
    sys.exit(1 if missing or not ids else 0)


if __name__ == "__main__":
    main()
