#!/usr/bin/env bash
# openapi.yaml through the tools partners use (pinned in .ci/partners/package.json, from npm):
#   1. Spectral (spectral:oas) and Redocly (recommended) lint it with no warning beyond the ones
#      allowed, each with its reason, in .ci/partners/;
#   2. openapi-diff finds no breaking change from the last released document (the newest file of
#      releases/ older than this version) but the ones .ci/partners/allowed-breaks.yaml names for
#      this version, each with why it breaks no one;
#   3. openapi-typescript generates its types, `tsc --strict` checks .ci/partners/client.ts, and
#      the program runs against `gymapi serve` on a fresh SQLite database.
# Usage: .ci/partners.sh path/to/gymapi
set -euo pipefail
cd "$(dirname "$0")/.."
binary=$(realpath "$1")
tools=${PARTNER_TOOLS:-/var/tmp/gymapi-partners}
bin=$tools/node_modules/.bin
export REDOCLY_TELEMETRY=off REDOCLY_SUPPRESS_UPDATE_NOTICE=true
work=$(mktemp -d)
server=
cleanup() { [ -n "$server" ] && kill "$server" 2>/dev/null; rm -rf "$work"; }
trap cleanup EXIT

if ! cmp -s .ci/partners/package-lock.json "$tools/package-lock.json" || [ ! -x "$bin/tsc" ]; then
  rm -rf "$tools" && mkdir -p "$tools"
  cp .ci/partners/package.json .ci/partners/package-lock.json "$tools/"
  (cd "$tools" && npm ci --no-audit --no-fund --silent)
fi

echo "-- Spectral (spectral:oas)"
"$bin/spectral" lint --fail-severity warn --ruleset .ci/partners/spectral.yaml openapi.yaml

echo "-- Redocly (recommended)"
"$bin/redocly" lint --config .ci/partners/redocly.yaml --format json openapi.yaml >"$work/redocly.json" 2>/dev/null || true
python3 - "$work/redocly.json" <<'PY'
import json, sys
report = json.load(open(sys.argv[1]))
totals = report["totals"]
for p in report["problems"]:
    where = p["location"][0]["pointer"] if p.get("location") else ""
    print(f"{p['severity']}: {p['ruleId']} at {where}: {p['message']}")
print(f"{totals['errors']} errors, {totals['warnings']} warnings, {totals['ignored']} allowed")
sys.exit(1 if totals["errors"] or totals["warnings"] else 0)
PY

echo "-- breaking changes since the last release (openapi-diff)"
version_of() { sed -n 's/^  version: *//p' | head -1; }
current=$(version_of <openapi.yaml)
# The last release before this version: the newest file of releases/ (releases/README.md) older
# than the document's own version.
previous=$(python3 - "$current" <<'PY'
import pathlib, re, sys
def key(v): return tuple(int(x) for x in v.split("."))
current = key(sys.argv[1])
found = [m.group(1) for p in pathlib.Path("releases").glob("openapi-[0-9]*.yaml")
         if (m := re.match(r"openapi-(\d+\.\d+\.\d+)\.yaml$", p.name)) and key(m.group(1)) < current]
print(max(found, key=key) if found else "")
PY
)
if [ -n "$previous" ]; then
  cp "releases/openapi-$previous.yaml" "$work/previous.yaml"
fi
if [ -z "$previous" ]; then
  echo "no earlier release in releases/: nothing to compare"
else
  "$bin/openapi-diff" "$work/previous.yaml" openapi.yaml >"$work/diff.txt" 2>&1 || true
  python3 - "$work/diff.txt" .ci/partners/allowed-breaks.yaml "$current" "$previous" <<'PY'
import json, sys
text, allowed_file, current, previous = open(sys.argv[1]).read(), sys.argv[2], sys.argv[3], sys.argv[4]
if "{" not in text:
    sys.exit(f"openapi-diff failed:\n{text}")
report = json.loads(text[text.index("{"):])
# The allowed list is YAML of flat mappings; read without a YAML library.
allowed, entry = [], None
for line in open(allowed_file):
    if line.startswith("- "):
        entry = {}
        allowed.append(entry)
        line = line[2:]
    if entry is not None and line.startswith(("version:", "code:", "location:", "  version:", "  code:", "  location:")):
        k, v = line.strip().split(":", 1)
        entry[k] = v.strip()
breaks = []
for b in report.get("breakingDifferences", []):
    where = [e["location"] for e in b.get("destinationSpecEntityDetails", []) or b.get("sourceSpecEntityDetails", [])]
    ok = any(a.get("code") == b["code"] and a.get("location") in where and a.get("version") == current for a in allowed)
    print(f"{'allowed' if ok else 'BREAKING'}: {b['code']} at {', '.join(where)}")
    if not ok:
        breaks.append(b)
counts = {k: len(report.get(k, [])) for k in ("nonBreakingDifferences", "unclassifiedDifferences")}
print(f"{current} against {previous}: {len(breaks)} breaking, {counts['nonBreakingDifferences']} additions, "
      f"{counts['unclassifiedDifferences']} unclassified (x- extensions)")
sys.exit(1 if breaks else 0)
PY
fi

echo "-- TypeScript: openapi-typescript, tsc --strict, the program against a live server"
ln -s "$tools/node_modules" "$work/node_modules"
cp .ci/partners/client.ts .ci/partners/tsconfig.json "$work/"
echo '{"type": "module"}' >"$work/package.json"
"$bin/openapi-typescript" openapi.yaml -o "$work/schema.d.ts" >/dev/null 2>&1
(cd "$work" && "$bin/tsc" -p tsconfig.json)
export DATABASE_URL="sqlite://$work/gymapi.db?mode=rwc"
unset REDIS_URL
json_field() { python3 -c "import json, sys; print(json.load(sys.stdin)['$1'])"; }
gym=$("$binary" gym create --name "Partner check" --json | json_field id)
key=$("$binary" key create --gym "$gym" --env live --name typescript --json | json_field key)
port=$(python3 -c "import socket; s = socket.socket(); s.bind(('127.0.0.1', 0)); print(s.getsockname()[1])")
"$binary" serve --bind "127.0.0.1:$port" >"$work/server.log" 2>&1 &
server=$!
for _ in $(seq 1 100); do curl -fs "http://127.0.0.1:$port/healthz" >/dev/null && break; sleep 0.1; done
(cd "$work" && GYMAPI_URL="http://127.0.0.1:$port" GYMAPI_KEY=$key node out/client.js)
