# The commands, each with its one-line description.
_portal_token_commands=(
    "get:print the stored credential that matches the request on stdin"
    "store:store the credential given on stdin"
    "erase:remove the stored credentials that match the request on stdin"
    "capability:list the credential-protocol capabilities portal-token supports"
    "token:print the Portal session token, for scripts (never reads stdin)"
    "exec:run a command with the session token in its environment"
    "exec-credential:print the token as a Kubernetes ExecCredential (client-go credential plugin)"
    "list:list stored credentials and Portal sessions (never a password or token)"
    "setup-git:make git use portal-token as its credential helper (or stop, with --unset)"
    "doctor:check the keyring, the encrypted file, the config and the hook"
    "methods:list the sign-in methods the auth environment allows"
    "login:sign in to Portal with a magic link, Google or Apple, or adopt a token"
    "redirect:finish a sign-in from the URL the browser was sent back to"
    "verify-totp:finish a sign-in that waits for a two-factor code"
    "status:show the Portal session: end user, environment, backend and expiry"
    "accounts:list the accounts signed in here and say which applies here; bind a directory to one"
    "refresh:ask Portal whether the session is live, and slide its expiry"
    "api:send an authenticated request to the Portal API and print the response"
    "proxy:serve the Portal API on a local port or socket, adding the session token"
    "logout:delete the stored Portal session (never runs the hook)"
    "migrate:move every item from the other store into the named one"
    "file-key:re-key the encrypted file now: seal it to the TPM or not, or change its passphrase"
    "delegate:mint a credential for the proxy narrower than the session, or narrow one offline"
    "delegations:list the delegated credentials that are live, or revoke one by its id"
    "lock:drop every cached key and session copy at once, the agent's too"
    "unlock:unlock the keyring (or open the encrypted file) from this terminal"
    "audit:show what used your credentials, when and from where (the audit log)"
    "agent:serve the token and the credential store on a Unix socket, to containers and sandboxes"
    "approve:answer the agent's questions from a terminal: list them, allow or deny one"
    "version:print portal-token's version"
    "help:show the help of a command"
)

# Settings flags: accepted before the command name, and after it except for exec.
_portal_token_setting_options="--env --end-user --api-host --redirect-url --account-abstracted --backend --config --agent-socket --verbose"
# The settings flags (and per-command options) that take a value in the next word.
_portal_token_valued_options="--env --end-user --api-host --redirect-url --account-abstracted --backend --config --agent-socket --format --token-var --ttl --email --timeout --method -X --data -d --header -H --listen --socket --allow-path --allow-method --to --from --new-passphrase-file --allow --path --caller --uses --revoke --since --restricted-socket --rules --idle-exit --asks"

# Prints the options of one command, one a line.
_portal_token_command_options() {
    case $1 in
        get) printf '%s\n' --format ;;
        token) printf '%s\n' --format ;;
        exec) printf '%s\n' --token-var --proxy --ttl ;;
        list) printf '%s\n' --format ;;
        setup-git) printf '%s\n' --unset ;;
        doctor) printf '%s\n' --format --network ;;
        methods) printf '%s\n' --format ;;
        login) printf '%s\n' --email --google --apple --no-browser --timeout --with-token ;;
        redirect) printf '%s\n' --dbus-activated ;;
        status) printf '%s\n' --format ;;
        accounts) printf '%s\n' --format --unset ;;
        api) printf '%s\n' --method -X --data -d --header -H ;;
        proxy) printf '%s\n' --listen --socket --allow-path --allow-method ;;
        migrate) printf '%s\n' --to --from ;;
        file-key) printf '%s\n' --new-passphrase --new-passphrase-file ;;
        delegate) printf '%s\n' --ttl --allow --path --caller --uses --from ;;
        delegations) printf '%s\n' --revoke --format ;;
        audit) printf '%s\n' --since --format ;;
        agent) printf '%s\n' --socket --restricted-socket --rules --idle-exit --check-rules --caller --asks --forget ;;
        approve) printf '%s\n' --deny ;;
    esac
}

# Prints the words offered for the value of the option $1; returns 1 when there are none.
_portal_token_words() {
    case $1 in
        --api-host) echo "api.portalhq.io localhost 127.0.0.1" ;;
        --account-abstracted) echo "true false" ;;
        --backend) echo "auto secret-service file vault" ;;
        --format) echo "json" ;;
        --ttl) echo "10m 1h 12h 1d" ;;
        --method) echo "GET POST PUT PATCH DELETE HEAD OPTIONS" ;;
        -X) echo "GET POST PUT PATCH DELETE HEAD OPTIONS" ;;
        --to) echo "secret-service file vault" ;;
        --from) echo "secret-service file vault" ;;
        --since) echo "30m 24h 7d" ;;
        *) return 1 ;;
    esac
}

# Returns 0 when the option $1 does not go with an option already in "$2" (" --a -b ").
_portal_token_excluded() {
    case $1 in
        --token-var) [[ $2 == *" --proxy "* ]] ;;
        --proxy) [[ $2 == *" --token-var "* ]] ;;
        --email) [[ $2 == *" --google "* || $2 == *" --apple "* || $2 == *" --with-token "* ]] ;;
        --google) [[ $2 == *" --email "* || $2 == *" --apple "* || $2 == *" --with-token "* ]] ;;
        --apple) [[ $2 == *" --email "* || $2 == *" --google "* || $2 == *" --with-token "* ]] ;;
        --with-token) [[ $2 == *" --email "* || $2 == *" --google "* || $2 == *" --apple "* ]] ;;
        --method) [[ $2 == *" -X "* ]] ;;
        -X) [[ $2 == *" --method "* ]] ;;
        --data) [[ $2 == *" -d "* ]] ;;
        -d) [[ $2 == *" --data "* ]] ;;
        --header) [[ $2 == *" -H "* ]] ;;
        -H) [[ $2 == *" --header "* ]] ;;
        --listen) [[ $2 == *" --socket "* ]] ;;
        --socket) [[ $2 == *" --listen "* ]] ;;
        --new-passphrase-file) [[ $2 == *" --new-passphrase "* ]] ;;
        --check-rules) [[ $2 == *" --idle-exit "* || $2 == *" --restricted-socket "* ]] ;;
        --asks) [[ $2 == *" --idle-exit "* || $2 == *" --restricted-socket "* ]] ;;
        --forget) [[ $2 == *" --idle-exit "* || $2 == *" --restricted-socket "* || $2 == *" --check-rules "* || $2 == *" --rules "* ]] ;;
        *) return 1 ;;
    esac
}
