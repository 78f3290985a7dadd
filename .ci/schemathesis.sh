#!/usr/bin/env bash
# Starts gymapi with demo data on the given database (and Redis, if REDIS_URL is set) and runs
# schemathesis over every operation of openapi.yaml and of openapi-devices.yaml with a live key.
# Usage: .ci/schemathesis.sh DATABASE_URL
set -euo pipefail
cd "$(dirname "$0")/.."
db_url=$1
bin=${GYMAPI_BIN:-${CARGO_TARGET_DIR:-target}/debug/gymapi}
st=${SCHEMATHESIS:-schemathesis}
log=$(mktemp)
server=
trap '[ -n "$server" ] && kill $server 2>/dev/null; wait 2>/dev/null || true; rm -f "$log"' EXIT
. .ci/serve.sh
DATABASE_URL=$db_url GYMAPI_RATE_LIMIT_PER_MINUTE=1000000 GYMAPI_DEVICE_RATE_LIMIT_PER_MINUTE=1000000 \
  serve_gymapi "$bin" "$log" --demo
# Each document with its own base and settings: the integration API, then the device API. Every
# check runs (schemathesis's default), but for what the config files turn off for an operation,
# each with its reason (`--checks all` would turn those on again).
for run in "openapi.yaml /api/v1 .ci/schemathesis.toml" "openapi-devices.yaml /api/v1/devices .ci/schemathesis-devices.toml"; do
  read -r doc base config <<<"$run"
  echo "schemathesis over $doc"
  "$st" --config-file "$config" run "$doc" \
    --url "http://127.0.0.1:$port$base" \
    --header "Authorization: Bearer $key" \
    --max-examples "${SCHEMATHESIS_MAX_EXAMPLES:-40}" \
    --workers 1 \
    --seed 1 \
    --no-color
done
if grep -q "panicked" "$log"; then
  echo "gymapi panicked during the run:"; grep -A5 panicked "$log"; exit 1
fi
