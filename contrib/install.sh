#!/usr/bin/env bash
# Installs portal-token: the Debian packages it needs, a release build with the Swift standard
# library linked in, and PREFIX/bin/portal-token with the git-credential-portal-token link that
# `git config credential.helper portal-token` finds. Then shows git using it (contrib/try.sh).
#
# usage: contrib/install.sh [--prefix DIR] [--no-try]      (default prefix: ~/.local)
set -euo pipefail
prefix=${PREFIX:-$HOME/.local}
try=1
while [ $# -gt 0 ]; do
    case "$1" in
        --prefix) prefix=${2:?--prefix needs a directory}; shift 2 ;;
        --prefix=*) prefix=${1#--prefix=}; shift ;;
        --no-try) try=0; shift ;;
        *) echo "usage: contrib/install.sh [--prefix DIR] [--no-try]" >&2; exit 2 ;;
    esac
done
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

contrib/deps.sh
echo "== building portal-token (release)"
swift build -c release --static-swift-stdlib 2>&1 | sed '/prohibited flag/d'
bin=$(swift build -c release --static-swift-stdlib --show-bin-path)/portal-token

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

if [ "$try" = 1 ]; then contrib/try.sh "$prefix/bin"; fi
