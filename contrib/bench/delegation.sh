#!/usr/bin/env bash
# Benchmark of what a delegated credential adds to a request through `portal-token proxy`: the
# fake Portal server over loopback, the session in the encrypted file (key cached), one running
# `portal-token proxy --listen`. One hyperfine run per round holds one curl process sending 100
# requests over one kept-alive connection to the proxy:
#   1. with the proxy's own credential (compared, byte for byte);
#   2. with a credential from `portal-token delegate --ttl 1h --allow GET --path /api/v3/clients/me`
#      (read, judged, its HMAC chain checked against the session's root key, the registry stat'ed).
# The difference divided by 100 is what delegation adds per request. Prints each round's medians,
# the median and spread of that difference (goal: at most 0.5 ms), and the proxy's own CPU time per
# request each way, which the load does not move.
#
# Usage: contrib/bench/delegation.sh   (needs hyperfine, curl and python3: contrib/deps.sh test;
#                                       BENCH_ROUNDS=15 rounds of BENCH_RUNS=20 runs each)
set -euo pipefail
. "$(dirname "$0")/with-fake-portal.sh"
bench_in_keyring '
    . "$BENCH_SCRIPTS/running-proxy.sh"
    delegated=$("$PORTAL_TOKEN_BIN" delegate --ttl 1h --allow GET --path /api/v3/clients/me 2>/dev/null)
    (umask 077 && printf "Portal-Token-Proxy: %s\n" "$delegated" > delegated.headers)

    # Each must really answer, or the timing means nothing.
    curl -s -H @proxy.headers "$proxied" | grep -q "\"id\":\"client-1\""
    curl -s -H @delegated.headers "$proxied" | grep -q "\"id\":\"client-1\""

    for _ in $(seq 100); do printf "url = \"%s\"\noutput = \"/dev/null\"\n" "$proxied" >> proxied.curl; done

    bench_rounds 3 20 \
        --command-name "100 requests, the proxy credential" "curl -s -H @proxy.headers -K proxied.curl" \
        --command-name "100 requests, a delegated credential" "curl -s -H @delegated.headers -K proxied.curl"
    bench_python "$rounds" <<"PY"
import statistics, sys
from rounds import print_medians, read_rounds
rounds = int(sys.argv[1])
every, times = read_rounds(rounds)
added = [(m["100 requests, a delegated credential"] - m["100 requests, the proxy credential"]) / 100 for m in every]
print_medians(times, 38, f"medians over {rounds} rounds:")
print(f"a delegated credential adds per request: {statistics.median(added):.3f} ms "
      f"({min(added):.3f} to {max(added):.3f}); goal <= 0.5 ms")
PY
    # What the proxy itself spends, which the load of the machine does not move: its CPU time
    # (user and system, from /proc) over 1000 requests each way.
    ticks() { awk "{print \$14 + \$15}" "/proc/$proxy/stat"; }
    for kind in proxy delegated; do
        before=$(ticks)
        for _ in $(seq 10); do curl -s -H @$kind.headers -K proxied.curl; done
        echo "CPU time of the proxy per request, $kind: $(( ($(ticks) - before) * 1000000 / $(getconf CLK_TCK) / 1000 )) us"
    done
'
