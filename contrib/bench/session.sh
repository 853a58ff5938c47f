#!/usr/bin/env bash
# Benchmark of the Portal-session paths inside a private gnome-keyring with a signed-in session and
# a loopback fake Portal server:
#   1. `portal-token api /api/v3/clients/me` against `curl -s -H "Authorization: Bearer …"` on the
#      same server (the fake runs in lenient mode so that plain curl is served too), one hyperfine run;
#   2. `portal-token token` and script-mode `portal-token get` with a live session (its copy in
#      the kernel keyring, served after the keyring's lock check) against git's C helper's `get`,
#      in short rounds (BENCH_ROUNDS, default 15, of BENCH_RUNS runs, default 40), each command fed
#      its stdin by contrib/bench/feed.c with no shell, each ratio taken within a round.
# Prints the medians and the ratios (goal: token / C helper <= 0.3).
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
cc -O2 -static -o "$helpers/feed" contrib/bench/feed.c
export FEED=$helpers/feed
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
    : > empty
    [ "$("$FEED" empty "$PORTAL_TOKEN_BIN" get)" = "$token" ]
    . "$BENCH_SCRIPTS/lib.sh"
    bench_rounds 10 40 \
        --command-name "feeder alone" "$FEED empty" \
        --command-name "portal-token token" "$FEED empty $PORTAL_TOKEN_BIN token" \
        --command-name "portal-token get" "$FEED empty $PORTAL_TOKEN_BIN get" \
        --command-name "git-credential-libsecret" "$FEED c.request $C_HELPER get" >&2
    bench_python "$rounds" <<"PY"
import json, sys
from rounds import print_medians, print_spreads, read_rounds
api = {r["command"]: r["median"] * 1000 for r in json.load(open("api.json"))["results"]}
for name, value in api.items():
    print(f"median {name}: {value:.2f} ms")
ratio = api["portal-token api"] / api["curl"]
print(f"ratio portal-token api / curl: {ratio:.2f}")
rounds = int(sys.argv[1])
every, times = read_rounds(rounds, less="feeder alone", less_label="the feeder")
helper = "git-credential-libsecret"
ratios = {"token / C helper": [m["portal-token token"] / m[helper] for m in every],
          "get (script) / C helper": [m["portal-token get"] / m[helper] for m in every]}
print_medians(times, 28, f"medians over {rounds} rounds, less the feeder:")
print_spreads(ratios, 26, f"ratios over {rounds} rounds: median (min-max)")
print("  goal: token / C helper <= 0.3")
PY
'
