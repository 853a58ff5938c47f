#!/usr/bin/env bash
# Benchmark: `portal-token get` against git's C libsecret helper and `secret-tool lookup`, each
# answering from a private gnome-keyring that holds one stored credential, in one hyperfine run.
# Prints the medians, the ratio portal-token / C helper, and portal-token's peak RSS.
set -euo pipefail
. "$(dirname "$0")/with-c-helper.sh"
exec contrib/dev/run-in-keyring.sh bash -c '
    set -euo pipefail
    cd "$BENCH_WORK"
    printf "protocol=https\nhost=bench.example\nusername=bench\npassword=portal-token-secret\n" | "$PORTAL_TOKEN_BIN" store
    printf "protocol=https\nhost=bench-c.example\nusername=bench\npassword=c-helper-secret\n" | "$C_HELPER" store >/dev/null
    printf "protocol=https\nhost=bench.example\n" > portal.request
    printf "protocol=https\nhost=bench-c.example\n" > c.request
    # Each must really answer, or the timing means nothing.
    "$PORTAL_TOKEN_BIN" get < portal.request | grep -q "^password=portal-token-secret$"
    "$C_HELPER" get < c.request | grep -q "^password=c-helper-secret$"
    secret-tool lookup protocol https server bench.example | grep -q "^portal-token-secret"

    hyperfine --shell sh --warmup 10 --runs "${BENCH_RUNS:-200}" --export-json bench.json \
        -n portal-token "$PORTAL_TOKEN_BIN get < portal.request" \
        -n git-credential-libsecret "$C_HELPER get < c.request" \
        -n secret-tool "secret-tool lookup protocol https server bench.example"

    rss=$( { /usr/bin/time -f "%M" "$PORTAL_TOKEN_BIN" get < portal.request >/dev/null; } 2>&1 | tail -n1)
    python3 - "$rss" <<"PY"
import json, sys
results = {r["command"]: r for r in json.load(open("bench.json"))["results"]}
median = {name: results[name]["median"] * 1000 for name in results}
for name, value in median.items():
    print(f"median {name}: {value:.2f} ms")
ratio = median["portal-token"] / median["git-credential-libsecret"]
print(f"ratio portal-token / git-credential-libsecret: {ratio:.2f}")
print(f"peak RSS portal-token get: {int(sys.argv[1]) / 1024:.1f} MB")
PY
'
