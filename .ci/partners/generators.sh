#!/usr/bin/env bash
# openapi-generator as a partner runs it: no configuration file of ours, each generator's defaults
# but for the package name. Four clients (typescript-fetch, python, go, java) from each of four
# documents (openapi.yaml, openapi-devices.yaml and their OpenAPI 3.1 copies), each compiled by its
# own language's compiler, and every operation of the document present in it
# (.ci/partners/generated-operations.py).
#   - typescript-fetch: `tsc` over the generated project's own tsconfig.json;
#   - python: every generated module imported (pydantic, python-dateutil, urllib3 in PARTNER_PYTHON);
#   - go: `go build` and `go vet`; the client's one dependency, gopkg.in/validator.v2, is taken from
#     Debian's golang-gopkg-validator.v2-dev (GO_VALIDATOR) so that the job needs no module proxy;
#   - java: the `native` library (java.net.http and Jackson), compiled by `javac` against the
#     Jackson classes the generator's own jar carries and Debian's jakarta-annotation-api, so that
#     it needs no Maven repository. Three options differ from the generator's defaults, each for a
#     library no package source of this job carries: the default library, okhttp-gson, needs
#     gson-fire; openApiNullable=false, since jackson-databind-nullable is not in the jar; and
#     useJakartaEe=true, since javax.annotation-api is not either (Debian has Jakarta's).
# One known exception, reported but not failing: the clients of the 3.1 copy of openapi.yaml whose
# generated WebhookPayloadsApi does not compile (python: its methods' parameters have no type;
# typescript-fetch: its imports). The generator makes every entry of `webhooks` a client method,
# in every language a call that would POST the payload to our server; the operations of `paths`
# it reads right, and the 3.0 document's clients, where the events are `x-webhooks`, compile.
# Usage: .ci/partners/generators.sh V31_DIR   (V31_DIR holds the 3.1 copies; GENERATOR: the
# openapi-generator-cli executable; TSC; PARTNER_PYTHON; GO_VALIDATOR; JAKARTA_ANNOTATIONS)
set -euo pipefail
cd "$(dirname "$0")/../.."
v31=$1
python=${PARTNER_PYTHON:-python3}
generator=${GENERATOR:-openapi-generator-cli}
tsc=${TSC:-tsc}
go_validator=${GO_VALIDATOR:-/usr/share/gocode/src/gopkg.in/validator.v2}
annotations=${JAKARTA_ANNOTATIONS:-/usr/share/java/jakarta-annotation-api.jar}
jar=$("$python" -c 'import openapi_generator_cli, pathlib; print(pathlib.Path(openapi_generator_cli.__file__).parent / "openapi-generator.jar")')
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# A Go module of Debian's copy of the validator (Debian keeps its source, without a go.mod).
cp -r "$go_validator" "$work/validator"
printf 'module gopkg.in/validator.v2\n\ngo 1.18\n' >"$work/validator/go.mod"

compile() {
  local lang=$1 out=$2
  case $lang in
    typescript-fetch) "$tsc" -p "$out/tsconfig.json" --noEmit ;;
    python) (cd "$out" && "$python" -c 'import importlib, pkgutil, gymapi
for m in pkgutil.walk_packages(gymapi.__path__, "gymapi."): importlib.import_module(m.name)') ;;
    go) (cd "$out" && export GOPROXY=off GOFLAGS=-mod=mod &&
      go mod edit -replace "gopkg.in/validator.v2=$work/validator" && go build ./... && go vet .) ;;
    java) mkdir -p "$out/classes" && find "$out/src/main/java" -name '*.java' >"$out/sources" &&
      javac -nowarn -d "$out/classes" -cp "$jar:$annotations" "@$out/sources" ;;
  esac
}

failed=0
for doc in openapi.yaml openapi-devices.yaml "$v31/openapi.yaml" "$v31/openapi-devices.yaml"; do
  for lang in typescript-fetch python go java; do
    out="$work/$(echo "$doc" | tr '/.' '__')-$lang"
    options=(--additional-properties=packageName=gymapi,npmName=gymapi)
    [ "$lang" = java ] && options+=(--library native --additional-properties=openApiNullable=false,useJakartaEe=true)
    if ! "$generator" generate -i "$doc" -g "$lang" -o "$out" "${options[@]}" >"$out.log" 2>&1; then
      echo "$doc, $lang: the generator failed:"; tail -20 "$out.log"; failed=1; continue
    fi
    if ! compile "$lang" "$out" >"$out.build" 2>&1; then
      if [ "$doc" = "$v31/openapi.yaml" ] && grep -q -i 'webhook_\?payloads_\?api' "$out.build"; then
        echo "$doc, $lang: known exception: its WebhookPayloadsApi, made of the webhooks, does not compile"; continue
      fi
      echo "$doc, $lang: the client does not compile:"; head -40 "$out.build"; failed=1; continue
    fi
    "$python" .ci/partners/generated-operations.py "$doc" "$lang" "$out" || failed=1
  done
done
exit "$failed"
