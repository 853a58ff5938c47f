#!/usr/bin/env bash
# Shows portal-token doing its everyday job: real git stores, finds and forgets a credential
# through it. Uses the desktop keyring when one answers on the session bus (the demo entry is
# removed at the end); otherwise a throwaway gnome-keyring in a private D-Bus session.
#
# usage: contrib/dev/try.sh [BINDIR]       (BINDIR holds portal-token; default ~/.local/bin)
set -euo pipefail
bindir=${1:-$HOME/.local/bin}
root=$(cd "$(dirname "$0")/../.." && pwd)
export PATH="$bindir:$PATH"

if [ "${PORTAL_TOKEN_TRY_INSIDE:-}" != 1 ]; then
    if ! gdbus call --session --dest org.freedesktop.DBus --object-path /org/freedesktop/DBus \
            --method org.freedesktop.DBus.NameHasOwner org.freedesktop.secrets 2>/dev/null | grep -q true; then
        echo "== no keyring on a session bus here: trying it in a throwaway gnome-keyring"
        "$root/contrib/deps.sh" keyring
        PORTAL_TOKEN_TRY_INSIDE=1 exec "$root/contrib/dev/run-in-keyring.sh" "$0" "$bindir"
    fi
fi

git_helper() { git -c credential.helper=portal-token credential "$@"; }
host=portal-token-demo.invalid
show() { printf '%s\n' "$1" | sed 's/^/    /'; }

echo "== git credential approve   (git stores a credential after a successful push)"
printf 'protocol=https\nhost=%s\nusername=demo-user\npassword=demo-password\n' "$host" | git_helper approve
echo "== git credential fill      (git asks for it on the next fetch)"
show "$(printf 'protocol=https\nhost=%s\n' "$host" | GIT_TERMINAL_PROMPT=0 git_helper fill)"
echo "== git credential reject    (git forgets it when the server refuses it)"
printf 'protocol=https\nhost=%s\nusername=demo-user\npassword=demo-password\n' "$host" | git_helper reject
if printf 'protocol=https\nhost=%s\n' "$host" | portal-token get | grep -q .; then
    echo "portal-token: error: the demo credential is still stored" >&2
    exit 1
fi
echo "== done: the credential was stored in the keyring, found, and erased"
