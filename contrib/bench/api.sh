#!/usr/bin/env bash
# Benchmark of `portal-token api` against `curl -s` with the same token, whole process, on the
# fake Portal server over loopback (in lenient mode, so that plain curl is served too), inside a
# private gnome-keyring. One hyperfine run per round holds:
#   1. `curl -s -H @headers URL` (the headers file holds the Authorization line);
#   2. `portal-token api /api/v3/clients/me` under `auto`, as a desktop runs it: the session from
#      its copy in the kernel keyring, after the checks on the session bus that serving it needs
#      (a provider is registered, the default collection is not locked);
#   3. the same with `--backend file` (the session in the encrypted file, key cached): the bus is
#      never asked, as on a server;
#   4. an empty Swift program built with `swiftc -O -static-stdlib`, for scale.
# hyperfine runs each command's runs one after the other, so the run is cut into many short
# rounds and the ratios are taken within each. Then, with valgrind, the instructions each runs.
# Prints each round's medians, and the median and spread of each ratio (goal: api / curl <= 1.2).
#
# Usage: contrib/bench/api.sh     (needs hyperfine, curl, python3 and a gnome-keyring: contrib/deps.sh
#                                  test; BENCH_ROUNDS=15 rounds of BENCH_RUNS=30 runs each)
set -euo pipefail
. "$(dirname "$0")/with-fake-portal.sh"
bench_in_keyring '
    : > empty.swift
    swiftc -O -static-stdlib empty.swift -o empty-swift
    unset PORTAL_TOKEN_BACKEND PORTAL_TOKEN_PASSPHRASE
    bench_file_store "$BENCH_WORK"
    . "$BENCH_SCRIPTS/fake-portal.sh"
    # A Portal token stored through the credential protocol becomes the signed-in session: in the
    # keyring (auto, with a provider on the bus) and in the encrypted file.
    for backend in auto file; do
        printf "protocol=http\nhost=127.0.0.1:%s\nusername=bench-user\npassword=%s\n" "$port" "$token" |
            "$PORTAL_TOKEN_BIN" store --backend "$backend" 2>/dev/null
    done
    # Each must really answer, or the timing means nothing.
    "$PORTAL_TOKEN_BIN" api /api/v3/clients/me | grep -q "\"id\":\"client-1\""
    "$PORTAL_TOKEN_BIN" api --backend file /api/v3/clients/me | grep -q "\"id\":\"client-1\""
    curl -s -H @curl.headers "$url" | grep -q "\"id\":\"client-1\""

    bench_rounds 5 30 \
        --command-name "curl -s" "curl -s -H @curl.headers $url" \
        --command-name "portal-token api (auto, keyring)" "$PORTAL_TOKEN_BIN api /api/v3/clients/me" \
        --command-name "portal-token api (file)" "$PORTAL_TOKEN_BIN api --backend file /api/v3/clients/me" \
        --command-name "empty Swift program" "$BENCH_WORK/empty-swift"
    bench_python "$rounds" <<"PY"
import statistics, sys
from rounds import print_medians, print_spreads, read_rounds
rounds = int(sys.argv[1])
every, times = read_rounds(rounds)
ratios = {"api (auto, keyring) / curl": [], "api (file) / curl": []}
bus = []
for m in every:
    ratios["api (auto, keyring) / curl"].append(m["portal-token api (auto, keyring)"] / m["curl -s"])
    ratios["api (file) / curl"].append(m["portal-token api (file)"] / m["curl -s"])
    bus.append(m["portal-token api (auto, keyring)"] - m["portal-token api (file)"])
print_medians(times, 34, f"medians over {rounds} rounds:")
print_spreads(ratios, 28, f"ratios over {rounds} rounds: median (min-max); goal <= 1.2")
print(f"the session bus checks of auto (api auto - api file): {statistics.median(bus):.2f} ms "
      f"({min(bus):.2f}-{max(bus):.2f})")
PY
    if command -v valgrind >/dev/null; then
        count() { valgrind --tool=callgrind --callgrind-out-file=/dev/null "$@" 2>&1 >/dev/null | sed -n "s/.*Collected : //p"; }
        echo "instructions (valgrind):"
        printf "  %-34s %10s\n" "curl -s" "$(count curl -s -H @curl.headers "$url")"
        printf "  %-34s %10s\n" "portal-token api (auto, keyring)" "$(count "$PORTAL_TOKEN_BIN" api /api/v3/clients/me)"
        printf "  %-34s %10s\n" "portal-token api (file)" "$(count "$PORTAL_TOKEN_BIN" api --backend file /api/v3/clients/me)"
        printf "  %-34s %10s\n" "empty Swift program" "$(count "$BENCH_WORK/empty-swift")"
    fi
'
