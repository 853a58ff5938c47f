# fish completion for portal-token
#
# Installation:
#   for one user:
#     install -Dm644 portal-token.fish ~/.config/fish/completions/portal-token.fish
#   system-wide:
#     install -Dm644 portal-token.fish /usr/share/fish/vendor_completions.d/portal-token.fish
# fish loads it the next time portal-token is completed.

set -l commands get store erase capability token exec exec-credential list setup-git doctor login redirect verify-totp methods status refresh api logout migrate help

# The body of --data: a JSON document, @FILE, or @- for stdin.
function __portal_token_data
    set -l token (commandline -ct)
    set token (string replace -r -- '^(--data=|-d)' '' $token)
    if string match -q -- '@*' $token
        printf '%s\t%s\n' @- 'read the body from stdin'
        for path in (__fish_complete_path (string sub -s 2 -- $token))
            printf '@%s\n' $path
        end
    else
        printf '%s\t%s\n' @ 'read the body from a file' @- 'read the body from stdin'
    end
end

complete -c portal-token -f

# Commands
complete -c portal-token -n "not __fish_seen_subcommand_from $commands" -a get -d 'Print the credential matching the request on stdin, or the session token'
complete -c portal-token -n "not __fish_seen_subcommand_from $commands" -a store -d 'Store the credential given on stdin'
complete -c portal-token -n "not __fish_seen_subcommand_from $commands" -a erase -d 'Remove the stored credentials matching the request on stdin'
complete -c portal-token -n "not __fish_seen_subcommand_from $commands" -a capability -d 'List the credential-protocol capabilities portal-token supports'
complete -c portal-token -n "not __fish_seen_subcommand_from $commands" -a token -d 'Print the session token, for scripts (never reads stdin)'
complete -c portal-token -n "not __fish_seen_subcommand_from $commands" -a exec -d 'Run a command with the session token in its environment'
complete -c portal-token -n "not __fish_seen_subcommand_from $commands" -a exec-credential -d 'Print the token as a Kubernetes ExecCredential'
complete -c portal-token -n "not __fish_seen_subcommand_from $commands" -a list -d 'List stored credentials and sessions (never a secret)'
complete -c portal-token -n "not __fish_seen_subcommand_from $commands" -a setup-git -d 'Make git use portal-token as its credential helper'
complete -c portal-token -n "not __fish_seen_subcommand_from $commands" -a doctor -d 'Check the keyring, the file, the config and the hook'
complete -c portal-token -n "not __fish_seen_subcommand_from $commands" -a login -d 'Sign in to Portal and store the session'
complete -c portal-token -n "not __fish_seen_subcommand_from $commands" -a redirect -d 'Complete a sign-in from a redirect URL'
complete -c portal-token -n "not __fish_seen_subcommand_from $commands" -a verify-totp -d 'Complete a pending two-factor step'
complete -c portal-token -n "not __fish_seen_subcommand_from $commands" -a methods -d 'Show the sign-in methods the environment allows'
complete -c portal-token -n "not __fish_seen_subcommand_from $commands" -a status -d 'Show the Portal session: end user, environment, backend and expiry'
complete -c portal-token -n "not __fish_seen_subcommand_from $commands" -a refresh -d 'Ask Portal whether the session is live, and slide its expiry'
complete -c portal-token -n "not __fish_seen_subcommand_from $commands" -a api -d 'Send an authenticated request to the Portal API'
complete -c portal-token -n "not __fish_seen_subcommand_from $commands" -a logout -d 'Delete the stored Portal session'
complete -c portal-token -n "not __fish_seen_subcommand_from $commands" -a migrate -d 'Move every item from the other store into the named one'
complete -c portal-token -n "not __fish_seen_subcommand_from $commands" -a help -d 'Show the help of a command'
complete -c portal-token -n "__fish_seen_subcommand_from help" -a "(string match -v help -- $commands)"

# Settings flags: accepted before or after the command name
complete -c portal-token -l env -x -d 'Auth environment ID'
complete -c portal-token -l api-host -x -a 'api.portalhq.io localhost 127.0.0.1' -d 'Portal API host'
complete -c portal-token -l redirect-url -x -d 'Sign-in redirect URL'
complete -c portal-token -l account-abstracted -x -a 'true false' -d 'Ask Portal for account abstraction'
complete -c portal-token -l backend -x -d 'Storage backend' -a "auto\t'the Secret Service when a provider is registered, else the encrypted file' secret-service\t'the desktop keyring only' file\t'the encrypted file only'"
complete -c portal-token -l config -r -F -d 'Config file'
complete -c portal-token -l verbose -d 'Trace to stderr, every secret redacted'
complete -c portal-token -s h -l help -d 'Show help'
complete -c portal-token -n "not __fish_seen_subcommand_from $commands" -s V -l version -d 'Print the version'

# get, status, methods
complete -c portal-token -n "__fish_seen_subcommand_from get" -l format -x -a json -d 'Print the session token as JSON (script mode)'
complete -c portal-token -n "__fish_seen_subcommand_from status methods token list doctor" -l format -x -a json -d 'Print JSON'

# exec, setup-git, doctor
complete -c portal-token -n "__fish_seen_subcommand_from exec" -l token-var -x -d 'Environment variable for the token'
complete -c portal-token -n "__fish_seen_subcommand_from exec; and __fish_contains_opt token-var" -a '(__fish_complete_command)'
complete -c portal-token -n "__fish_seen_subcommand_from setup-git" -l unset -d 'Remove portal-token from the git config'
complete -c portal-token -n "__fish_seen_subcommand_from doctor" -l network -d 'Also check that the Portal API answers'

# redirect
complete -c portal-token -n "__fish_seen_subcommand_from redirect" -l dbus-activated -d 'Take the URL from the session bus (how the desktop handler starts it)'
# login
complete -c portal-token -n "__fish_seen_subcommand_from login; and not __fish_contains_opt email google apple with-token" -l email -x -d 'Sign in with a magic link sent to ADDRESS'
complete -c portal-token -n "__fish_seen_subcommand_from login; and not __fish_contains_opt email google apple with-token" -l google -d 'Sign in with Google'
complete -c portal-token -n "__fish_seen_subcommand_from login; and not __fish_contains_opt email google apple with-token" -l apple -d 'Sign in with Apple'
complete -c portal-token -n "__fish_seen_subcommand_from login; and not __fish_contains_opt email google apple with-token" -l with-token -d 'Adopt a token from stdin, minted by your backend'
complete -c portal-token -n "__fish_seen_subcommand_from login" -l end-user -x -d 'End user ID of the adopted token'
complete -c portal-token -n "__fish_seen_subcommand_from login" -l no-browser -d 'Do not open a browser; show the sign-in link to open elsewhere'
complete -c portal-token -n "__fish_seen_subcommand_from login" -l timeout -x -d 'How long to wait for the sign-in, in seconds'

# api
complete -c portal-token -n "__fish_seen_subcommand_from api" -s X -l method -x -a 'GET POST PUT PATCH DELETE HEAD OPTIONS' -d 'HTTP method (GET, or POST with --data)'
complete -c portal-token -n "__fish_seen_subcommand_from api" -s d -l data -x -a '(__portal_token_data)' -d 'Request body: JSON, @FILE, or @- for stdin'
complete -c portal-token -n "__fish_seen_subcommand_from api" -s H -l header -x -d "Add a request header: 'Name: value'"
complete -c portal-token -n "__fish_seen_subcommand_from api" -a /api/v3/clients/me -d 'API path'

# migrate
complete -c portal-token -n "__fish_seen_subcommand_from migrate" -l to -x -a 'secret-service file' -d 'The store to move every item into'
