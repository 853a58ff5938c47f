# Sourced by the benchmarks of the proxy, in their working directory inside the private keyring:
# the session in the encrypted file (key cached) for the fake Portal (fake-portal.sh, which it
# sources), and a running `portal-token proxy --listen` on a free loopback port, stopped with the
# fake when the shell exits. Sets `proxy` (its pid), `proxied` (its /api/v3/clients/me) and
# proxy.headers, the Portal-Token-Proxy line with its credential.
export PORTAL_TOKEN_BACKEND=file
bench_file_store "$BENCH_WORK"
. "$BENCH_SCRIPTS/fake-portal.sh"
printf "protocol=http\nhost=127.0.0.1:%s\nusername=bench-user\npassword=%s\n" "$port" "$token" |
    "$PORTAL_TOKEN_BIN" store 2>/dev/null
"$PORTAL_TOKEN_BIN" proxy --listen 127.0.0.1:0 > proxy.env 2> proxy.log &
proxy=$!
trap "kill $proxy; kill $fake" EXIT
for _ in $(seq 50); do grep -q CREDENTIAL proxy.env 2>/dev/null && break; sleep 0.1; done
(umask 077 && printf "Portal-Token-Proxy: %s\n" "$(sed -n "s/^PORTAL_TOKEN_PROXY_CREDENTIAL=//p" proxy.env)" \
    > proxy.headers)
proxied="http://$(sed -n "s/^PORTAL_API_HOST=//p" proxy.env)/api/v3/clients/me"
