set -euo pipefail
. "$(dirname "$0")/with-fake-portal.sh"
bench_in_keyring '
    unset PORTAL_TOKEN_BACKEND PORTAL_TOKEN_PASSPHRASE
    bench_file_store "$BENCH_WORK"
    . "$BENCH_SCRIPTS/fake-portal.sh"
    for backend in auto file; do
        printf "protocol=http\nhost=127.0.0.1:%s\nusername=bench-user\npassword=%s\n" "$port" "$token" | /tmp/pt-on store --backend "$backend" 2>/dev/null
    done
    bench_rounds 5 30 \
        --command-name "curl" "curl -s -H @curl.headers $url" \
        --command-name "on auto" "/tmp/pt-on api /api/v3/clients/me" \
        --command-name "off auto" "/tmp/pt-off api /api/v3/clients/me" \
        --command-name "on file" "/tmp/pt-on api --backend file /api/v3/clients/me" \
        --command-name "off file" "/tmp/pt-off api --backend file /api/v3/clients/me" >/dev/null 2>&1
    bench_python "$rounds" <<"PY"
import sys
from rounds import read_rounds, print_medians, print_spreads
rounds = int(sys.argv[1])
every, times = read_rounds(rounds)
print_medians(times, 20, "medians:")
r = {k: [m[k] / m["curl"] for m in every] for k in ["on auto", "off auto", "on file", "off file"]}
r["on/off auto"] = [m["on auto"] / m["off auto"] for m in every]
r["on/off file"] = [m["on file"] / m["off file"] for m in every]
print_spreads(r, 20, "ratios:")
PY
'
