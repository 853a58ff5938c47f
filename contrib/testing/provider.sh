#!/usr/bin/env bash
# Runs one Secret Service provider on a private D-Bus session bus of its own, under a throwaway
# HOME, for the test suite's provider matrix (docs/storage.md, "Providers"). Nothing is
# installed here: contrib/test.sh installs Debian's packages (contrib/deps.sh test) and fetches
# gnome-keyring 48 into .build (contrib/testing/gnome-keyring-48.sh).
#
#   provider.sh start PROVIDER DIR   start a bus and PROVIDER in DIR (created), unlocked, and write
#                                    DIR/env: the environment a client runs with (KEY=VALUE lines)
#   provider.sh lock DIR             lock the default collection, as a screen lock would
#   provider.sh unlock DIR           unlock it again as its user would (see each provider below)
#   provider.sh stop DIR             stop the provider and the bus by their PIDs, remove DIR
#   provider.sh run PROVIDER COMMAND [ARG...]
#                                    start PROVIDER in a temporary DIR, run COMMAND with DIR/env
#                                    exported, stop it, and exit with COMMAND's status, or 75 when
#                                    COMMAND failed and the provider had gone away (crashed)
#   provider.sh version PROVIDER     the provider's version, as its own program reports it
#
# PROVIDER is one of:
#   gnome-keyring-42   Debian 12's gnome-keyring-daemon, its login keyring unlocked with a password
#   gnome-keyring-48   Debian 13's (trixie), run from the private root gnome-keyring-48.sh unpacks
#   keepassxc          KeePassXC 2.7 with its Secret Service integration (FdoSecrets), headless
#                      (QT_QPA_PLATFORM=offscreen), on a database made by keepassxc-cli whose one
#                      group is exposed as the collection; unlocked by its password on stdin
#   kwallet            KWallet's kwalletd5 with its org.freedesktop.secrets API enabled; with
#                      PROVIDER_NO_COLLECTION=1 in the environment of `start`, with no wallet at
#                      all (no collection, no default alias)
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
usage="usage: contrib/testing/provider.sh start PROVIDER DIR | lock DIR | unlock DIR | stop DIR | run PROVIDER COMMAND... | version PROVIDER"
password="provider-test-password"

fail() { echo "provider.sh: error: $*" >&2; exit 1; }

gnome_keyring_daemon() {
    case "$1" in
        gnome-keyring-42) echo /usr/bin/gnome-keyring-daemon ;;
        gnome-keyring-48) "$root/contrib/testing/gnome-keyring-48.sh" "$root/.build/testing/gnome-keyring-48" ;;
    esac
}

version() {
    case "$1" in
        gnome-keyring-42|gnome-keyring-48)
            "$(gnome_keyring_daemon "$1")" --version | sed -n 's/^gnome-keyring-daemon: /gnome-keyring /p' ;;
        keepassxc) echo "KeePassXC $(keepassxc-cli --version)" ;;
        kwallet) echo "kwalletd5 $(dpkg-query -W -f='${Version}' libkf5wallet-bin)" ;;
        *) fail "unknown provider '$1' (gnome-keyring-42, gnome-keyring-48, keepassxc, kwallet)" ;;
    esac
}

# The environment every process of DIR runs with: its bus, HOME, XDG directories and TMPDIR (so
# that KeePassXC's single-instance socket and lock are DIR's own), no display, and the
# provider's name (PORTAL_TOKEN_TEST_PROVIDER), which the suite reads.
write_env() {
    local dir=$1
    cat > "$dir/env" <<EOF
DBUS_SESSION_BUS_ADDRESS=unix:path=$dir/bus
HOME=$dir/home
XDG_RUNTIME_DIR=$dir/run
XDG_DATA_HOME=$dir/home/.local/share
XDG_CONFIG_HOME=$dir/home/.config
XDG_CACHE_HOME=$dir/home/.cache
TMPDIR=$dir/tmp
PORTAL_TOKEN_TEST_PROVIDER=$(cat "$dir/provider")
EOF
}

# Runs a command with DIR's environment, without a display.
in_env() {
    local dir=$1
    shift
    env -u DISPLAY -u WAYLAND_DISPLAY $(cat "$dir/env") QT_QPA_PLATFORM=offscreen "$@"
}

# The same, replacing the shell: for a daemon started in the background, whose PID `$!` then is.
exec_in_env() {
    local dir=$1
    shift
    exec env -u DISPLAY -u WAYLAND_DISPLAY $(cat "$dir/env") QT_QPA_PLATFORM=offscreen "$@"
}

wait_for_provider() {
    local dir=$1 log=$2
    if ! in_env "$dir" timeout 20 gdbus wait --session --timeout 15 org.freedesktop.secrets; then
        echo "provider.sh: error: $(cat "$dir/provider") did not appear on the bus:" >&2
        cat "$log" >&2
        return 1
    fi
}

launch_daemon() {
    local dir=$1 provider daemon
    provider=$(cat "$dir/provider")
    case "$provider" in
        gnome-keyring-42|gnome-keyring-48)
            # --unlock reads the login keyring's password from stdin until EOF; --foreground keeps
            # the daemon this script's child, so it is stopped by its PID.
            printf '%s' "$password" > "$dir/password"
            daemon=$(gnome_keyring_daemon "$provider")
            (exec_in_env "$dir" "$daemon" --foreground --unlock --components=secrets \
                <"$dir/password" >>"$dir/daemon.log" 2>&1) &
            echo $! > "$dir/daemon.pid"; disown ;;
        keepassxc)
            printf '%s\n' "$password" > "$dir/password"
            (exec_in_env "$dir" keepassxc --pw-stdin "$dir/home/Passwords.kdbx" \
                <"$dir/password" >>"$dir/daemon.log" 2>&1) &
            echo $! > "$dir/daemon.pid"; disown ;;
        kwallet)
            # As pam_kwallet5 does at login: the wallet's 56-byte key on a pipe and an empty
            # environment over a socket (kwalletd5 --pam-login PIPE SOCKET), which opens the
            # wallet, creating it the first time, with no dialog. The key is derived from the
            # password as pam_kwallet5 derives it (PBKDF2-SHA512, 50000 rounds).
            env -u DISPLAY -u WAYLAND_DISPLAY $(cat "$dir/env") QT_QPA_PLATFORM=offscreen PAM_KWALLET5_LOGIN=1 \
                python3 -c '
import hashlib, os, socket, sys
directory, password = sys.argv[1], sys.argv[2].encode()
key = hashlib.pbkdf2_hmac("sha512", password, b"portal-token-test-salt", 50000, 56)
hash_read, hash_write = os.pipe()
listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
listener.bind(directory + "/kwallet-pam.socket")
listener.listen(1)
log = os.open(directory + "/daemon.log", os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
pid = os.fork()
if pid == 0:
    os.dup2(log, 1)
    os.dup2(log, 2)
    null = os.open("/dev/null", os.O_RDONLY)
    os.dup2(null, 0)
    os.set_inheritable(hash_read, True)
    os.set_inheritable(listener.fileno(), True)
    os.execvp("kwalletd5", ["kwalletd5", "--pam-login", str(hash_read), str(listener.fileno())])
with open(directory + "/daemon.pid", "w") as f:
    f.write(str(pid))
os.write(hash_write, key)
os.close(hash_write)
client = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
client.connect(directory + "/kwallet-pam.socket")
client.close()
' "$dir" "$password"
            rm -f "$dir/kwallet-pam.socket" ;;
    esac
    wait_for_provider "$dir" "$dir/daemon.log"
}

start_daemon() {
    local dir=$1 provider
    provider=$(cat "$dir/provider")
    launch_daemon "$dir"
    if [ "$provider" = kwallet ]; then
        # kwalletd5 shows the wallet PAM opened as a locked collection until a client runs the
        # prompt Unlock returns, which then completes with no dialog, as a desktop session's
        # first Secret Service client does.
        run_unlock_prompt "$dir"
    fi
    # KeePassXC owns the name before it has opened the database: a client that came now would
    # meet a locked collection. Ready is a default collection that is unlocked.
    for _ in $(seq 100); do
        is_locked "$dir" || return 0
        sleep 0.1
    done
    echo "provider.sh: error: $provider has no unlocked default collection:" >&2
    cat "$dir/daemon.log" >&2
    return 1
}

# Calls the Secret Service's METHOD (Lock or Unlock) on COLLECTION and runs the prompt it
# answers with, if any.
call_and_prompt() {
    local dir=$1 method=$2 collection=$3 reply prompt
    reply=$(in_env "$dir" timeout 10 gdbus call --session --dest org.freedesktop.secrets \
        --object-path /org/freedesktop/secrets --method "org.freedesktop.Secret.Service.$method" "['$collection']")
    prompt=$(grep -o "/org/freedesktop/secrets/prompt/[^']*" <<<"$reply" || true)
    if [ -n "$prompt" ]; then
        in_env "$dir" timeout 10 gdbus call --session --dest org.freedesktop.secrets \
            --object-path "$prompt" --method org.freedesktop.Secret.Prompt.Prompt "" >/dev/null
    fi
}

# Calls Unlock on the default collection and runs the prompt it returns, if any.
run_unlock_prompt() {
    call_and_prompt "$1" Unlock "$(default_collection "$1")"
}

# Whether the default collection is missing or locked.
is_locked() {
    local dir=$1 collection
    collection=$(default_collection "$dir" 2>/dev/null) || return 0
    [ -n "$collection" ] && [ "$collection" != / ] || return 0
    ! in_env "$dir" timeout 10 gdbus call --session --dest org.freedesktop.secrets --object-path "$collection" \
        --method org.freedesktop.DBus.Properties.Get org.freedesktop.Secret.Collection Locked 2>/dev/null \
        | grep -q false
}

stop_daemon() {
    local dir=$1 pid
    [ -f "$dir/daemon.pid" ] || return 0
    pid=$(cat "$dir/daemon.pid")
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$pid" 2>/dev/null || true
    rm -f "$dir/daemon.pid"
}

# A KeePassXC database whose root group is exposed over the Secret Service
# (FDO_SECRETS_EXPOSED_GROUP names it), made by keepassxc-cli from KeePass XML.
make_keepassxc_database() {
    local dir=$1
    cat > "$dir/tmp/Passwords.xml" <<'EOF'
<?xml version="1.0" encoding="utf-8" standalone="yes"?>
<KeePassFile>
  <Meta>
    <DatabaseName>Passwords</DatabaseName>
    <CustomData>
      <Item><Key>FDO_SECRETS_EXPOSED_GROUP</Key><Value>{6f8b3e2a-1c4d-4e5f-9a0b-7c8d9e0f1a2b}</Value></Item>
    </CustomData>
  </Meta>
  <Root>
    <Group><UUID>b4s+KhxNTl+aC3yNng8aKw==</UUID><Name>Passwords</Name></Group>
  </Root>
</KeePassFile>
EOF
    printf '%s\n%s\n' "$password" "$password" \
        | in_env "$dir" keepassxc-cli import --set-password --decryption-time 100 \
            "$dir/tmp/Passwords.xml" "$dir/home/Passwords.kdbx" >"$dir/keepassxc-cli.log" 2>&1 \
        || { cat "$dir/keepassxc-cli.log" >&2; fail "keepassxc-cli could not create the database"; }
    mkdir -p "$dir/home/.config/keepassxc"
    # No notifications, no confirmation dialogs (nobody is there to answer them); the search
    # unlocks first, as KeePassXC does by default. The database is saved when KeePassXC locks it
    # or quits, not after every change: KeePassXC 2.7.4 saves in a worker thread while it goes on
    # answering D-Bus calls, and a change that lands during a save has crashed it (a segfault in
    # libQt5Core's thread pool) when the machine is busy.
    cat > "$dir/home/.config/keepassxc/keepassxc.ini" <<'EOF'
[General]
ConfigVersion=2
UpdateCheckMessageShown=true
AutoSaveAfterEveryChange=false
AutoSaveOnExit=true

[GUI]
CheckForUpdates=false
ShowTrayIcon=false

[FdoSecrets]
Enabled=true
ShowNotification=false
ConfirmDeleteItem=false
ConfirmAccessItem=false
UnlockBeforeSearch=true
EOF
}

# kwalletd5's configuration: the wallet system on, one wallet, and its Secret Service API on.
make_kwallet() {
    local dir=$1
    cat > "$dir/home/.config/kwalletrc" <<'EOF'
[Wallet]
Enabled=true
First Use=false
Use One Wallet=true
Default Wallet=kdewallet
Close When Idle=false
Prompt on Open=false

[org.freedesktop.secrets]
apiEnabled=true
EOF
}

start() {
    local provider=$1 dir=$2
    version "$provider" >/dev/null
    mkdir -p "$dir"
    dir=$(cd "$dir" && pwd)
    mkdir -p "$dir/home/.local/share" "$dir/home/.config" "$dir/home/.cache" "$dir/run" "$dir/tmp"
    chmod 700 "$dir/run" "$dir/home"
    echo "$provider" > "$dir/provider"
    write_env "$dir"
    # A bus without service activation: the provider is the one started here, nothing else.
    cat > "$dir/bus.conf" <<EOF
<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <type>session</type>
  <listen>unix:path=$dir/bus</listen>
  <auth>EXTERNAL</auth>
  <policy context="default">
    <allow send_destination="*" eavesdrop="true"/>
    <allow eavesdrop="true"/>
    <allow own="*"/>
  </policy>
</busconfig>
EOF
    dbus-daemon --config-file="$dir/bus.conf" --fork --print-pid > "$dir/bus.pid"
    case "$provider" in
        keepassxc) make_keepassxc_database "$dir" ;;
        kwallet) make_kwallet "$dir" ;;
    esac
    if [ "$provider" = kwallet ] && [ -n "${PROVIDER_NO_COLLECTION:-}" ]; then
        # kwalletd5 with no wallet at all: no collection, and no default alias.
        (exec_in_env "$dir" kwalletd5 </dev/null >>"$dir/daemon.log" 2>&1) &
        echo $! > "$dir/daemon.pid"; disown
        wait_for_provider "$dir" "$dir/daemon.log"
        return
    fi
    if [ "$provider" = kwallet ]; then
        # kwalletd5 lists its wallets as collections when it starts: the first start creates
        # the wallet, the second shows it (and makes it the default alias).
        launch_daemon "$dir"
        for _ in $(seq 100); do
            [ -s "$dir/home/.local/share/kwalletd/kdewallet.kwl" ] && break
            sleep 0.1
        done
        stop_daemon "$dir"
    fi
    start_daemon "$dir"
}

# The default collection's object path.
default_collection() {
    in_env "$1" timeout 10 gdbus call --session --dest org.freedesktop.secrets \
        --object-path /org/freedesktop/secrets --method org.freedesktop.Secret.Service.ReadAlias default \
        | grep -o "'/[^']*'" | tr -d "'"
}

lock() {
    local dir=$1 collection
    collection=$(default_collection "$dir")
    [ -n "$collection" ] && [ "$collection" != / ] || fail "the provider has no default collection to lock"
    # KeePassXC answers Lock with a prompt, which locks once it is run.
    call_and_prompt "$dir" Lock "$collection"
    for _ in $(seq 50); do
        is_locked "$dir" && return 0
        sleep 0.1
    done
    fail "$(cat "$dir/provider")'s default collection did not lock"
}

# Unlocking needs the password, which each provider asks for in a dialog of its own that nobody
# can answer here; so the provider is started again with its password, as a user logging in
# again would. Items survive: each keeps them in its file under HOME.
unlock() {
    local dir=$1
    stop_daemon "$dir"
    start_daemon "$dir"
}

stop() {
    local dir=$1
    [ -d "$dir" ] || return 0
    stop_daemon "$dir"
    if [ -f "$dir/bus.pid" ]; then
        kill "$(cat "$dir/bus.pid")" 2>/dev/null || true
    fi
    rm -rf "$dir"
}

case "${1:-}" in
    start)
        # A start that fails leaves nothing running.
        start_dir=${3:?$usage}
        trap 'stop "$start_dir"' EXIT
        start "${2:?$usage}" "$start_dir"
        trap - EXIT ;;
    lock) lock "${2:?$usage}" ;;
    unlock) unlock "${2:?$usage}" ;;
    stop) stop "${2:?$usage}" ;;
    version) version "${2:?$usage}" ;;
    run)
        provider=${2:?$usage}
        shift 2
        [ $# -gt 0 ] || fail "$usage"
        dir=$(mktemp -d "${TMPDIR:-/tmp}/portal-token-provider.XXXXXX")
        trap 'stop "$dir"' EXIT
        start "$provider" "$dir"
        status=0
        env -u DISPLAY -u WAYLAND_DISPLAY $(cat "$dir/env") "$@" || status=$?
        if [ $status -ne 0 ]; then
            echo "provider.sh: the end of $provider's log:" >&2
            tail -n 30 "$dir/daemon.log" >&2
            # Whether the provider itself went away (a crash) matters more than anything else:
            # that is exit 75 (EX_TEMPFAIL), whatever COMMAND said.
            if ! kill -0 "$(cat "$dir/daemon.pid" 2>/dev/null || echo 0)" 2>/dev/null; then
                echo "provider.sh: $provider is no longer running (it exited or crashed during the run)" >&2
                status=75
            fi
        fi
        exit $status ;;
    *) fail "$usage" ;;
esac
