#!/usr/bin/env bash
# Removes what contrib/install.sh installed under PREFIX: every file in its list
# (PREFIX/share/portal-token/installed-files), then the folders that leaves empty, the
# credential.helper portal-token entry of the global git config, which would point at nothing,
# the desktop entry's URL-scheme association in mimeapps.list, and the agent's systemd units
# (stopped and disabled first).
# Stored credentials and sessions (in the keyring, or the encrypted file under
# ~/.local/share/portal-token) are kept: run 'portal-token logout' before uninstalling to drop
# the session.
#
# usage: contrib/uninstall.sh [--prefix DIR]      (default prefix: ~/.local)
set -euo pipefail
prefix=${PREFIX:-$HOME/.local}
usage="usage: contrib/uninstall.sh [--prefix DIR]"
while [ $# -gt 0 ]; do
    case "$1" in
        --prefix) prefix=${2:?--prefix needs a directory}; shift 2 ;;
        --prefix=*) prefix=${1#--prefix=}; shift ;;
        -h | --help) echo "$usage"; exit 0 ;;
        *) echo "$usage" >&2; exit 2 ;;
    esac
done
manifest="$prefix/share/portal-token/installed-files"
if [ ! -f "$manifest" ]; then
    echo "uninstall.sh: nothing to remove: $manifest does not exist" >&2
    echo "hint: give the --prefix that contrib/install.sh was run with" >&2
    exit 1
fi

if [ -x "$prefix/bin/portal-token" ] &&
    git config --global --get-all credential.helper 2>/dev/null | grep -qx portal-token; then
    "$prefix/bin/portal-token" setup-git --unset
fi

# The custom-scheme association install.sh made with xdg-mime, which has no command to undo it:
# its line in mimeapps.list goes, and the file too when only section headers are left.
mimeapps="${XDG_CONFIG_HOME:-$HOME/.config}/mimeapps.list"
if [ -f "$mimeapps" ] && grep -q 'io\.portalhq\.PortalToken\.desktop' "$mimeapps"; then
    sed -i -e '/^[^=]*=io\.portalhq\.PortalToken\.desktop;\{0,1\}$/d' -e 's/io\.portalhq\.PortalToken\.desktop;//g' "$mimeapps"
    grep -qv '^\(\[.*\]\)\{0,1\}[[:space:]]*$' "$mimeapps" || rm -f -- "$mimeapps"
fi

# The agent's units: stopped and disabled before their files go.
if command -v systemctl >/dev/null && systemctl --user show-environment >/dev/null 2>&1 &&
    grep -q 'portal-token-agent\.socket$' "$manifest"; then
    systemctl --user disable --now portal-token-agent.socket portal-token-agent.service 2>/dev/null || true
fi

removed=0
while IFS= read -r file; do
    case "$file" in /*) ;; *) continue ;; esac
    if [ -e "$file" ] || [ -L "$file" ]; then
        rm -f -- "$file"
        removed=$((removed + 1))
        # The folders the file leaves empty, up to (not including) the prefix and the XDG roots.
        directory=$(dirname "$file")
        while [ "$directory" != "/" ] && [ "$directory" != "$prefix" ] && [ "$directory" != "$HOME" ] &&
            rmdir -- "$directory" 2>/dev/null; do
            directory=$(dirname "$directory")
        done
    fi
done < "$manifest"
echo "== removed $removed files installed under $prefix and in your per-user shell and desktop folders"
echo "Stored credentials and Portal sessions were kept; 'portal-token logout' or 'secret-tool' removes them."
