#!/usr/bin/env bash
# Benchmark of the agent (docs/agent.md) inside a private gnome-keyring, the session under the
# default backend (auto) with its cache. Each round is one hyperfine run, no shell, each command
# given its stdin by contrib/bench/feed.c (whose own median is subtracted):
#   1. `portal-token --agent-socket … token`: client mode, answered by the agent;
#   2. `portal-token token` locally;
#   3. git's C helper `git-credential-libsecret get` of a stored credential;
#   4. a raw `curl -s --unix-socket … /v1/token` round trip.
# The ratios are taken within each round (the machine's load moves between rounds) and printed as
# the median over the rounds with their spread (goal: client mode <= the local path). Then the
# agent's resident memory idle, with 200 clients connected at once, and its peak after answering
# them.
#
# Usage: contrib/bench/agent.sh    (BENCH_ROUNDS=10 rounds of BENCH_RUNS=40 runs each)
set -euo pipefail
. "$(dirname "$0")/with-c-helper.sh"
FEED=$helpers/feed
cc -O2 -static -o "$FEED" contrib/bench/feed.c
export FEED
exec contrib/dev/run-in-keyring.sh bash -c '
    set -euo pipefail
    cd "$BENCH_WORK"
    unset PORTAL_TOKEN_BACKEND PORTAL_TOKEN_AGENT_SOCK
    # A session adopted for an API nobody answers: the cached path never reaches it.
    export PORTAL_AUTH_ENVIRONMENT_ID=bench-environment PORTAL_API_HOST=127.0.0.1:9
    token="bench-token-$RANDOM$RANDOM"
    printf "protocol=http\nhost=127.0.0.1:9\nusername=bench-user\npassword=%s\n" "$token" | "$PORTAL_TOKEN_BIN" store
    printf "protocol=https\nhost=bench-c.example\nusername=bench\npassword=c-helper-secret\n" | "$C_HELPER" store >/dev/null
    printf "protocol=https\nhost=bench-c.example\n" > c.request

    "$PORTAL_TOKEN_BIN" agent 2> agent.log &
    agent=$!
    trap "kill $agent 2>/dev/null" EXIT
    socket="$XDG_RUNTIME_DIR/portal-token/agent.sock"
    for _ in $(seq 100); do [ -S "$socket" ] && break; sleep 0.05; done
    export SOCKET="$socket"
    # Each must really answer, or the timing means nothing.
    [ "$(PORTAL_TOKEN_AGENT_SOCK=$socket "$PORTAL_TOKEN_BIN" token)" = "$token" ]
    [ "$("$PORTAL_TOKEN_BIN" token)" = "$token" ]
    "$C_HELPER" get < c.request | grep -q "^password=c-helper-secret$"
    curl -s --unix-socket "$socket" http://localhost/v1/token | grep -q "\"token\":\"$token\""

    printf "" > empty.request
    rounds=${BENCH_ROUNDS:-10}
    for round in $(seq "$rounds"); do
        hyperfine -N --style none --warmup 5 --runs "${BENCH_RUNS:-40}" --export-csv "round-$round.csv" \
            --command-name "feeder alone" "$FEED empty.request" \
            --command-name "portal-token token (client mode, through the agent)" \
                "$FEED empty.request $PORTAL_TOKEN_BIN --agent-socket $socket token" \
            --command-name "portal-token token (local, auto, cached)" "$FEED empty.request $PORTAL_TOKEN_BIN token" \
            --command-name "git-credential-libsecret get" "$FEED c.request $C_HELPER get" \
            --command-name "curl --unix-socket /v1/token" \
                "$FEED empty.request /usr/bin/curl -s --unix-socket $socket http://localhost/v1/token" >&2
    done

    idle=$(sed -n "s/^VmRSS:[[:space:]]*\([0-9]*\) kB/\1/p" /proc/$agent/status)
    # 200 clients connect at once, all before any sends its request, then all ask for the token.
    python3 - "$socket" "$agent" "$token" <<"PY" > crowd.txt
import socket, sys, threading
path, pid, token = sys.argv[1], sys.argv[2], sys.argv[3]
def rss(field):
    for line in open(f"/proc/{pid}/status"):
        if line.startswith(field):
            return int(line.split()[1])
clients = []
for _ in range(200):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(path)
    clients.append(s)
ready = threading.Barrier(201)
answers = []
def ask(s):
    ready.wait()
    s.sendall(b"GET /v1/token HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
    data = b""
    while chunk := s.recv(65536):
        data += chunk
    answers.append(data)
threads = [threading.Thread(target=ask, args=(s,)) for s in clients]
for t in threads: t.start()
connected = rss("VmRSS:")
ready.wait()
for t in threads: t.join()
good = sum(1 for a in answers if a.startswith(b"HTTP/1.1 200") and token.encode() in a)
print(connected, rss("VmHWM:"), good)
PY
    read -r connected peak good < crowd.txt
    python3 - "$rounds" "$idle" "$connected" "$peak" "$good" <<"PY"
import csv, statistics, sys
rounds, idle, connected, peak, good = (int(v) for v in sys.argv[1:])
client, local = "portal-token token (client mode, through the agent)", "portal-token token (local, auto, cached)"
helper, curl = "git-credential-libsecret get", "curl --unix-socket /v1/token"
per_round = []
for number in range(1, rounds + 1):
    medians = {row["command"]: float(row["median"]) * 1000 for row in csv.DictReader(open(f"round-{number}.csv"))}
    feeder = medians.pop("feeder alone")
    per_round.append({name: value - feeder for name, value in medians.items()})
for name in (client, local, helper, curl):
    values = [r[name] for r in per_round]
    print(f"median {name}: {statistics.median(values):.2f} ms (rounds {min(values):.2f}-{max(values):.2f})")
def ratio(a, b, goal=""):
    values = [r[a] / r[b] for r in per_round]
    print(f"ratio {a} / {b}: {statistics.median(values):.2f} (rounds {min(values):.2f}-{max(values):.2f}){goal}")
ratio(client, local, " (goal <= 1.0)")
ratio(client, helper)
ratio(client, curl)
print(f"agent RSS idle: {idle / 1024:.1f} MB; with 200 clients connected: {connected / 1024:.1f} MB; "
      f"peak (VmHWM) after answering them: {peak / 1024:.1f} MB; answered correctly: {good}/200")
PY
'
