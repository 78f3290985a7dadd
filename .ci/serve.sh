# Sourced by CI's scripts that talk to a live gymapi (bash, `set -e`).
#
# serve_gymapi BINARY LOG [FLAGS...] runs `BINARY serve FLAGS` in the background on a free loopback
# port, its output in LOG, and waits until /healthz answers (20 s at most; it says why not and
# fails). It sets `port` and `server` (the pid: the caller's EXIT trap stops it) and, with
# `--demo` among the flags, `key`: the demo gym's live key, which `serve --demo` prints.
serve_gymapi() {
  local binary=$1 log=$2 _
  shift 2
  port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  "$binary" serve "$@" --bind "127.0.0.1:$port" >"$log" 2>&1 &
  server=$!
  for _ in $(seq 1 200); do
    curl -fs "http://127.0.0.1:$port/healthz" >/dev/null 2>&1 && break
    kill -0 "$server" 2>/dev/null || break
    sleep 0.1
  done
  if ! curl -fs "http://127.0.0.1:$port/healthz" >/dev/null 2>&1; then
    echo "gymapi did not start:"
    cat "$log"
    return 1
  fi
  case " $* " in
    *" --demo "*)
      key=$(grep -o 'svc_live_[A-Za-z0-9]*' "$log" | head -1 || true)
      [ -n "$key" ] || { echo "gymapi --demo printed no key:"; cat "$log"; return 1; }
      ;;
  esac
}
