#!/usr/bin/env bash
# Dredd, the contract-test runner, over both documents against `gymapi serve --demo` on a fresh
# SQLite database: every operation's success is sent as the document's examples describe it and
# its answer checked against the document. .ci/partners/dredd-hooks.js keeps each operation's
# first 2xx (Dredd's OpenAPI 3 support would also expect every 4xx a document names, from the same
# request) and gives each request ids of records in the state its operation acts on.
# Usage: .ci/partners/dredd.sh path/to/gymapi   (DREDD: the dredd executable; PARTNER_PYTHON: a
# Python with PyYAML)
set -euo pipefail
cd "$(dirname "$0")/../.."
binary=$(realpath "$1")
dredd=${DREDD:-dredd}
work=$(mktemp -d)
server=
cleanup() { [ -n "$server" ] && kill "$server" 2>/dev/null; rm -rf "$work"; }
trap cleanup EXIT

export DATABASE_URL="sqlite://$work/gymapi.db?mode=rwc" GYMAPI_WEBHOOK_DISPATCH=0
export GYMAPI_RATE_LIMIT_PER_MINUTE=1000000 GYMAPI_DEVICE_RATE_LIMIT_PER_MINUTE=1000000
unset REDIS_URL
. .ci/serve.sh
serve_gymapi "$binary" "$work/server.log" --demo
# A webhook endpoint, and a member created, so that a delivery exists to read and redeliver
# (nothing is sent: this server does not dispatch).
gym=$(grep -o 'Demo gym [0-9a-f-]* is ready' "$work/server.log" | cut -d' ' -f3)
"$binary" webhook create --gym "$gym" --url https://hooks.example.com/gymapi >/dev/null
curl -fs -o /dev/null -H "Authorization: Bearer $key" -H 'Content-Type: application/json' \
  -d '{"first_name": "Grace", "last_name": "Hopper"}' "http://127.0.0.1:$port/api/v1/members"

export GYMAPI_KEY=$key GYMAPI_ORIGIN="http://127.0.0.1:$port"
GYMAPI_TEST_KEY=$(grep -o 'svc_test_[A-Za-z0-9]*' "$work/server.log" | head -1)
export GYMAPI_TEST_KEY
failed=0
for run in "openapi.yaml /api/v1" "openapi-devices.yaml /api/v1/devices"; do
  read -r doc base <<<"$run"
  echo "-- Dredd over $doc"
  "${PARTNER_PYTHON:-python3}" .ci/partners/dredd-expectations.py "$doc" >"$work/expectations.json"
  export GYMAPI_EXPECTATIONS=$work/expectations.json
  "$dredd" "$doc" "http://127.0.0.1:$port$base" --hookfiles .ci/partners/dredd-hooks.js \
    --header "Authorization: Bearer $key" --loglevel warning >"$work/dredd.txt" 2>&1 && ok=1 || ok=0
  sed 's/\x1b\[[0-9;]*m//g' "$work/dredd.txt" | grep -E "^(pass|fail|error): |^complete: [0-9]" | sed 's/^/  /' || true
  [ "$ok" = 1 ] || { cat "$work/dredd.txt"; failed=1; }
done
exit "$failed"
