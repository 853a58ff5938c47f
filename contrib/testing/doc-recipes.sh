#!/usr/bin/env bash
# Runs the shell recipes of the README and docs/ as written (docs/development.md, "Recipes").
#
# usage: contrib/testing/doc-recipes.sh PORTAL_TOKEN FAKE_SERVER [FILE.md]...
#        contrib/testing/doc-recipes.sh --self-test PORTAL_TOKEN FAKE_SERVER
#   PORTAL_TOKEN  the portal-token binary to run the recipes with
#   FAKE_SERVER   the portal-fake-server binary (Tests/portal-fake-server)
#   FILE.md       the Markdown files to read (default: README.md and docs/*.md)
#
# Every fenced block whose info string is sh, bash, shell, console or zsh is a recipe. The line
# right before its opening fence may mark it, in one of two ways:
#   <!-- recipe: not run: REASON -->   not run, for the reason given (a browser, a desktop, a
#                                      real Portal account, a transcript, a fragment...)
#   <!-- recipe: no session bus -->    run without a session bus, keyring or sign-in (below)
#   <!-- recipe: signed out -->        run with the bus and keyring but no sign-in before it: a
#                                      newcomer's first steps, which sign in themselves
# Any other `<!-- recipe:` line, a mark with no reason, or a mark on a block that is not a shell
# block is an error. Every other shell block is run, and must pass; the run fails, naming
# FILE:LINE, for each block that does not, and when it finds no shell block at all.
#
# Each block runs on its own, as written, with `bash -euo pipefail`, stdin from /dev/null and a
# bound of 30 seconds; it fails when it exits non-zero, and when bash reports an error of its own
# (a failed redirection, a command not found) that -e let pass, as in `a && b`. It runs in an
# environment of its own made of:
#   - a fresh HOME (mktemp -d) and a private XDG_RUNTIME_DIR, no XDG_CONFIG_HOME or
#     XDG_DATA_HOME, and nothing else of the caller's environment but PATH, LANG and LC_ALL;
#   - PATH starting with a directory holding PORTAL_TOKEN as `portal-token`, the
#     `git-credential-portal-token` and `docker-credential-portal-token` links to it (as
#     contrib/install.sh makes them), and a stand-in `xdg-open` that follows the page it is
#     given with curl, as a browser would (DISPLAY is set to :recipes, so login opens it);
#   - the fake Portal on loopback (--lenient: a recipe's own curl sends no Portal headers),
#     started for the block with --auth-env your-environment-id
#     (the placeholder the docs use) and TOKEN (the placeholder of docs/sessions.md) as a live
#     token, and PORTAL_API_HOST set to its address; each magic link it "sends" is followed
#     with curl, as the user opening it would;
#   - a working directory holding stand-ins for the scripts recipes name (./deploy.sh,
#     ./call-api.sh, job.py, ./job.sh), each of which fails unless it got the token (or the
#     proxy) portal-token's exec gives it;
#   - unless marked `no session bus`: a private session bus (dbus-run-session) with an unlocked
#     gnome-keyring, and a session signed in before the block with
#     `portal-token --env your-environment-id --end-user end-user-1 login --with-token` from a
#     token the fake Portal takes (remembered, so the block needs no Portal variable to use it;
#     end-user-1 is the end user the fake's sign-ins give, so a recipe's own sign-in replaces it).
# Everything started for a block (the bus, the keyring, the fake Portal, its follower) is
# stopped after it, and the temporary directories are removed on exit.
#
# --self-test runs the recipes of contrib/testing/doc-recipes-fixture.md and checks that exactly
# the blocks (and the misplaced mark) it says fail are reported, and that a file with no shell
# block fails the run.
set -euo pipefail
usage="usage: contrib/testing/doc-recipes.sh [--self-test] PORTAL_TOKEN FAKE_SERVER [FILE.md]..."
root=$(cd "$(dirname "$0")/../.." && pwd)
self_test=0
if [ "${1:-}" = --self-test ]; then self_test=1; shift; fi
[ $# -ge 2 ] || { echo "$usage" >&2; exit 2; }
portal_token=$(realpath "$1")
fake_server=$(realpath "$2")
shift 2
[ -x "$portal_token" ] || { echo "doc-recipes.sh: $portal_token is not executable" >&2; exit 2; }
[ -x "$fake_server" ] || { echo "doc-recipes.sh: $fake_server is not executable" >&2; exit 2; }

if [ $self_test = 1 ]; then
    fixture=contrib/testing/doc-recipes-fixture.md
    cd "$root"
    status=0
    output=$("$0" "$portal_token" "$fake_server" "$fixture" 2>&1) || status=$?
    reported=$(sed -n "s|^doc-recipes: FAIL: \($fixture:[0-9]*\):.*|\1|p" <<<"$output" | sort)
    # The fixture says which blocks must fail with a `<!-- self-test: fails -->` line before the
    # block (above its recipe mark, if it has one): their opening fences are the lines expected;
    # `<!-- self-test: fails: the next line -->` expects the line after it.
    expected=$(awk -v fixture="$fixture" '
        /^<!-- self-test: fails: the next line -->$/ { print fixture ":" NR + 1; next }
        /^<!-- self-test: fails -->$/ { armed = 1; next }
        armed && /^ *```/ { print fixture ":" NR; armed = 0 }
    ' "$fixture" | sort)
    problems=()
    [ $status = 1 ] || problems+=("it exited $status, not 1")
    [ -n "$expected" ] || problems+=("the fixture names no failing block")
    [ "$reported" = "$expected" ] || problems+=("it reported [$(echo $reported)], not [$(echo $expected)]")
    grep -q '^doc-recipes: .* [1-9][0-9]* run, [1-9][0-9]* marked' <<<"$output" || problems+=("it ran or marked no block")
    empty=$(mktemp "${TMPDIR:-/tmp}/doc-recipes-empty.XXXXXX.md")
    printf '# No recipe here\n\n```ini\nkey = value\n```\n' > "$empty"
    if "$0" "$portal_token" "$fake_server" "$empty" >/dev/null 2>&1; then
        problems+=("a file with no shell block passed")
    fi
    rm -f "$empty"
    if [ ${#problems[@]} -gt 0 ]; then
        printf '%s\n' "$output" >&2
        printf 'doc-recipes.sh: self-test failed: %s\n' "${problems[@]}" >&2
        exit 1
    fi
    echo "doc-recipes: self-test passed (it reported exactly the $(echo $expected | wc -w) failures the fixture expects)"
    exit 0
fi

cd "$root"
if [ $# -eq 0 ]; then set -- README.md docs/*.md; fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/doc-recipes.XXXXXX")
fake_pid=""
follower_pid=""
stop_fake() {
    if [ -n "$fake_pid" ]; then kill "$fake_pid" 2>/dev/null || true; wait "$fake_pid" 2>/dev/null || true; fi
    if [ -n "$follower_pid" ]; then
        # It leaves within a second of the fake server (tail --pid); it is killed past three.
        for _ in $(seq 30); do kill -0 "$follower_pid" 2>/dev/null || break; sleep 0.1; done
        kill "$follower_pid" 2>/dev/null || true
        wait "$follower_pid" 2>/dev/null || true
    fi
    fake_pid=""
    follower_pid=""
}
cleanup() { stop_fake; rm -rf "$tmp"; }
trap cleanup EXIT
trap 'exit 130' INT TERM

# --- the programs on the recipes' PATH
bin=$tmp/bin
mkdir -p "$bin"
ln -s "$portal_token" "$bin/portal-token"
ln -s portal-token "$bin/git-credential-portal-token"
ln -s portal-token "$bin/docker-credential-portal-token"
cat > "$bin/xdg-open" <<'EOF'
#!/bin/sh
# The recipes' browser: follows the page's redirects back to login's listener, then leaves.
curl -sSL --max-time 20 -o /dev/null "$1" >/dev/null 2>&1 &
exit 0
EOF
chmod 755 "$bin/xdg-open"

# --- the stand-ins for the scripts recipes name, copied into each block's working directory
stand_ins=$tmp/stand-ins
mkdir -p "$stand_ins"
cat > "$stand_ins/deploy.sh" <<'EOF'
#!/bin/sh
# A stand-in: fails unless portal-token exec gave it the token.
test -n "${PORTAL_CLIENT_SESSION_TOKEN:-}"
EOF
cat > "$stand_ins/call-api.sh" <<'EOF'
#!/bin/sh
# A stand-in: fails unless portal-token exec --token-var API_TOKEN gave it the token.
test -n "${API_TOKEN:-}"
EOF
cat > "$stand_ins/job.py" <<'EOF'
# A stand-in: fails unless portal-token exec gave it the token.
import os, sys
sys.exit(0 if os.environ.get("PORTAL_CLIENT_SESSION_TOKEN") else 1)
EOF
cat > "$stand_ins/job.sh" <<'EOF'
#!/bin/sh
# A stand-in: fails unless portal-token exec --proxy gave it a proxy that answers (docs/proxy.md).
curl -sf --max-time 10 -o /dev/null \
    -H "$PORTAL_TOKEN_PROXY_HEADER: $PORTAL_TOKEN_PROXY_CREDENTIAL" "$PORTAL_TOKEN_PROXY_URL/api/v3/clients/me"
EOF
chmod 755 "$stand_ins"/*.sh

# --- the blocks: one file each, and a table of FILE, LINE, INFO and MARK
blocks=$tmp/blocks
mkdir -p "$blocks"
: > "$blocks/table"
for file in "$@"; do
    [ -f "$file" ] || { echo "doc-recipes.sh: no file $file" >&2; exit 2; }
    awk -v file="$file" -v dir="$blocks" '
        function trim(s) { sub(/^[ \t]+/, "", s); sub(/[ \t]+$/, "", s); return s }
        !inside && /^ *```/ {
            indent = match($0, /```/) - 1
            info = substr($0, indent + 4); sub(/^`+/, "", info); info = trim(info); sub(/[ \t{].*/, "", info)
            inside = 1; start = NR; n++
            name = file; gsub(/[^A-Za-z0-9]/, "_", name); out = dir "/" name "." start
            mark = trim(previous)
            if (mark !~ /^<!-- recipe:/) mark = ""
            printf "" > out
            previous = $0; next
        }
        inside && /^ *```[ \t]*$/ {
            inside = 0; close(out)
            printf "%s\037%d\037%s\037%s\037%s\n", file, start, info, mark, out >> (dir "/table")
            previous = $0; next
        }
        inside { line = $0; if (substr(line, 1, indent) ~ /^ *$/) line = substr(line, indent + 1); print line > out }
        !inside && /^ *<!-- recipe:/ { pending[NR] = 1 }
        !inside && NR - 1 in pending && !/^ *```/ {
            printf "doc-recipes: FAIL: %s:%d: a recipe mark must be on the line right before an opening fence\n", file, NR - 1
            bad = 1
        }
        { previous = $0 }
        END {
            if (NR in pending) { printf "doc-recipes: FAIL: %s:%d: a recipe mark must be on the line right before an opening fence\n", file, NR; bad = 1 }
            if (inside) { printf "doc-recipes: FAIL: %s:%d: the block is never closed\n", file, start; bad = 1 }
            exit bad
        }
    ' "$file" || misplaced=1
done

# --- one block, in its own environment (see the header)
token="recipe-token-$RANDOM$RANDOM$RANDOM"
api_host=""
# Starts the fake Portal for a block, in this shell (so that cleanup knows it), and sets api_host.
start_fake() {
    local work=$1
    (umask 077 && printf '%s\nTOKEN\n' "$token" > "$work/live-tokens")
    "$fake_server" --lenient --auth-env your-environment-id --live-file "$work/live-tokens" \
        > "$work/fake.out" 2> "$work/fake.log" &
    fake_pid=$!
    for _ in $(seq 100); do [ -s "$work/fake.out" ] && break; sleep 0.05; done
    [ -s "$work/fake.out" ] || { echo "the fake Portal did not start:"; cat "$work/fake.log"; return 1; }
    api_host=$(sed -E 's|^http://||; s|/+$||' "$work/fake.out" | head -n 1)
    # The user opening each magic link the fake Portal "sends".
    tail --pid="$fake_pid" -n +2 -f "$work/fake.out" 2>/dev/null | while read -r line; do
        case "$line" in
            "magic link: "*) curl -sSL --max-time 20 -o /dev/null "${line#magic link: }" >/dev/null 2>&1 || true ;;
        esac
    done > /dev/null 2>&1 &
    follower_pid=$!
}

# Runs in the block's environment, inside dbus-run-session unless the block has no bus.
cat > "$tmp/inside.sh" <<'EOF'
set -u
recipe=$1 bus=$2 token=$3
keyring=""
if [ "$bus" != 0 ]; then
    # --foreground keeps the daemon our child, so it is stopped by its PID below.
    printf 'recipe-password' | gnome-keyring-daemon --foreground --unlock --components=secrets \
        > "$HOME/../keyring.log" 2>&1 &
    keyring=$!
    if ! gdbus wait --session --timeout 15 org.freedesktop.secrets; then
        echo "gnome-keyring did not start:"; cat "$HOME/../keyring.log"; kill "$keyring"; exit 1
    fi
fi
if [ "$bus" = 1 ]; then
    # As the end user the fake Portal's sign-ins give (end-user-1): a recipe that signs in again
    # replaces that account's session, as it would for a user who signs in once more.
    if ! printf '%s\n' "$token" | portal-token --env your-environment-id --end-user end-user-1 login --with-token \
        2> "$HOME/../prelude.log"; then
        echo "the sign-in before the block failed:"; cat "$HOME/../prelude.log"; kill "$keyring"; exit 1
    fi
fi
status=0
timeout 30 bash -euo pipefail "$recipe" < /dev/null || status=$?
[ $status = 124 ] && echo "(the block took more than 30 seconds)"
if [ -n "$keyring" ]; then kill "$keyring"; wait "$keyring" 2>/dev/null; fi
exit $status
EOF

run_block() {
    local recipe=$1 bus=$2 work
    work=$(mktemp -d "$tmp/block.XXXXXX")
    mkdir -p "$work/home" "$work/run" "$work/cwd"
    chmod 700 "$work/home" "$work/run"
    cp -p "$stand_ins"/* "$work/cwd/"
    cp "$recipe" "$work/recipe.sh"
    start_fake "$work" || { stop_fake; rm -rf "$work"; return 1; }
    local -a environment=(
        HOME="$work/home" XDG_RUNTIME_DIR="$work/run" PATH="$bin:$PATH" DISPLAY=:recipes
        PORTAL_API_HOST="$api_host" USER="$(id -un)" LOGNAME="$(id -un)" TMPDIR="$work"
    )
    [ -n "${LANG:-}" ] && environment+=(LANG="$LANG")
    [ -n "${LC_ALL:-}" ] && environment+=(LC_ALL="$LC_ALL")
    local status=0
    if [ "$bus" != 0 ]; then
        (cd "$work/cwd" && env -i "${environment[@]}" timeout 60 dbus-run-session -- \
            bash "$tmp/inside.sh" "$work/recipe.sh" "$bus" "$token") > "$work/output" 2>&1 || status=$?
    else
        (cd "$work/cwd" && env -i "${environment[@]}" timeout 60 \
            bash "$tmp/inside.sh" "$work/recipe.sh" 0 "$token") > "$work/output" 2>&1 || status=$?
    fi
    stop_fake
    # bash's own diagnostics (a failed redirection, a command not found) fail the block even
    # where -e lets the shell go on, as in `a && b` when a fails.
    if [ $status = 0 ] && grep -q "^$work/recipe.sh: line [0-9]*: " "$work/output"; then
        echo "bash reported an error in it, which -e did not stop at:"
        grep "^$work/recipe.sh: line [0-9]*: " "$work/output" | sed "s|^$work/recipe.sh: |    |"
        status=1
    fi
    if [ $status != 0 ]; then
        echo "exit $status; its output:"
        sed 's/^/    /' "$work/output" | grep -v 'Failed to set fd limit' | tail -n 40
        # Past the two lines it starts with, which say how it was started.
        if [ "$(wc -l < "$work/fake.log")" -gt 2 ]; then
            echo "the fake Portal's log:"; tail -n +3 "$work/fake.log" | tail -n 10 | sed 's/^/    /'
        fi
    fi
    rm -rf "$work"
    return $status
}

failures=${misplaced:-0}
declare -A ran marked
total=0
# The table's fields are split at the unit separator, which, unlike a tab, keeps empty fields.
while IFS=$'\037' read -r file line info mark recipe; do
    case "$info" in sh | bash | shell | console | zsh) ;; *)
        if [ -n "$mark" ]; then
            echo "doc-recipes: FAIL: $file:$line: a recipe mark on a block that is not shell ($info)"
            failures=1
        fi
        continue ;;
    esac
    total=$((total + 1))
    ran[$file]=${ran[$file]:-0}
    marked[$file]=${marked[$file]:-0}
    bus=1
    case "$mark" in
        "") ;;
        "<!-- recipe: no session bus -->") bus=0 ;;
        "<!-- recipe: signed out -->") bus=2 ;;
        "<!-- recipe: not run: "*" -->")
            reason=${mark#<!-- recipe: not run: }
            reason=${reason% -->}
            if [ -z "${reason// /}" ]; then
                echo "doc-recipes: FAIL: $file:$line: a block marked not run gives no reason"
                failures=1
            else
                echo "doc-recipes: not run: $file:$line: $reason"
                marked[$file]=$((${marked[$file]} + 1))
            fi
            continue ;;
        *)
            echo "doc-recipes: FAIL: $file:$line: an unknown recipe mark: $mark"
            failures=1
            continue ;;
    esac
    # Not in a command substitution: the fake Portal it starts stays this shell's child.
    if run_block "$recipe" "$bus" < /dev/null > "$tmp/report" 2>&1; then
        echo "doc-recipes: ok: $file:$line"
        ran[$file]=$((${ran[$file]} + 1))
    else
        echo "doc-recipes: FAIL: $file:$line: the block failed, as written, with bash -euo pipefail in a fresh HOME"
        sed 's/^/  /' "$tmp/report"
        failures=1
    fi
done < "$blocks/table"

run_total=0 marked_total=0
for file in "$@"; do
    [ -n "${ran[$file]:-}" ] || continue
    echo "doc-recipes: $file: ${ran[$file]} run, ${marked[$file]} marked"
    run_total=$((run_total + ${ran[$file]}))
    marked_total=$((marked_total + ${marked[$file]}))
done
if [ $total = 0 ]; then
    echo "doc-recipes: FAIL: no shell block found in $*: nothing was checked"
    exit 1
fi
echo "doc-recipes: $total shell blocks: $run_total run, $marked_total marked"
exit $failures
