# Sourced by the benchmarks, in their working directory inside the private keyring: starts the
# loopback fake Portal server ($FAKE_SERVER, lenient, so plain curl is served too) with one live
# token, stops it when the shell exits, and sets `token` and `port` and the Portal settings, and
# `url`, its /api/v3/clients/me, with curl.headers, the Authorization line a plain curl sends.
token="bench-token-$RANDOM$RANDOM"
printf "%s\n" "$token" > live-tokens
"$FAKE_SERVER" --lenient --live-file live-tokens > fake.url 2> fake.log &
fake=$!
trap "kill $fake" EXIT
for _ in $(seq 50); do [ -s fake.url ] && break; sleep 0.1; done
port=$(sed -E "s|.*:([0-9]+)$|\1|" fake.url)
export PORTAL_AUTH_ENVIRONMENT_ID=bench-environment PORTAL_API_HOST=127.0.0.1:$port
url="http://127.0.0.1:$port/api/v3/clients/me"
(umask 077 && printf "Authorization: Bearer %s\n" "$token" > curl.headers)
