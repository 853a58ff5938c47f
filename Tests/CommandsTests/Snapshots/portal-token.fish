set -l commands get store erase capability token exec exec-credential list setup-git doctor methods login redirect verify-totp status accounts refresh api proxy logout migrate file-key delegate delegations lock unlock audit agent approve version help

# Commands
complete -c portal-token -n "not __fish_seen_subcommand_from $commands" -a get -d 'Print the stored credential that matches the request on stdin'
complete -c portal-token -n "not __fish_seen_subcommand_from $commands" -a store -d 'Store the credential given on stdin'
complete -c portal-token -n "not __fish_seen_subcommand_from $commands" -a erase -d 'Remove the stored credentials that match the request on stdin'
complete -c portal-token -n "not __fish_seen_subcommand_from $commands" -a capability -d 'List the credential-protocol capabilities portal-token supports'
complete -c portal-token -n "not __fish_seen_subcommand_from $commands" -a token -d 'Print the Portal session token, for scripts (never reads stdin)'
complete -c portal-token -n "not __fish_seen_subcommand_from $commands" -a exec -d 'Run a command with the session token in its environment'
complete -c portal-token -n "not __fish_seen_subcommand_from $commands" -a exec-credential -d 'Print the token as a Kubernetes ExecCredential (client-go credential plugin)'
complete -c portal-token -n "not __fish_seen_subcommand_from $commands" -a list -d 'List stored credentials and Portal sessions (never a password or token)'
complete -c portal-token -n "not __fish_seen_subcommand_from $commands" -a setup-git -d 'Make git use portal-token as its credential helper (or stop, with --unset)'
complete -c portal-token -n "not __fish_seen_subcommand_from $commands" -a doctor -d 'Check the keyring, the encrypted file, the config and the hook'
complete -c portal-token -n "not __fish_seen_subcommand_from $commands" -a methods -d 'List the sign-in methods the auth environment allows'
complete -c portal-token -n "not __fish_seen_subcommand_from $commands" -a login -d 'Sign in to Portal with a magic link, Google or Apple, or adopt a token'
complete -c portal-token -n "not __fish_seen_subcommand_from $commands" -a redirect -d 'Finish a sign-in from the URL the browser was sent back to'
complete -c portal-token -n "not __fish_seen_subcommand_from $commands" -a verify-totp -d 'Finish a sign-in that waits for a two-factor code'
complete -c portal-token -n "not __fish_seen_subcommand_from $commands" -a status -d 'Show the Portal session: end user, environment, backend and expiry'
complete -c portal-token -n "not __fish_seen_subcommand_from $commands" -a accounts -d 'List the accounts signed in here and say which applies here; bind a directory to one'
complete -c portal-token -n "not __fish_seen_subcommand_from $commands" -a refresh -d 'Ask Portal whether the session is live, and slide its expiry'
complete -c portal-token -n "not __fish_seen_subcommand_from $commands" -a api -d 'Send an authenticated request to the Portal API and print the response'
complete -c portal-token -n "not __fish_seen_subcommand_from $commands" -a proxy -d 'Serve the Portal API on a local port or socket, adding the session token'
complete -c portal-token -n "not __fish_seen_subcommand_from $commands" -a logout -d 'Delete the stored Portal session (never runs the hook)'
complete -c portal-token -n "not __fish_seen_subcommand_from $commands" -a migrate -d 'Move every item from the other store into the named one'
complete -c portal-token -n "not __fish_seen_subcommand_from $commands" -a file-key -d 'Re-key the encrypted file now: seal it to the TPM or not, or change its passphrase'
complete -c portal-token -n "not __fish_seen_subcommand_from $commands" -a delegate -d 'Mint a credential for the proxy narrower than the session, or narrow one offline'
complete -c portal-token -n "not __fish_seen_subcommand_from $commands" -a delegations -d 'List the delegated credentials that are live, or revoke one by its id'
complete -c portal-token -n "not __fish_seen_subcommand_from $commands" -a lock -d 'Drop every cached key and session copy at once, the agent\'s too'
complete -c portal-token -n "not __fish_seen_subcommand_from $commands" -a unlock -d 'Unlock the keyring (or open the encrypted file) from this terminal'
complete -c portal-token -n "not __fish_seen_subcommand_from $commands" -a audit -d 'Show what used your credentials, when and from where (the audit log)'
complete -c portal-token -n "not __fish_seen_subcommand_from $commands" -a agent -d 'Serve the token and the credential store on a Unix socket, to containers and sandboxes'
complete -c portal-token -n "not __fish_seen_subcommand_from $commands" -a approve -d 'Answer the agent\'s questions from a terminal: list them, allow or deny one'
complete -c portal-token -n "not __fish_seen_subcommand_from $commands" -a version -d 'Print portal-token\'s version'
complete -c portal-token -n "not __fish_seen_subcommand_from $commands" -a help -d 'Show the help of a command'
complete -c portal-token -n "__fish_seen_subcommand_from help" -a "(string match -v help -- $commands)"

# Settings flags: accepted before the command name, and after it except for exec
complete -c portal-token -l env -x -d 'Auth environment ID (PORTAL_AUTH_ENVIRONMENT_ID)'
complete -c portal-token -l end-user -x -d 'End user ID, where an environment has several (PORTAL_END_USER_ID)'
complete -c portal-token -l api-host -x -a 'api.portalhq.io localhost 127.0.0.1' -d 'Portal API host (PORTAL_API_HOST; api.portalhq.io)'
complete -c portal-token -l redirect-url -x -d 'Sign-in redirect URL (PORTAL_REDIRECT_URL)'
complete -c portal-token -l account-abstracted -x -a 'true false' -d 'Ask Portal for account abstraction (PORTAL_ACCOUNT_ABSTRACTED)'
complete -c portal-token -l backend -x -a 'auto secret-service file vault' -d 'Storage backend (PORTAL_TOKEN_BACKEND; auto)'
complete -c portal-token -l config -r -F -d 'Config file (PORTAL_TOKEN_CONFIG)'
complete -c portal-token -l agent-socket -r -F -d 'Use the agent listening on this socket (PORTAL_TOKEN_AGENT_SOCK)'
complete -c portal-token -l verbose -d 'Trace to stderr, every secret redacted (PORTAL_TOKEN_TRACE)'
complete -c portal-token -s h -l help -d 'Show help'
complete -c portal-token -n "not __fish_seen_subcommand_from $commands" -s V -l version -d 'Print the version'

# get
complete -c portal-token -n "__fish_seen_subcommand_from get" -l format -x -a 'json' -d 'Print the session token as JSON (script mode)'

# token
complete -c portal-token -n "__fish_seen_subcommand_from token" -l format -x -a 'json' -d 'Print JSON'

# exec
complete -c portal-token -n "__fish_seen_subcommand_from exec; and not __fish_contains_opt token-var proxy" -l token-var -x -d 'Environment variable for the token'
complete -c portal-token -n "__fish_seen_subcommand_from exec; and not __fish_contains_opt proxy token-var" -l proxy -d 'Give COMMAND a proxy to the Portal API instead of the token'
complete -c portal-token -n "__fish_seen_subcommand_from exec" -l ttl -x -a '10m 1h 12h 1d' -d 'With --proxy: how long the child\'s credential lives (default 12h, at most 7d)'
complete -c portal-token -n "__fish_seen_subcommand_from exec; and contains -- -- (commandline -opc)" -a '(__fish_complete_command)'

# list
complete -c portal-token -n "__fish_seen_subcommand_from list" -l format -x -a 'json' -d 'Print JSON'

# setup-git
complete -c portal-token -n "__fish_seen_subcommand_from setup-git" -l unset -d 'Remove portal-token from the global git config'

# doctor
complete -c portal-token -n "__fish_seen_subcommand_from doctor" -l format -x -a 'json' -d 'Print JSON'
complete -c portal-token -n "__fish_seen_subcommand_from doctor" -l network -d 'Also check that the Portal API answers'

# methods
complete -c portal-token -n "__fish_seen_subcommand_from methods" -l format -x -a 'json' -d 'Print JSON'

# login
complete -c portal-token -n "__fish_seen_subcommand_from login; and not __fish_contains_opt email google apple with-token" -l email -x -d 'Sign in with a magic link sent to ADDRESS'
complete -c portal-token -n "__fish_seen_subcommand_from login; and not __fish_contains_opt google email apple with-token" -l google -d 'Sign in with Google'
complete -c portal-token -n "__fish_seen_subcommand_from login; and not __fish_contains_opt apple email google with-token" -l apple -d 'Sign in with Apple'
complete -c portal-token -n "__fish_seen_subcommand_from login" -l no-browser -d 'Do not open a browser; show the sign-in link to open elsewhere'
complete -c portal-token -n "__fish_seen_subcommand_from login" -l timeout -x -d 'How long to wait for the sign-in, in seconds'
complete -c portal-token -n "__fish_seen_subcommand_from login; and not __fish_contains_opt with-token email google apple" -l with-token -d 'Adopt a token from stdin, minted by your backend'

# redirect
complete -c portal-token -n "__fish_seen_subcommand_from redirect" -l dbus-activated -d 'Take the URL from the session bus (how the desktop handler starts it)'

# verify-totp

# status
complete -c portal-token -n "__fish_seen_subcommand_from status" -l format -x -a 'json' -d 'Print JSON'

# accounts
complete -c portal-token -n "__fish_seen_subcommand_from accounts" -l format -x -a 'json' -d 'Print JSON'
complete -c portal-token -n "__fish_seen_subcommand_from accounts" -l unset -d 'Remove this directory\'s binding'
complete -c portal-token -n "__fish_seen_subcommand_from accounts" -a 'use' -d 'Bind this directory'

# api
complete -c portal-token -n "__fish_seen_subcommand_from api" -s X -l method -x -a 'GET POST PUT PATCH DELETE HEAD OPTIONS' -d 'HTTP method (GET, or POST with --data)'
complete -c portal-token -n "__fish_seen_subcommand_from api" -s d -l data -x -a '(__portal_token_data)' -d 'Request body: JSON, @FILE, or @- for stdin'
complete -c portal-token -n "__fish_seen_subcommand_from api" -s H -l header -x -d 'Add a request header: \'Name: value\''
complete -c portal-token -n "__fish_seen_subcommand_from api" -a '/api/v3/clients/me' -d 'API path'

# proxy
complete -c portal-token -n "__fish_seen_subcommand_from proxy; and not __fish_contains_opt listen socket" -l listen -x -d 'Listen on this loopback port (default 127.0.0.1:0: any free port)'
complete -c portal-token -n "__fish_seen_subcommand_from proxy; and not __fish_contains_opt socket listen" -l socket -r -F -d 'Listen on a Unix socket instead'
complete -c portal-token -n "__fish_seen_subcommand_from proxy" -l allow-path -x -d 'Forward paths under PREFIX only (default /api/v3/clients/me)'
complete -c portal-token -n "__fish_seen_subcommand_from proxy" -l allow-method -x -d 'Forward this method only (default GET, HEAD, POST, PUT, PATCH, DELETE)'

# migrate
complete -c portal-token -n "__fish_seen_subcommand_from migrate" -l to -x -a 'secret-service file vault' -d 'The store to move every item into'
complete -c portal-token -n "__fish_seen_subcommand_from migrate" -l from -x -a 'secret-service file vault' -d 'The store to move them from (default: the file; the keyring for --to file)'

# file-key
complete -c portal-token -n "__fish_seen_subcommand_from file-key" -l new-passphrase -d 'Also change the passphrase: type the new one twice at the terminal'
complete -c portal-token -n "__fish_seen_subcommand_from file-key; and not __fish_contains_opt new-passphrase-file new-passphrase" -l new-passphrase-file -r -F -d 'Also change the passphrase, to the one in FILE'

# delegate
complete -c portal-token -n "__fish_seen_subcommand_from delegate" -l ttl -x -a '10m 1h 12h 1d' -d 'How long the credential lives: 90s, 30m, 12h, 7d'
complete -c portal-token -n "__fish_seen_subcommand_from delegate" -l allow -x -d 'Allow this method only (repeatable)'
complete -c portal-token -n "__fish_seen_subcommand_from delegate" -l path -x -d 'Allow this path only, or with /* what is below it (repeatable)'
complete -c portal-token -n "__fish_seen_subcommand_from delegate" -l caller -x -d 'Only for a caller that meets this rules file condition, such as \'container docker:3f2a*\''
complete -c portal-token -n "__fish_seen_subcommand_from delegate" -l uses -x -d 'Allow N requests, then refuse'
complete -c portal-token -n "__fish_seen_subcommand_from delegate" -l from -r -F -d 'Narrow the credential in FILE (- for stdin), offline'

# delegations
complete -c portal-token -n "__fish_seen_subcommand_from delegations" -l revoke -x -d 'Revoke this credential and every one derived from it'
complete -c portal-token -n "__fish_seen_subcommand_from delegations" -l format -x -a 'json' -d 'Print JSON'

# audit
complete -c portal-token -n "__fish_seen_subcommand_from audit" -l since -x -a '30m 24h 7d' -d 'Only the events of the last DURATION: 90s, 30m, 24h, 7d'
complete -c portal-token -n "__fish_seen_subcommand_from audit" -l format -x -a 'json' -d 'Print JSON'

# agent
complete -c portal-token -n "__fish_seen_subcommand_from agent" -l socket -r -F -d 'The main socket (default $XDG_RUNTIME_DIR/portal-token/agent.sock)'
complete -c portal-token -n "__fish_seen_subcommand_from agent" -l restricted-socket -r -F -d 'The read-only socket (default $XDG_RUNTIME_DIR/portal-token/agent-restricted.sock)'
complete -c portal-token -n "__fish_seen_subcommand_from agent" -l rules -r -F -d 'The rules file (default $XDG_CONFIG_HOME/portal-token/agent.rules)'
complete -c portal-token -n "__fish_seen_subcommand_from agent" -l idle-exit -x -d 'Stop once no client has been connected for SECONDS'
complete -c portal-token -n "__fish_seen_subcommand_from agent; and not __fish_contains_opt check-rules idle-exit restricted-socket" -l check-rules -d 'Check the rules file (FILE, else --rules or the default), and show for the agent\'s last refusals what decides each and the rule that would admit it'
complete -c portal-token -n "__fish_seen_subcommand_from agent; and not __fish_contains_opt caller idle-exit restricted-socket" -l caller -x -d 'With --check-rules: a caller to judge instead of the last refusals, as \'uid=N cgroup=PATH exe=PATH user-namespace=same|other flatpak-info socket=main|restricted\''
complete -c portal-token -n "__fish_seen_subcommand_from agent; and not __fish_contains_opt asks idle-exit restricted-socket" -l asks -x -d 'With --caller: what it asks, as a rule grants it: \'token ENV[/END_USER]\', \'git-get HOST\', \'docker-get REGISTRY\', \'status\', \'list\', \'write\' or \'proxy METHOD PATH\' (default: token of the configured environment)'
complete -c portal-token -n "__fish_seen_subcommand_from agent; and not __fish_contains_opt forget idle-exit restricted-socket check-rules rules" -l forget -d 'Make the agent on --socket (default the main socket) drop every answer to its questions it keeps'

# approve
complete -c portal-token -n "__fish_seen_subcommand_from approve" -l deny -d 'Deny the question instead of allowing it'
