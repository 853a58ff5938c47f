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
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
contrib/deps.sh test
export PORTAL_TOKEN_BIN=$(contrib/build-release.sh 2>/dev/null)
export FAKE_SERVER=$(contrib/build-release.sh --product portal-fake-server 2>/dev/null)
export BENCH_SCRIPTS=$root/contrib/bench
exec contrib/dev/run-in-keyring.sh bash -c '
    set -euo pipefail
    cd "$BENCH_WORK"
    : > empty.swift
    swiftc -O -static-stdlib empty.swift -o empty-swift
    unset PORTAL_TOKEN_BACKEND PORTAL_TOKEN_PASSPHRASE
    export PORTAL_TOKEN_FILE=$BENCH_WORK/store PORTAL_TOKEN_PASSPHRASE_FILE=$BENCH_WORK/passphrase
    export PORTAL_TOKEN_KEY_CACHE_TIMEOUT=600
    (umask 077 && printf "bench passphrase %s\n" "$RANDOM$RANDOM" > passphrase)
    . "$BENCH_SCRIPTS/fake-portal.sh"
    # A Portal token stored through the credential protocol becomes the signed-in session: in the
    # keyring (auto, with a provider on the bus) and in the encrypted file.
    for backend in auto file; do
        printf "protocol=http\nhost=127.0.0.1:%s\nusername=bench-user\npassword=%s\n" "$port" "$token" |
            "$PORTAL_TOKEN_BIN" store --backend "$backend" 2>/dev/null
    done
    (umask 077 && printf "Authorization: Bearer %s\n" "$token" > curl.headers)
    url="http://127.0.0.1:$port/api/v3/clients/me"
    # Each must really answer, or the timing means nothing.
    "$PORTAL_TOKEN_BIN" api /api/v3/clients/me | grep -q "\"id\":\"client-1\""
    "$PORTAL_TOKEN_BIN" api --backend file /api/v3/clients/me | grep -q "\"id\":\"client-1\""
    curl -s -H @curl.headers "$url" | grep -q "\"id\":\"client-1\""

    rounds=${BENCH_ROUNDS:-15}
    for round in $(seq "$rounds"); do
        hyperfine -N --style none --warmup 5 --runs "${BENCH_RUNS:-30}" --export-csv "round-$round.csv" \
            --command-name "curl -s" "curl -s -H @curl.headers $url" \
            --command-name "portal-token api (auto, keyring)" "$PORTAL_TOKEN_BIN api /api/v3/clients/me" \
            --command-name "portal-token api (file)" "$PORTAL_TOKEN_BIN api --backend file /api/v3/clients/me" \
            --command-name "empty Swift program" "$BENCH_WORK/empty-swift"
    done
    # CSV columns: command,mean,stddev,median,user,system,min,max (seconds); the names hold no comma.
    python3 - "$rounds" <<"PY"
import csv, statistics, sys
rounds = int(sys.argv[1])
def medians(path):
    return {row["command"]: float(row["median"]) * 1000 for row in csv.DictReader(open(path))}
print("milliseconds, in this order: " + "; ".join(medians("round-1.csv")))
ratios = {"api (auto, keyring) / curl": [], "api (file) / curl": []}
bus, times = [], {}
for round in range(1, rounds + 1):
    m = medians(f"round-{round}.csv")
    for name, value in m.items():
        times.setdefault(name, []).append(value)
    print(f"round {round:2}: " + ", ".join(f"{value:.2f}" for value in m.values()))
    ratios["api (auto, keyring) / curl"].append(m["portal-token api (auto, keyring)"] / m["curl -s"])
    ratios["api (file) / curl"].append(m["portal-token api (file)"] / m["curl -s"])
    bus.append(m["portal-token api (auto, keyring)"] - m["portal-token api (file)"])
print(f"medians over {rounds} rounds:")
for name, values in times.items():
    print(f"  {name:34} {statistics.median(values):6.2f} ms")
print(f"ratios over {rounds} rounds: median (min-max); goal <= 1.2")
for name, values in ratios.items():
    print(f"  {name:28} {statistics.median(values):.2f} ({min(values):.2f}-{max(values):.2f})")
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
