#!/usr/bin/env bash
# Benchmark: `portal-token get` against git's C libsecret helper and `secret-tool lookup`, each
# answering from a private gnome-keyring that holds one stored credential, whole process:
#   1. one hyperfine run of the three (the headline figure, goal: portal-token <= 0.6 x the C helper);
#   2. BENCH_ROUNDS short rounds of portal-token and the C helper, each fed its request by
#      contrib/bench/feed.c (no shell), the ratio taken within each round, since a change in the
#      machine's load between two commands' runs would otherwise read as a difference between them;
#   3. each program's peak RSS (the median of 11 runs; goal: portal-token <= 1.3 x the C helper);
#   4. with valgrind, the instructions each runs, which do not move with the load.
# Usage: contrib/bench/get.sh   (BENCH_RUNS=200 runs in the one run; BENCH_ROUNDS=10 rounds of
#                                BENCH_ROUND_RUNS=40 runs each)
set -euo pipefail
. "$(dirname "$0")/with-c-helper.sh"
cc -O2 -static -o "$helpers/feed" contrib/bench/feed.c
FEED=$helpers/feed
export FEED
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

    rounds=${BENCH_ROUNDS:-10}
    for round in $(seq "$rounds"); do
        hyperfine -N --style none --warmup 5 --runs "${BENCH_ROUND_RUNS:-40}" --export-csv "round-$round.csv" \
            -n "feeder alone" "$FEED portal.request" \
            -n portal-token "$FEED portal.request $PORTAL_TOKEN_BIN get" \
            -n git-credential-libsecret "$FEED c.request $C_HELPER get" >&2
    done

    peak_rss() {
        for _ in $(seq 11); do
            { /usr/bin/time -f "%M" "$@" >/dev/null; } 2>&1 | tail -n1
        done | sort -n | sed -n 6p
    }
    rss_portal=$(peak_rss "$FEED" portal.request "$PORTAL_TOKEN_BIN" get)
    rss_c=$(peak_rss "$FEED" c.request "$C_HELPER" get)

    count() {
        request=$1; shift
        valgrind --tool=callgrind --callgrind-out-file=/dev/null "$@" <"$request" 2>&1 >/dev/null |
            sed -n "s/.*Collected : //p"
    }
    instructions_portal=$(command -v valgrind >/dev/null && count portal.request "$PORTAL_TOKEN_BIN" get || echo 0)
    instructions_c=$(command -v valgrind >/dev/null && count c.request "$C_HELPER" get || echo 0)

    python3 - "$rounds" "$rss_portal" "$rss_c" "$instructions_portal" "$instructions_c" <<"PY"
import csv, json, statistics, sys
rounds, rss_portal, rss_c = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
instructions_portal, instructions_c = int(sys.argv[4]), int(sys.argv[5])
results = {r["command"]: r for r in json.load(open("bench.json"))["results"]}
median = {name: results[name]["median"] * 1000 for name in results}
print("one run:")
for name, value in median.items():
    print(f"  median {name}: {value:.2f} ms")
ratio = median["portal-token"] / median["git-credential-libsecret"]
print(f"  ratio portal-token / git-credential-libsecret: {ratio:.2f} (goal <= 0.6)")
ratios, times = [], {}
for round in range(1, rounds + 1):
    m = {row["command"]: float(row["median"]) * 1000 for row in csv.DictReader(open(f"round-{round}.csv"))}
    base = m.pop("feeder alone")
    for name, value in m.items():
        times.setdefault(name, []).append(value - base)
    ratios.append((m["portal-token"] - base) / (m["git-credential-libsecret"] - base))
print(f"{rounds} rounds, less the feeder: median (min-max)")
for name, values in times.items():
    print(f"  {name:26} {statistics.median(values):6.2f} ms ({min(values):.2f}-{max(values):.2f})")
print(f"  ratio portal-token / git-credential-libsecret: {statistics.median(ratios):.2f}"
      f" ({min(ratios):.2f}-{max(ratios):.2f})")
print("peak RSS (median of 11 runs):")
print(f"  portal-token get: {rss_portal / 1024:.1f} MB, git-credential-libsecret get: {rss_c / 1024:.1f} MB,"
      f" ratio {rss_portal / rss_c:.2f} (goal <= 1.3)")
if instructions_portal and instructions_c:
    print("instructions (valgrind):")
    print(f"  portal-token get: {instructions_portal / 1e6:.2f} million,"
          f" git-credential-libsecret get: {instructions_c / 1e6:.2f} million")
PY
'
