#!/usr/bin/env bash
# Browser tests of the settings area: starts gymapi on a fresh SQLite database, creates a gym with an
# owner and an employee (no settings.manage) and a key for the front-desk app's devices, and drives the
# pages in headless Chromium.
# Usage: tests/browser/run.sh path/to/gymapi   (NODE_MODULES: where playwright-core and axe-core are)
set -euo pipefail
cd "$(dirname "$0")/../.."
bin=$1
work=$(mktemp -d)
export DATABASE_URL="sqlite://$work/gymapi.db?mode=rwc"
unset REDIS_URL
password='correct horse battery staple'
gym=$("$bin" gym create --name "Iron Temple" --timezone Europe/Berlin --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["id"])')
echo "$password" | "$bin" user create --gym "$gym" --email owner@iron-temple.example --role owner >/dev/null
echo "$password" | "$bin" user create --gym "$gym" --email desk@iron-temple.example --role employee >/dev/null
device_key=$("$bin" key create --gym "$gym" --env live --name "Front-desk app" --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["key"])')
server=
trap '[ -n "$server" ] && kill $server 2>/dev/null; wait 2>/dev/null || true; rm -rf "$work"' EXIT
. .ci/serve.sh
GYMAPI_RATE_LIMIT_PER_MINUTE=10000 serve_gymapi "$bin" "$work/serve.log"
BASE="http://127.0.0.1:$port" DEVICE_KEY="$device_key" OWNER=owner@iron-temple.example EMPLOYEE=desk@iron-temple.example PASSWORD="$password" \
  SHOTS="${SHOTS:-target/screenshots}" node tests/browser/settings.mjs
