#!/usr/bin/env bash
# Regenerates portal-token.order: the functions of the binary that the everyday paths run, in the
# callgrind lists them, recorded inside a throwaway keyring. Run it after changes
# to those paths; contrib/build-release.sh links with the result.
#   paths: git's `get` (a hit) from the keyring and from the encrypted file (key cached),
#   script-mode `get` with a session, `--version`.
set -euo pipefail
root=$(cd "$(dirname "$0")/../../.." && pwd)
cd "$root"
contrib/deps.sh test
command -v valgrind >/dev/null || { echo "generate.sh needs valgrind (apt-get install valgrind)" >&2; exit 1; }
export PORTAL_TOKEN_BIN=$(contrib/build-release.sh)
export ORDER_OUT="$root/contrib/release/link-order/portal-token.order"
contrib/dev/run-in-keyring.sh bash -c '
    set -euo pipefail
    cd "$BENCH_WORK"
    export PORTAL_AUTH_ENVIRONMENT_ID=order-environment PORTAL_API_HOST=127.0.0.1:9
    printf "protocol=https\nhost=order.example\nusername=u\npassword=p\n" | "$PORTAL_TOKEN_BIN" store
    printf "protocol=http\nhost=127.0.0.1:9\nusername=u\npassword=t\n" | "$PORTAL_TOKEN_BIN" store
    record() { valgrind --tool=callgrind --demangle=no --callgrind-out-file="$1" "${@:2}" >/dev/null 2>&1; }
    printf "protocol=https\nhost=order.example\n" > request
    record get.out "$PORTAL_TOKEN_BIN" get < request
    export PORTAL_TOKEN_FILE=$BENCH_WORK/store PORTAL_TOKEN_PASSPHRASE_FILE=$BENCH_WORK/passphrase
    (umask 077; printf "order passphrase\n" > "$PORTAL_TOKEN_PASSPHRASE_FILE")
    printf "protocol=https\nhost=order.example\nusername=u\npassword=p\n" | "$PORTAL_TOKEN_BIN" store --backend file
    "$PORTAL_TOKEN_BIN" get --backend file < request > /dev/null
    record file.out "$PORTAL_TOKEN_BIN" get --backend file < request
    record script.out "$PORTAL_TOKEN_BIN" get < /dev/null
    record version.out "$PORTAL_TOKEN_BIN" --version
    python3 - "$PORTAL_TOKEN_BIN" get.out file.out script.out version.out > "$ORDER_OUT" <<"PY"
import os, re, sys
binary, outputs = sys.argv[1], sys.argv[2:]
seen, order = set(), []
for path in outputs:
    objects, functions, current = {}, {}, None
    for line in open(path):
        line = line.rstrip("\n")
        match = re.match(r"^ob=\((\d+)\)(?: (.*))?$", line)
        if match:
            number, name = match.groups()
            if name: objects[number] = name
            current = objects[number]
            continue
        match = re.match(r"^cob=\((\d+)\) (.*)$", line)
        if match:
            objects[match.group(1)] = match.group(2)
            continue
        match = re.match(r"^cfn=\((\d+)\) (.*)$", line)
        if match:
            functions[match.group(1)] = match.group(2)
            continue
        match = re.match(r"^fn=\((\d+)\)(?: (.*))?$", line)
        if match:
            number, name = match.groups()
            if name: functions[number] = name
            name = functions.get(number)
            if current and os.path.realpath(current) == os.path.realpath(binary) and name and name not in seen:
                seen.add(name)
                order.append(name)
print("\n".join(order))
PY
'
echo "wrote $(wc -l < "$ORDER_OUT") functions to $ORDER_OUT"
