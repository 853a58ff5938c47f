#!/usr/bin/env bash
# Two builds of portal-token side by side on `api /api/v3/clients/me`, under `auto` (the keyring's
# session, after the bus checks) and with the encrypted file, against `curl -s`, inside a private
# gnome-keyring with the loopback fake Portal: for a change whose gain is smaller than the
# machine's noise between two runs, each ratio is taken within a round (docs/benchmarks.md,
# "The Portal API").
# Usage: contrib/bench/api-ab.sh A B     (two portal-token binaries; BENCH_ROUNDS rounds, default 15)
set -euo pipefail
[ $# -eq 2 ] || { echo "usage: contrib/bench/api-ab.sh BINARY_A BINARY_B" >&2; exit 2; }
A=$(realpath "$1") B=$(realpath "$2")
export A B
. "$(dirname "$0")/with-fake-portal.sh"
bench_in_keyring '
    unset PORTAL_TOKEN_BACKEND PORTAL_TOKEN_PASSPHRASE
    bench_file_store "$BENCH_WORK"
    . "$BENCH_SCRIPTS/fake-portal.sh"
    for backend in auto file; do
        printf "protocol=http\nhost=127.0.0.1:%s\nusername=bench-user\npassword=%s\n" "$port" "$token" |
            "$A" store --backend "$backend" 2>/dev/null
    done
    for binary in "$A" "$B"; do
        "$binary" api /api/v3/clients/me | grep -q "\"id\":\"client-1\""
        "$binary" api --backend file /api/v3/clients/me | grep -q "\"id\":\"client-1\""
    done
    bench_rounds 5 30 \
        --command-name "curl" "curl -s -H @curl.headers $url" \
        --command-name "A auto" "$A api /api/v3/clients/me" \
        --command-name "B auto" "$B api /api/v3/clients/me" \
        --command-name "A file" "$A api --backend file /api/v3/clients/me" \
        --command-name "B file" "$B api --backend file /api/v3/clients/me" >&2
    bench_python "$rounds" <<"PY"
import sys
from rounds import read_rounds, print_medians, print_spreads
rounds = int(sys.argv[1])
every, times = read_rounds(rounds)
print_medians(times, 20, f"medians over {rounds} rounds:")
ratios = {name: [m[name] / m["curl"] for m in every] for name in ["A auto", "B auto", "A file", "B file"]}
ratios["A / B, auto"] = [m["A auto"] / m["B auto"] for m in every]
ratios["A / B, file"] = [m["A file"] / m["B file"] for m in every]
print_spreads(ratios, 20, f"ratios over {rounds} rounds: median (min-max)")
PY
'
