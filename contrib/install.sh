#!/usr/bin/env bash
# Installs portal-token: the Debian packages it needs, a release build with the Swift standard
# library linked in, and PREFIX/bin/portal-token with the git-credential-portal-token and
# docker-credential-portal-token links that git and Docker-style tools find; the man pages
# (portal-token(1), portal-token-agent.rules(5)) and docs/*.md, the bash, zsh and fish completions, the desktop entry for sign-in redirects, the agent's systemd
# user units (not enabled) and the example hooks.
# Then shows git using it (contrib/dev/try.sh) and prints the next steps. contrib/uninstall.sh
# removes every file this put in place (it keeps a list of them).
#
# usage: contrib/install.sh [--prefix DIR] [--binary PATH] [--scheme SCHEME] [--no-try]
#   --prefix DIR     where bin/ and share/ go (default: ~/.local)
#   --binary PATH    install this portal-token instead of building one (also PORTAL_TOKEN_RELEASE_BIN)
#   --scheme SCHEME  your redirect URL's scheme (myapp for myapp://auth/callback): registers the
#                    D-Bus-activatable desktop handler for it (default: the scheme of
#                    PORTAL_REDIRECT_URL when that is not an http(s) URL)
#   --no-try         skip the git demo
set -euo pipefail
prefix=${PREFIX:-$HOME/.local}
binary=${PORTAL_TOKEN_RELEASE_BIN:-}
try=1
scheme=""
usage="usage: contrib/install.sh [--prefix DIR] [--binary PATH] [--scheme SCHEME] [--no-try]"
while [ $# -gt 0 ]; do
    case "$1" in
        --prefix) prefix=${2:?--prefix needs a directory}; shift 2 ;;
        --prefix=*) prefix=${1#--prefix=}; shift ;;
        --binary) binary=${2:?--binary needs a path}; shift 2 ;;
        --binary=*) binary=${1#--binary=}; shift ;;
        --scheme) scheme=${2:?--scheme needs a URL scheme}; shift 2 ;;
        --scheme=*) scheme=${1#--scheme=}; shift ;;
        --no-try) try=0; shift ;;
        -h | --help) echo "$usage"; exit 0 ;;
        *) echo "$usage" >&2; exit 2 ;;
    esac
done
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

if [ -n "$binary" ]; then
    [ -x "$binary" ] || { echo "install.sh: $binary is not an executable portal-token" >&2; exit 2; }
else
    contrib/deps.sh
    echo "== building portal-token (release)"
    binary=$(contrib/build-release.sh)
fi

data_home=${XDG_DATA_HOME:-$HOME/.local/share}
config_home=${XDG_CONFIG_HOME:-$HOME/.config}
manifest="$prefix/share/portal-token/installed-files"
install -d "$prefix/share/portal-token"
: > "$manifest.new"
# Installs one file (mode $1) at $3 from $2 and records it for uninstall.sh.
put() {
    install -D -m "$1" "$2" "$3"
    echo "$3" >> "$manifest.new"
}
# Makes $2 a link to $1 and records it.
link() {
    ln -sfn "$1" "$2"
    echo "$2" >> "$manifest.new"
}

# --- the program and the names git and Docker-style tools run it by
put 0755 "$binary" "$prefix/bin/portal-token"
link portal-token "$prefix/bin/git-credential-portal-token"
link portal-token "$prefix/bin/docker-credential-portal-token"

# --- the manual: man portal-token, and man portal-token-agent.rules for the agent's rules file
# (PREFIX/share/man is on man's path for PREFIX/bin on PATH)
put 0644 contrib/man/portal-token.1 "$prefix/share/man/man1/portal-token.1"
put 0644 contrib/man/portal-token-agent.rules.5 "$prefix/share/man/man5/portal-token-agent.rules.5"

# --- the documentation the man pages and hints cite: PREFIX/share/doc/portal-token/*.md
for doc in docs/*.md; do
    put 0644 "$doc" "$prefix/share/doc/portal-token/$(basename "$doc")"
done

# --- completions, in each shell's per-user location
put 0644 contrib/completions/portal-token.bash "$data_home/bash-completion/completions/portal-token"
put 0644 contrib/completions/_portal-token "$data_home/zsh/site-functions/_portal-token"
put 0644 contrib/completions/portal-token.fish "$config_home/fish/completions/portal-token.fish"

# --- the desktop handler for a custom-scheme redirect URL (docs/signing-in.md): a
# D-Bus-activatable entry (Desktop Entry specification), so the launcher hands the redirect URL
# over the session bus and it never sits in portal-token's command line (the browser's launcher
# may still hold it in its own: docs/signing-in.md, "Which browsers put the URL on a command
# line"). The service file is always installed; the entry, registered for its scheme, when the
# scheme is known.
if [ -z "$scheme" ]; then
    case "${PORTAL_REDIRECT_URL:-}" in
        http://* | https://* | "") ;;
        *:*) scheme=${PORTAL_REDIRECT_URL%%:*} ;;
    esac
fi
case "$scheme" in
    *[!A-Za-z0-9+.-]*) echo "install.sh: --scheme takes a URL scheme such as myapp" >&2; exit 2 ;;
esac
install -d "$data_home/dbus-1/services"
sed "s|^Exec=portal-token |Exec=$prefix/bin/portal-token |" contrib/desktop/io.portalhq.PortalToken.service \
    > "$data_home/dbus-1/services/io.portalhq.PortalToken.service"
echo "$data_home/dbus-1/services/io.portalhq.PortalToken.service" >> "$manifest.new"
if [ -n "$scheme" ]; then
    desktop_entry="$data_home/applications/io.portalhq.PortalToken.desktop"
    install -d "$data_home/applications"
    sed -n '/^\[Desktop Entry\]/,$p' contrib/desktop/io.portalhq.PortalToken.desktop |
        sed -e "s/<scheme>/$scheme/" -e "s|^Exec=portal-token |Exec=$prefix/bin/portal-token |" > "$desktop_entry"
    echo "$desktop_entry" >> "$manifest.new"
    if command -v xdg-mime >/dev/null; then
        xdg-mime default io.portalhq.PortalToken.desktop "x-scheme-handler/$scheme" || true
    else
        echo "hint: run 'xdg-mime default io.portalhq.PortalToken.desktop x-scheme-handler/$scheme' in the desktop session"
    fi
fi

# --- the agent's systemd user units (docs/agent.md): the socket starts the service on first use
systemd_user="$config_home/systemd/user"
put 0644 contrib/systemd/portal-token-agent.socket "$systemd_user/portal-token-agent.socket"
install -d "$systemd_user"
sed "s|^ExecStart=portal-token |ExecStart=$prefix/bin/portal-token |" contrib/systemd/portal-token-agent.service \
    > "$systemd_user/portal-token-agent.service"
echo "$systemd_user/portal-token-agent.service" >> "$manifest.new"
if command -v systemctl >/dev/null && systemctl --user show-environment >/dev/null 2>&1; then
    systemctl --user daemon-reload || true
fi

# --- example hooks, to copy to ~/.config/portal-token/hooks/on-session-invalidated
for hook in contrib/hooks/*; do
    put 0755 "$hook" "$prefix/share/doc/portal-token/examples/hooks/$(basename "$hook")"
done

echo "$manifest" >> "$manifest.new"
mv "$manifest.new" "$manifest"
echo "== installed portal-token $("$prefix/bin/portal-token" --version | cut -d' ' -f2) under $prefix"

if [ "$try" = 1 ]; then contrib/dev/try.sh "$prefix/bin"; fi

path_hint=""
case ":$PATH:" in
    *":$prefix/bin:"*) ;;
    *) path_hint="  0. Put $prefix/bin on PATH (in ~/.profile):  export PATH=\"$prefix/bin:\$PATH\"" ;;
esac
cat <<EOF

Next steps
$path_hint
  1. Use it for git:             portal-token setup-git
  2. Sign in to Portal:          export PORTAL_AUTH_ENVIRONMENT_ID=<your environment ID>
                                 export PORTAL_REDIRECT_URL=http://127.0.0.1:8765/callback
                                 portal-token login --google      (or --email ADDRESS, --apple)
  3. In scripts:                 TOKEN=\$(portal-token token)
                                 portal-token exec -- ./your-script
  4. Check the setup:            portal-token doctor
  5. For containers, sandboxes:  systemctl --user enable --now portal-token-agent.socket
                                 docker run -v \$XDG_RUNTIME_DIR/portal-token/agent-restricted.sock:/run/portal-token.sock ...
     It serves nothing there until a rule admits the caller: the refusal and 'portal-token agent
     --check-rules' print that rule for $config_home/portal-token/agent.rules (read again when it changes).
     The unit does not see variables exported in a shell: settings go in $config_home/portal-token/config.
  Manual: man portal-token, man portal-token-agent.rules (the rules), $prefix/share/doc/portal-token/
  Completions: open a new shell (zsh: fpath+=($data_home/zsh/site-functions))
  Registry credentials:          "credHelpers": {"registry.example": "portal-token"} in ~/.docker/config.json
  Remove it all:                 contrib/uninstall.sh --prefix $prefix
EOF
