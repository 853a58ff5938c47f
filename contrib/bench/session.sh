#!/usr/bin/env bash
# Benchmark of the Portal-session paths, in one hyperfine run each, inside a private
# gnome-keyring with a signed-in session and a loopback fake Portal server:
#   1. `portal-token api /api/v3/clients/me` against `curl -s -H "Authorization: Bearer …"` on the
#      same server (the fake runs in lenient mode so that plain curl is served too);
#   2. `portal-token token` and script-mode `portal-token get` with a live session (its copy in
#      the kernel keyring) against git's C helper's `get`.
# Prints the medians and the ratios.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
contrib/deps.sh test
portal_token=$(contrib/build-release.sh 2>/dev/null)
fake_server=$(contrib/build-release.sh --product portal-fake-server 2>/dev/null)
helpers=$(mktemp -d "${TMPDIR:-/tmp}/portal-token-helpers.XXXXXX")
trap 'rm -rf "$helpers"' EXIT
contrib/testing/build-git-helpers.sh "$helpers"

export PORTAL_TOKEN_BIN=$portal_token FAKE_SERVER=$fake_server
export C_HELPER=$helpers/git-credential-libsecret
export BENCH_SCRIPTS=$root/contrib/bench
exec contrib/dev/run-in-keyring.sh bash -c '
    set -euo pipefail
    cd "$BENCH_WORK"
    . "$BENCH_SCRIPTS/fake-portal.sh"
    printf "protocol=http\nhost=127.0.0.1:%s\nusername=bench-user\npassword=%s\n" "$port" "$token" | "$PORTAL_TOKEN_BIN" store
    printf "protocol=https\nhost=bench-c.example\nusername=bench\npassword=c-helper-secret\n" | "$C_HELPER" store >/dev/null
    printf "protocol=https\nhost=bench-c.example\n" > c.request
    printf "Authorization: Bearer %s\n" "$token" > curl.headers
    # Each must really answer, or the timing means nothing.
    [ "$("$PORTAL_TOKEN_BIN" get </dev/null)" = "$token" ]
    [ "$("$PORTAL_TOKEN_BIN" token)" = "$token" ]
    "$PORTAL_TOKEN_BIN" api /api/v3/clients/me | grep -q "\"id\":\"client-1\""
    curl -sf -H @curl.headers "http://127.0.0.1:$port/api/v3/clients/me" | grep -q "\"id\":\"client-1\""

    hyperfine --shell sh --warmup 10 --runs "${BENCH_RUNS:-200}" --export-json api.json \
        -n "portal-token api" "$PORTAL_TOKEN_BIN api /api/v3/clients/me" \
        -n "curl" "curl -sf -H @curl.headers http://127.0.0.1:$port/api/v3/clients/me"
    hyperfine --shell sh --warmup 10 --runs "${BENCH_RUNS:-200}" --export-json get.json \
        -n "portal-token token" "$PORTAL_TOKEN_BIN token" \
        -n "portal-token get" "$PORTAL_TOKEN_BIN get </dev/null" \
        -n "git-credential-libsecret" "$C_HELPER get < c.request"
    python3 - <<"PY"
import json
def medians(path):
    return {r["command"]: r["median"] * 1000 for r in json.load(open(path))["results"]}
api, get = medians("api.json"), medians("get.json")
for name, value in {**api, **get}.items():
    print(f"median {name}: {value:.2f} ms")
ratio_api = api["portal-token api"] / api["curl"]
ratio_get = get["portal-token get"] / get["git-credential-libsecret"]
ratio_token = get["portal-token token"] / get["git-credential-libsecret"]
print(f"ratio portal-token api / curl: {ratio_api:.2f}")
print(f"ratio portal-token get (script) / git-credential-libsecret: {ratio_get:.2f}")
print(f"ratio portal-token token / git-credential-libsecret: {ratio_token:.2f}")
PY
'
