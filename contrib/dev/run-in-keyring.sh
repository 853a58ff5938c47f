#!/usr/bin/env bash
# Runs a command inside a throwaway D-Bus session with a real, unlocked gnome-keyring and a
# throwaway HOME, then stops the daemon by its PID and removes the HOME. Used by the benchmarks
# (contrib/bench/), the demo (contrib/dev/try.sh) and the link order (contrib/release/link-order/).
set -euo pipefail
work=$(mktemp -d "${TMPDIR:-/tmp}/portal-token-bench.XXXXXX")
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/home" "$work/run"
chmod 700 "$work/run"
env HOME="$work/home" XDG_RUNTIME_DIR="$work/run" XDG_DATA_HOME="$work/home/.local/share" \
    XDG_CONFIG_HOME="$work/home/.config" BENCH_WORK="$work" \
    dbus-run-session -- bash -c '
        printf "bench-password" | gnome-keyring-daemon --foreground --unlock --components=secrets >/dev/null 2>&1 &
        keyring=$!
        gdbus wait --session --timeout 15 org.freedesktop.secrets || { kill "$keyring"; exit 1; }
        status=0
        "$@" || status=$?
        kill "$keyring"; wait "$keyring" 2>/dev/null
        exit $status
    ' bash "$@" 2> >(grep -v "Failed to set fd limit" >&2)
