#!/usr/bin/env bash
# A partner's CI with nothing of this repository's: no hooks, no configuration file, only the
# document the server serves and a sandbox reset to its fixtures. Against `gymapi serve --demo` on
# a fresh SQLite database, with the demo's test key, as a partner's pipeline would run it:
#   1. fetch each document from the server (GET /api/v1/openapi.yaml, /api/v1/devices/openapi.yaml);
#   2. reset the sandbox to its fixtures (POST /api/v1/sandbox/reset?contents=fixtures);
#   3. run Dredd over the served document with its defaults and the key as a header.
# Dredd's OpenAPI 3 support makes a transaction of every response a document names, each sending
# the operation's example request, so against a live server only each operation's first 2xx can
# pass (its 401, 404 or 422 transactions send the same valid request). .ci/partners/dredd-successes.py
# fails unless every operation's success passed, but for the exceptions it names, each with the
# reason the document gives too (openapi.yaml, tag `Sandbox`).
# Usage: .ci/partners/defaults.sh path/to/gymapi   (DREDD: the dredd executable; PARTNER_PYTHON)
set -euo pipefail
cd "$(dirname "$0")/../.."
binary=$(realpath "$1")
dredd=${DREDD:-dredd}
work=$(mktemp -d)
server=
cleanup() { [ -n "$server" ] && kill "$server" 2>/dev/null; rm -rf "$work"; }
trap cleanup EXIT

export DATABASE_URL="sqlite://$work/gymapi.db?mode=rwc" GYMAPI_WEBHOOK_DISPATCH=0
# Dredd sends about 300 requests in a few seconds; the demo's limit is a production key's.
export GYMAPI_RATE_LIMIT_PER_MINUTE=1000000
unset REDIS_URL
. .ci/serve.sh
serve_gymapi "$binary" "$work/server.log" --demo
test_key=$(grep -o 'svc_test_[A-Za-z0-9]*' "$work/server.log" | head -1)
origin="http://127.0.0.1:$port"

failed=0
for run in "openapi.yaml /api/v1" "openapi-devices.yaml /api/v1/devices"; do
  read -r doc base <<<"$run"
  curl -fsS -H "Authorization: Bearer $test_key" "$origin$base/openapi.yaml" -o "$work/$doc"
  echo "-- Dredd, no hooks, over the served $doc, on the sandbox's fixtures"
  curl -fsS -X POST -H "Authorization: Bearer $test_key" "$origin/api/v1/sandbox/reset?contents=fixtures" >/dev/null
  "$dredd" "$work/$doc" "$origin$base" --header "Authorization: Bearer $test_key" --loglevel warning \
    >"$work/dredd.txt" 2>&1 || true
  "${PARTNER_PYTHON:-python3}" .ci/partners/dredd-successes.py "$doc" "$work/dredd.txt" || failed=1
done
exit "$failed"
