#!/usr/bin/env bash
# Benchmark of a request through `portal-token proxy` against the same request with
# `portal-token api` and with `curl -s` and the token, on the fake Portal server over loopback (in
# lenient mode, so that plain curl is served too), the session in the encrypted file (key cached).
# One hyperfine run per round holds:
#   1. `curl -s -H @headers URL` straight to the fake (the headers file holds the Authorization line);
#   2. `curl -s -H @proxy.headers PROXY_URL`: the same request through a running `portal-token proxy`
#      on 127.0.0.1 (the headers file holds the Portal-Token-Proxy credential line);
#   3. `portal-token api --backend file /api/v3/clients/me`, a whole process per request.
#   4. and 5. one curl process sending 100 such requests, straight and through the proxy (to the
#      proxy over one kept-alive connection; the fake closes each of its own), so the difference
#      divided by 100 is what the proxy adds per request without the noise of process start-up.
# The run is cut into short rounds and the differences taken within each, since the machine's load
# moves between commands. Prints each round's medians and the median and spread of what the proxy
# adds per request over curl alone, both ways (goal: at most 1 ms), and the proxy's own CPU time per
# request, which the load does not move.
#
# Usage: contrib/bench/proxy.sh     (needs hyperfine, curl and python3: contrib/deps.sh test;
#                                    BENCH_ROUNDS=15 rounds of BENCH_RUNS=30 runs each)
set -euo pipefail
. "$(dirname "$0")/with-fake-portal.sh"
bench_in_keyring '
    . "$BENCH_SCRIPTS/running-proxy.sh"

    # Each must really answer, or the timing means nothing.
    curl -s -H @curl.headers "$url" | grep -q "\"id\":\"client-1\""
    curl -s -H @proxy.headers "$proxied" | grep -q "\"id\":\"client-1\""
    "$PORTAL_TOKEN_BIN" api /api/v3/clients/me | grep -q "\"id\":\"client-1\""

    for _ in $(seq 100); do
        printf "url = \"%s\"\noutput = \"/dev/null\"\n" "$url" >> direct.curl
        printf "url = \"%s\"\noutput = \"/dev/null\"\n" "$proxied" >> proxied.curl
    done

    bench_rounds 5 30 \
        --command-name "curl -s, the token" "curl -s -H @curl.headers $url" \
        --command-name "curl -s through the proxy" "curl -s -H @proxy.headers $proxied" \
        --command-name "portal-token api (file)" "$PORTAL_TOKEN_BIN api /api/v3/clients/me" \
        --command-name "curl, 100 requests" "curl -s -H @curl.headers -K direct.curl" \
        --command-name "curl, 100 requests through the proxy" "curl -s -H @proxy.headers -K proxied.curl"
    bench_python "$rounds" <<"PY"
import statistics, sys
from rounds import print_medians, read_rounds
rounds = int(sys.argv[1])
every, times = read_rounds(rounds)
added = [m["curl -s through the proxy"] - m["curl -s, the token"] for m in every]
added_hundred = [(m["curl, 100 requests through the proxy"] - m["curl, 100 requests"]) / 100 for m in every]
print_medians(times, 28, f"medians over {rounds} rounds:")
print(f"the proxy adds per request, a curl process each: {statistics.median(added):.2f} ms "
      f"({min(added):.2f} to {max(added):.2f}); goal <= 1 ms")
print(f"the proxy adds per request, 100 in one curl: {statistics.median(added_hundred):.2f} ms "
      f"({min(added_hundred):.2f} to {max(added_hundred):.2f}); goal <= 1 ms")
PY
    # What the proxy itself spends, which the load of the machine does not move: its CPU time
    # (user and system, from /proc) over 1000 requests.
    ticks() { awk "{print \$14 + \$15}" "/proc/$proxy/stat"; }
    before=$(ticks)
    for _ in $(seq 10); do curl -s -H @proxy.headers -K proxied.curl; done
    echo "CPU time of the proxy per request: $(( ($(ticks) - before) * 1000000 / $(getconf CLK_TCK) / 1000 )) us"
'
