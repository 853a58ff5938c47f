# bash completion for portal-token                         -*- shell-script -*-
#
# Installation, with the bash-completion package (loaded on first use):
#   system-wide:
#     install -Dm644 portal-token.bash /usr/share/bash-completion/completions/portal-token
#   for one user:
#     install -Dm644 portal-token.bash \
#         "${XDG_DATA_HOME:-$HOME/.local/share}/bash-completion/completions/portal-token"
# Without bash-completion, source it from ~/.bashrc:
#     . /path/to/portal-token.bash
# It works with or without bash-completion.

# The commands, each with its one-line description.
_portal_token_commands=(
    "get:print the credential matching the request on stdin, or the session token"
    "store:store the credential given on stdin"
    "erase:remove the stored credentials matching the request on stdin"
    "capability:list the credential-protocol capabilities portal-token supports"
    "token:print the session token, for scripts (never reads stdin)"
    "exec:run a command with the session token in its environment"
    "exec-credential:print the token as a Kubernetes ExecCredential"
    "list:list stored credentials and sessions (never a secret)"
    "setup-git:make git use portal-token as its credential helper"
    "doctor:check the keyring, the file, the config and the hook"
    "login:sign in to Portal and store the session"
    "redirect:complete a sign-in from a redirect URL"
    "verify-totp:complete a pending two-factor step"
    "methods:show the sign-in methods the environment allows"
    "status:show the Portal session: end user, environment, backend and expiry"
    "refresh:ask Portal whether the session is live, and slide its expiry"
    "api:send an authenticated request to the Portal API"
    "logout:delete the stored Portal session"
    "migrate:move every item from the other store into the named one"
    "help:show the help of a command"
)

# Settings flags: accepted before or after the command name.
_portal_token_setting_options="--env --api-host --redirect-url --account-abstracted --backend --config --verbose"
# The settings flags (and per-command options) that take a value in the next word.
_portal_token_valued_options="--env --api-host --redirect-url --account-abstracted --backend --config --format --email --timeout -X --method -d --data -H --header --token-var --end-user --to"

# Prints the options of one command, one a line.
_portal_token_command_options() {
    case $1 in
        get | status | methods | token | list) echo "--format" ;;
        login) printf '%s\n' --email --google --apple --with-token --end-user --no-browser --timeout ;;
        exec) echo "--token-var" ;;
        setup-git) echo "--unset" ;;
        doctor) printf '%s\n' --format --network ;;
        redirect) printf '%s\n' --dbus-activated - ;;
        api) printf '%s\n' -X --method --data -d -H --header ;;
        migrate) echo "--to" ;;
    esac
}

# Fills COMPREPLY with the files and directories starting with $2, each prefixed with $1.
_portal_token_files() {
    local prefix=$1 word=$2 path
    local -a found
    mapfile -t found < <(compgen -f -- "$word")
    COMPREPLY=()
    for path in "${found[@]}"; do
        [[ -d $path ]] && path+=/
        COMPREPLY+=("$prefix$path")
    done
    compopt -o filenames 2>/dev/null
    # A directory is not the end of the word.
    [[ ${#COMPREPLY[@]} -eq 1 && ${COMPREPLY[0]} == */ ]] && compopt -o nospace 2>/dev/null
    return 0
}

# Completes the value of the option $1; returns 1 when $1 takes no value.
_portal_token_value() {
    local option=$1 cur=$2
    case $option in
        --backend)
            mapfile -t COMPREPLY < <(compgen -W "auto secret-service file" -- "$cur") ;;
        --account-abstracted)
            mapfile -t COMPREPLY < <(compgen -W "true false" -- "$cur") ;;
        --format)
            mapfile -t COMPREPLY < <(compgen -W "json" -- "$cur") ;;
        --to)
            mapfile -t COMPREPLY < <(compgen -W "secret-service file" -- "$cur") ;;
        -X | --method)
            mapfile -t COMPREPLY < <(compgen -W "GET POST PUT PATCH DELETE HEAD OPTIONS" -- "$cur") ;;
        --config)
            _portal_token_files "" "$cur" ;;
        --data | -d)
            if [[ $cur == @* ]]; then
                _portal_token_files "@" "${cur#@}"
                [[ "@-" == "$cur"* ]] && COMPREPLY+=("@-")
            else
                mapfile -t COMPREPLY < <(compgen -W "@ @-" -- "$cur")
                compopt -o nospace 2>/dev/null
            fi ;;
        --api-host)
            mapfile -t COMPREPLY < <(compgen -W "api.portalhq.io localhost 127.0.0.1" -- "$cur") ;;
        --env | --redirect-url | --email | --timeout | --token-var | --end-user)
            COMPREPLY=() ;;
        *)
            return 1 ;;
    esac
    return 0
}

_portal_token() {
    local cur=${COMP_WORDS[COMP_CWORD]}
    local prev=""
    ((COMP_CWORD > 0)) && prev=${COMP_WORDS[COMP_CWORD - 1]}
    COMPREPLY=()

    # "--option=value": bash splits it at "=" (COMP_WORDBREAKS), into "--option" "=" "value".
    if [[ $cur == "=" && $prev == -* ]]; then
        _portal_token_value "$prev" "" && return 0
    fi
    if [[ $prev == "=" ]] && ((COMP_CWORD > 1)); then
        _portal_token_value "${COMP_WORDS[COMP_CWORD - 2]}" "$cur" && return 0
    fi
    # The same, where "=" is not a word break.
    if [[ $cur == --*=* ]]; then
        local option=${cur%%=*}
        if _portal_token_value "$option" "${cur#*=}"; then
            local i
            for i in "${!COMPREPLY[@]}"; do COMPREPLY[i]="$option=${COMPREPLY[i]}"; done
            return 0
        fi
    fi
    if [[ " $_portal_token_valued_options " == *" $prev "* ]]; then
        _portal_token_value "$prev" "$cur"
        return 0
    fi

    # Find the command: the first word that is neither an option nor an option's value.
    local command="" i word seen=" " positionals=0
    for ((i = 1; i < COMP_CWORD; i++)); do
        word=${COMP_WORDS[i]}
        if [[ $word == -* ]]; then
            seen+="${word%%=*} "
            if [[ " $_portal_token_valued_options " == *" $word "* ]]; then
                # Its value follows, after a "=" word when written "--option=value".
                [[ ${COMP_WORDS[i + 1]} == "=" ]] && ((i += 1))
                ((i += 1))
            fi
            continue
        fi
        if [[ -z $command ]]; then
            command=$word
        else
            ((positionals++))
        fi
    done

    if [[ -z $command ]]; then
        if [[ $cur == -* ]]; then
            mapfile -t COMPREPLY < <(compgen -W "$_portal_token_setting_options --help -h --version -V" -- "$cur")
        else
            local names="" entry
            for entry in "${_portal_token_commands[@]}"; do names+="${entry%%:*} "; done
            mapfile -t COMPREPLY < <(compgen -W "$names" -- "$cur")
        fi
        return 0
    fi

    if [[ $cur == -* ]]; then
        local candidates="" option
        for option in $(_portal_token_command_options "$command") $_portal_token_setting_options --help; do
            # Each option once; the sign-in methods of login exclude one another.
            [[ $seen == *" $option "* ]] && continue
            case $option in
                -X) [[ $seen == *" --method "* ]] && continue ;;
                --method) [[ $seen == *" -X "* ]] && continue ;;
                -d) [[ $seen == *" --data "* ]] && continue ;;
                --data) [[ $seen == *" -d "* ]] && continue ;;
                --email | --google | --apple | --with-token)
                    [[ $seen == *" --email "* || $seen == *" --google "* || $seen == *" --apple "* || $seen == *" --with-token "* ]] && continue ;;
            esac
            candidates+="$option "
        done
        mapfile -t COMPREPLY < <(compgen -W "$candidates" -- "$cur")
        return 0
    fi

    case $command in
        help)
            if ((positionals == 0)); then
                local names="" entry
                for entry in "${_portal_token_commands[@]}"; do
                    [[ ${entry%%:*} == help ]] || names+="${entry%%:*} "
                done
                mapfile -t COMPREPLY < <(compgen -W "$names" -- "$cur")
            fi ;;
        exec)
            # After "--", the command and its arguments.
            [[ " ${COMP_WORDS[*]:1:COMP_CWORD-1} " == *" -- "* ]] && mapfile -t COMPREPLY < <(compgen -c -- "$cur") ;;
        api)
            ((positionals == 0)) && mapfile -t COMPREPLY < <(compgen -W "/api/v3/clients/me" -- "$cur") ;;
    esac
    return 0
}

complete -F _portal_token portal-token
