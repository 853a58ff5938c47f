#!/usr/bin/env bash
# Benchmark of the default backend (auto) inside a private gnome-keyring, in one hyperfine run:
#   1. script-mode `portal-token get </dev/null`, served from the kernel-keyring cache after its
#      lock check (the session bus's NameHasOwner for auto, then the default collection's Locked
#      property, over portal-token's own connection to the bus);
#   2. credential-protocol `portal-token get` of a stored credential (read over the same
#      connection, without libsecret);
#   3. git's C helper `git-credential-libsecret get` of a stored credential.
# Prints the medians and the ratios against the C helper (goals: 1. <= 0.35, 2. <= 0.6).
set -euo pipefail
. "$(dirname "$0")/with-c-helper.sh"
exec contrib/dev/run-in-keyring.sh bash -c '
    set -euo pipefail
    cd "$BENCH_WORK"
    unset PORTAL_TOKEN_BACKEND
    # A session adopted for an API nobody answers: the cached path never reaches it.
    export PORTAL_AUTH_ENVIRONMENT_ID=bench-environment PORTAL_API_HOST=127.0.0.1:9
    token="bench-token-$RANDOM$RANDOM"
    printf "protocol=http\nhost=127.0.0.1:9\nusername=bench-user\npassword=%s\n" "$token" | "$PORTAL_TOKEN_BIN" store
    printf "protocol=https\nhost=bench.example\nusername=bench\npassword=portal-token-secret\n" | "$PORTAL_TOKEN_BIN" store
    printf "protocol=https\nhost=bench-c.example\nusername=bench\npassword=c-helper-secret\n" | "$C_HELPER" store >/dev/null
    printf "protocol=https\nhost=bench.example\n" > portal.request
    printf "protocol=https\nhost=bench-c.example\n" > c.request
    # Each must really answer, or the timing means nothing.
    [ "$("$PORTAL_TOKEN_BIN" get </dev/null)" = "$token" ]
    "$PORTAL_TOKEN_BIN" get < portal.request | grep -q "^password=portal-token-secret$"
    "$C_HELPER" get < c.request | grep -q "^password=c-helper-secret$"

    hyperfine --shell sh --warmup 10 --runs "${BENCH_RUNS:-200}" --export-json auto.json \
        -n "portal-token get (script mode, cached, lock check)" "$PORTAL_TOKEN_BIN get </dev/null" \
        -n "portal-token get (credential)" "$PORTAL_TOKEN_BIN get < portal.request" \
        -n "git-credential-libsecret get" "$C_HELPER get < c.request"
    python3 - <<"PY"
import json
results = json.load(open("auto.json"))["results"]
for r in results:
    name, median = r["command"], r["median"] * 1000
    print(f"median {name}: {median:.2f} ms")
script, credential, c = (r["median"] for r in results)
print(f"ratio script-mode get (cached, lock check) / C helper: {script / c:.2f} (goal <= 0.35)")
print(f"ratio credential get / C helper: {credential / c:.2f} (goal <= 0.6)")
PY
'
