#!/usr/bin/env bash
# Installs portal-token: the Debian packages it needs, a release build with the Swift standard
# library linked in, and PREFIX/bin/portal-token with the git-credential-portal-token link that
# `git config credential.helper portal-token` finds. Then shows git using it (contrib/try.sh).
#
# With --scheme SCHEME (your redirect URL's scheme, myapp for myapp://auth/callback), it also
# installs the D-Bus-activatable desktop handler for that scheme and makes it the default.
#
# usage: contrib/install.sh [--prefix DIR] [--scheme SCHEME] [--no-try]      (default prefix: ~/.local)
set -euo pipefail
prefix=${PREFIX:-$HOME/.local}
try=1
scheme=""
while [ $# -gt 0 ]; do
    case "$1" in
        --prefix) prefix=${2:?--prefix needs a directory}; shift 2 ;;
        --prefix=*) prefix=${1#--prefix=}; shift ;;
        --scheme) scheme=${2:?--scheme needs a URL scheme}; shift 2 ;;
        --scheme=*) scheme=${1#--scheme=}; shift ;;
        --no-try) try=0; shift ;;
        *) echo "usage: contrib/install.sh [--prefix DIR] [--scheme SCHEME] [--no-try]" >&2; exit 2 ;;
    esac
done
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

contrib/deps.sh
echo "== building portal-token (release)"
bin=$(contrib/build-release.sh)

install -d "$prefix/bin"
install -m 0755 "$bin" "$prefix/bin/portal-token"
ln -sf portal-token "$prefix/bin/git-credential-portal-token"
echo "== installed $prefix/bin/portal-token and $prefix/bin/git-credential-portal-token"
"$prefix/bin/portal-token" --version
case ":$PATH:" in
    *":$prefix/bin:"*) ;;
    *) echo "hint: add $prefix/bin to PATH (e.g. in ~/.profile) so git finds the helper" ;;
esac
echo "To make git use it:  git config --global credential.helper portal-token"

# The desktop handler: a D-Bus-activatable entry (Desktop Entry specification), so the launcher
# hands the redirect URL over the session bus and it never sits in a command line.
data_home=${XDG_DATA_HOME:-$HOME/.local/share}
install -d "$data_home/dbus-1/services" "$data_home/applications"
sed "s|^Exec=portal-token |Exec=$prefix/bin/portal-token |" contrib/io.portalhq.PortalToken.service \
    > "$data_home/dbus-1/services/io.portalhq.PortalToken.service"
echo "== installed $data_home/dbus-1/services/io.portalhq.PortalToken.service"
if [ -n "$scheme" ]; then
    case "$scheme" in
        *[!A-Za-z0-9+.-]*|"") echo "--scheme takes a URL scheme such as myapp" >&2; exit 2 ;;
    esac
    sed -e "s/<scheme>/$scheme/" -e "s|^Exec=portal-token |Exec=$prefix/bin/portal-token |" \
        contrib/io.portalhq.PortalToken.desktop > "$data_home/applications/io.portalhq.PortalToken.desktop"
    echo "== installed $data_home/applications/io.portalhq.PortalToken.desktop"
    if command -v xdg-mime >/dev/null; then
        xdg-mime default io.portalhq.PortalToken.desktop "x-scheme-handler/$scheme"
    else
        echo "hint: run 'xdg-mime default io.portalhq.PortalToken.desktop x-scheme-handler/$scheme' in the desktop session"
    fi
fi

if [ "$try" = 1 ]; then contrib/try.sh "$prefix/bin"; fi
