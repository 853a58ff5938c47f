#!/usr/bin/env bash
# A three-node OpenBao cluster with integrated (Raft) storage on loopback, for the Vault store's
# fleet tests of a leader change. Every listener, the cluster port between the nodes included,
# speaks TLS: the API with a certificate for 127.0.0.1 from a CA made for the run, the cluster
# port with the certificates the nodes make for it themselves.
#
#   contrib/testing/openbao-cluster.sh start DIR   takes bao from OPENBAO_BIN, else installs the pinned
#                                                  one (contrib/testing/openbao.sh install), starts three `bao server`s with Raft
#                                                  storage on free loopback ports, initialises the
#                                                  first (one key share), unseals it, lets the other
#                                                  two join it (retry_join) and unseals them, mounts
#                                                  KV version 2 at secret/, writes the policy of
#                                                  contrib/vault/portal-token-policy.hcl and a token
#                                                  holding only it, and writes DIR/env: VAULT_ADDR_1..3,
#                                                  VAULT_CACERT, VAULT_TOKEN_FILE (the policy's token),
#                                                  VAULT_ROOT_TOKEN_FILE, OPENBAO_PID_1..3
#   contrib/testing/openbao-cluster.sh stop DIR    stops the nodes started under DIR, by their PIDs
#
# The unseal key and the tokens live in 0600 files under DIR and reach the servers in request
# bodies read from stdin, never on a command line.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
command=${1:?usage: openbao-cluster.sh start|stop DIR}
dir=${2:?usage: openbao-cluster.sh start|stop DIR}
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)

free_port() {
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'
}

# curl against node $1 with the test CA; the token, when a file is given in TOKEN_FILE, goes in
# a header read from a file, the body from stdin.
api() {
    local node=$1 method=$2 path=$3
    shift 3
    local headers=()
    if [ -n "${TOKEN_FILE:-}" ]; then
        printf 'X-Vault-Token: %s\n' "$(cat "$TOKEN_FILE")" >"$dir/header"
        headers=(-H @"$dir/header")
    fi
    curl --silent --show-error --fail-with-body --max-time 10 --cacert "$dir/tls/ca.pem" \
        "${headers[@]}" -X "$method" "${address[$node]}/v1/$path" "$@"
    local status=$?
    rm -f "$dir/header"
    return $status
}

start_cluster() {
    local bao
    bao=${OPENBAO_BIN:-$("$root/contrib/testing/openbao.sh" install "$root/.build/testing/openbao")}
    "$root/contrib/testing/openbao.sh" tls "$dir"
    local tls="$dir/tls"

    declare -ga address
    local ports=() cluster_ports=() node
    for node in 1 2 3; do
        ports[$node]=$(free_port)
        cluster_ports[$node]=$(free_port)
        address[$node]="https://127.0.0.1:${ports[$node]}"
    done
    for node in 1 2 3; do
        mkdir -p "$dir/node$node/data"
        local joins="" other
        for other in 1 2 3; do
            [ "$other" = "$node" ] && continue
            joins+="  retry_join {
    leader_api_addr     = \"${address[$other]}\"
    leader_ca_cert_file = \"$tls/ca.pem\"
  }
"
        done
        cat >"$dir/node$node/server.hcl" <<HCL
storage "raft" {
  path    = "$dir/node$node/data"
  node_id = "node$node"
  # Loopback: elect a new leader within a few seconds of losing one.
  performance_multiplier = 1
$joins}
listener "tcp" {
  address         = "127.0.0.1:${ports[$node]}"
  cluster_address = "127.0.0.1:${cluster_ports[$node]}"
  tls_cert_file   = "$tls/server.pem"
  tls_key_file    = "$tls/server.key"
}
api_addr      = "${address[$node]}"
cluster_addr  = "https://127.0.0.1:${cluster_ports[$node]}"
disable_mlock = true
HCL
        setsid "$bao" server -config="$dir/node$node/server.hcl" >"$dir/node$node/server.log" 2>&1 </dev/null &
        echo $! >"$dir/node$node/pid"
    done

    # Every node answers (sealed, uninitialised: sys/health says so with a status other than 200).
    for node in 1 2 3; do
        local up=
        for _ in $(seq 1 150); do
            if curl --silent --max-time 2 --cacert "$tls/ca.pem" -o /dev/null "${address[$node]}/v1/sys/health"; then
                up=1
                break
            fi
            sleep 0.1
        done
        if [ -z "$up" ]; then
            echo "openbao-cluster.sh: error: node $node did not answer:" >&2
            cat "$dir/node$node/server.log" >&2
            return 1
        fi
    done

    (umask 077 && printf '{"secret_shares":1,"secret_threshold":1}' | api 1 PUT sys/init --data @- >"$dir/init.json")
    (umask 077 && python3 -c 'import json, sys; print(json.load(sys.stdin)["keys"][0])' <"$dir/init.json" >"$dir/unseal-key")
    (umask 077 && python3 -c 'import json, sys; print(json.load(sys.stdin)["root_token"])' <"$dir/init.json" >"$dir/root-token")
    rm -f "$dir/init.json"
    unseal() {
        python3 -c 'import json, sys; print(json.dumps({"key": open(sys.argv[1]).read().strip()}))' "$dir/unseal-key" |
            api "$1" PUT sys/unseal --data @- >/dev/null
    }
    unseal 1
    # The first node becomes the active one; the others join it, then are unsealed with its key.
    local active=
    for _ in $(seq 1 300); do
        if curl --silent --fail --max-time 2 --cacert "$tls/ca.pem" -o /dev/null "${address[1]}/v1/sys/health"; then
            active=1
            break
        fi
        sleep 0.1
    done
    [ -n "$active" ] || { echo "openbao-cluster.sh: error: node 1 did not become active" >&2; cat "$dir/node1/server.log" >&2; return 1; }
    # A node that joins is a non-voter until autopilot finds it stable (10 s by default); a
    # cluster of one voter elects no one when it is lost. A second is stable enough on loopback.
    printf '{"server_stabilization_time":"1s","cleanup_dead_servers":false}' |
        TOKEN_FILE=$dir/root-token api 1 POST sys/storage/raft/autopilot/configuration --data @- >/dev/null
    for node in 2 3; do
        local joined=
        for _ in $(seq 1 300); do
            # A node that has joined reports itself initialised; then it takes the key.
            if api "$node" GET sys/init 2>/dev/null | grep -q '"initialized":true'; then
                if unseal "$node" 2>/dev/null; then
                    joined=1
                    break
                fi
            fi
            sleep 0.2
        done
        [ -n "$joined" ] || { echo "openbao-cluster.sh: error: node $node did not join:" >&2; cat "$dir/node$node/server.log" >&2; return 1; }
    done
    # Every node unsealed and a standby of the active one (sys/health: 200 active, 429 standby).
    for node in 2 3; do
        local standby=
        for _ in $(seq 1 300); do
            local code
            code=$(curl --silent --max-time 2 --cacert "$tls/ca.pem" -o /dev/null -w '%{http_code}' "${address[$node]}/v1/sys/health" || true)
            if [ "$code" = 429 ] || [ "$code" = 200 ]; then
                standby=1
                break
            fi
            sleep 0.1
        done
        [ -n "$standby" ] || { echo "openbao-cluster.sh: error: node $node did not become a standby" >&2; cat "$dir/node$node/server.log" >&2; return 1; }
    done

    export TOKEN_FILE=$dir/root-token
    # Three voters, or a lost leader is never replaced.
    local voters=
    for _ in $(seq 1 300); do
        if api 1 GET sys/storage/raft/configuration 2>/dev/null |
            python3 -c 'import json, sys; servers = json.load(sys.stdin)["data"]["config"]["servers"]; sys.exit(0 if sum(1 for s in servers if s["voter"]) == 3 else 1)'; then
            voters=1
            break
        fi
        sleep 0.2
    done
    [ -n "$voters" ] || { echo "openbao-cluster.sh: error: the nodes did not all become voters" >&2; return 1; }
    printf '{"type":"kv","options":{"version":"2"}}' | api 1 POST sys/mounts/secret --data @- >/dev/null
    python3 -c 'import json, sys; print(json.dumps({"policy": open(sys.argv[1]).read()}))' \
        "$root/contrib/vault/portal-token-policy.hcl" | api 1 PUT sys/policies/acl/portal-token --data @- >/dev/null
    (umask 077 && printf '{"policies":["portal-token"],"ttl":"4h","no_parent":true}' |
        api 1 POST auth/token/create --data @- |
        python3 -c 'import json, sys; print(json.load(sys.stdin)["auth"]["client_token"])' >"$dir/host-token")
    # A new KV version 2 mount answers 400 for a moment while it upgrades: wait for a real write.
    local ready=
    for _ in $(seq 1 100); do
        if printf '{"data":{"ready":"1"}}' | TOKEN_FILE=$dir/host-token api 1 POST secret/data/portal-token/ready --data @- >/dev/null 2>&1; then
            ready=1
            break
        fi
        sleep 0.1
    done
    [ -n "$ready" ] || { echo "openbao-cluster.sh: error: KV version 2 at secret/ did not take a write" >&2; return 1; }
    unset TOKEN_FILE
    cat >"$dir/env" <<ENV
VAULT_ADDR_1=${address[1]}
VAULT_ADDR_2=${address[2]}
VAULT_ADDR_3=${address[3]}
VAULT_CACERT=$tls/ca.pem
VAULT_TOKEN_FILE=$dir/host-token
VAULT_ROOT_TOKEN_FILE=$dir/root-token
OPENBAO_BIN=$bao
OPENBAO_PID_1=$(cat "$dir/node1/pid")
OPENBAO_PID_2=$(cat "$dir/node2/pid")
OPENBAO_PID_3=$(cat "$dir/node3/pid")
ENV
}

stop_cluster() {
    local node pid
    for node in 1 2 3; do
        [ -f "$dir/node$node/pid" ] || continue
        pid=$(cat "$dir/node$node/pid")
        kill "$pid" 2>/dev/null || true
    done
    for node in 1 2 3; do
        [ -f "$dir/node$node/pid" ] || continue
        pid=$(cat "$dir/node$node/pid")
        for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
        kill -9 "$pid" 2>/dev/null || true
        rm -f "$dir/node$node/pid"
    done
}

case $command in
    start) start_cluster ;;
    stop) stop_cluster ;;
    *) echo "usage: openbao-cluster.sh start|stop DIR" >&2; exit 2 ;;
esac
