#!/usr/bin/env bash
# Benchmark of the agent (docs/agent.md) inside a private gnome-keyring, the session under the
# default backend (auto) with its cache, in one hyperfine run:
#   1. `portal-token token` in client mode (PORTAL_TOKEN_AGENT_SOCK), answered by the agent;
#   2. `portal-token token` locally;
#   3. git's C helper `git-credential-libsecret get` of a stored credential;
#   4. a raw `curl --unix-socket … /v1/token` round trip.
# Then the agent's resident memory idle, and its peak while 200 clients are connected at once.
# Prints the medians, the ratios (goal: client mode <= the local path) and the memory figures.
set -euo pipefail
. "$(dirname "$0")/with-c-helper.sh"
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

    hyperfine --shell sh --warmup 10 --runs "${BENCH_RUNS:-200}" --export-json agent.json \
        -n "portal-token token (client mode, through the agent)" \
            "PORTAL_TOKEN_AGENT_SOCK=$socket $PORTAL_TOKEN_BIN token" \
        -n "portal-token token (local, auto, cached)" "$PORTAL_TOKEN_BIN token" \
        -n "git-credential-libsecret get" "$C_HELPER get < c.request" \
        -n "curl --unix-socket /v1/token" "curl -s --unix-socket $socket http://localhost/v1/token"

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
    python3 - "$idle" "$connected" "$peak" "$good" <<"PY"
import json, sys
idle, connected, peak, good = (int(v) for v in sys.argv[1:])
results = json.load(open("agent.json"))["results"]
for r in results:
    name, median = r["command"], r["median"] * 1000
    print(f"median {name}: {median:.2f} ms")
client, local, c, curl = (r["median"] for r in results)
print(f"ratio client mode / local token: {client / local:.2f} (goal <= 1.0)")
print(f"ratio client mode / C helper get: {client / c:.2f}")
print(f"agent RSS idle: {idle / 1024:.1f} MB; with 200 clients connected: {connected / 1024:.1f} MB; "
      f"peak (VmHWM) after answering them: {peak / 1024:.1f} MB; answered correctly: {good}/200")
PY
'
