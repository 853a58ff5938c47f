#!/usr/bin/env bash
# Installs the Debian packages portal-token needs: with no argument, what building and running
# need; with "keyring", also a gnome-keyring to run it against where the machine has none; with
# "test", also what the test suite and benchmarks need. Installs only what is missing, so a
# second run costs nothing. The runtime list holds what the installed files need to work on a
# minimal Debian: man-db to read the man page, bash-completion to load the bash completion.
set -euo pipefail
build=(pkg-config gcc libc6-dev libcurl4-openssl-dev libsodium-dev libkeyutils-dev libqrencode-dev libtss2-dev)
# libsecret is loaded with dlopen and building needs none of its headers (Sources/CLibraries/CLibSecret/shim.h).
# tpm2-tss, for a file store sealed by the TPM, is loaded with dlopen as well.
runtime=(git libsecret-1-0 man-db bash-completion libtss2-esys-3.0.2-0 libtss2-mu0 libtss2-tctildr0 libtss2-tcti-device0)
keyring=(gnome-keyring dbus-daemon dbus-bin libglib2.0-bin)
# libsecret's headers: git's C helper is built against them, and a test compares CLibSecret's declarations with them.
# sd-bus's (libsystemd-dev): the tests call the desktop handler through it, a D-Bus written by others
# (portal-token itself loads no D-Bus library).
# The other Secret Service providers the suite runs against (contrib/testing/provider.sh): KeePassXC,
# and KWallet's daemon with QCA's OpenSSL plugin, without which its Secret Service API cannot open
# the encrypted session libsecret asks for.
# swtpm and tpm2-tools: a real TPM 2.0 for the sealed file store, reached through tpm2-tss's swtpm TCTI.
# python3-dbus and python3-gi: the test notification server the agent's questions go to, on a private bus.
# jq: a README recipe, which the suite runs (contrib/testing/doc-recipes.sh), pipes JSON through it.
providers=(keepassxc libkf5wallet-bin libqca-qt5-2-plugins)
test=("${keyring[@]}" "${providers[@]}" libsystemd-dev libsecret-1-dev libglib2.0-dev libsecret-tools binutils hyperfine time python3 python3-pip python3-jsonschema openssl coreutils curl jq valgrind keyutils util-linux zsh fish man-db groff xdg-utils skopeo docker-registry apache2-utils make xz-utils zlib1g-dev strace systemd bubblewrap swtpm tpm2-tools libtss2-tcti-swtpm0 python3-dbus python3-gi)

wanted=("${build[@]}" "${runtime[@]}")
case "${1:-}" in
    keyring) wanted+=("${keyring[@]}") ;;
    test) wanted+=("${test[@]}") ;;
esac

missing=()
for package in "${wanted[@]}"; do
    dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "ok installed" || missing+=("$package")
done
[ ${#missing[@]} -eq 0 ] && exit 0

echo "installing: ${missing[*]}" >&2
sudo=""
[ "$(id -u)" -eq 0 ] || sudo=sudo
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
