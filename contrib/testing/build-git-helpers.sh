#!/usr/bin/env bash
# Builds git's C libsecret credential helper from Debian's git source into DIR:
#   DIR/git-credential-libsecret          git 2.39 as shipped (schema org.gnome.keyring.NetworkPassword)
#   DIR/git-credential-libsecret-current  the same source behaving as git 2.43+ does (contrib/testing/interop:
#                                         schema, extra attributes in the secret, erase of a matching password)
# It is the interoperation peer of the tests and the baseline of the benchmarks.
set -euo pipefail
out=${1:?usage: build-git-helpers.sh DIR}
src=/usr/share/doc/git/contrib/credential/libsecret/git-credential-libsecret.c
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$out"
flags=$(pkg-config --cflags --libs libsecret-1 glib-2.0)
# shellcheck disable=SC2086
gcc -O2 -o "$out/git-credential-libsecret" "$src" $flags
# shellcheck disable=SC2086
gcc -O2 -DGIT_CREDENTIAL_LIBSECRET_SOURCE="\"$src\"" -o "$out/git-credential-libsecret-current" \
    "$here/interop/git-credential-libsecret-current.c" $flags
