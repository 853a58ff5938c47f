# Sourced by the scripts that fetch from Debian's archive without touching the system's apt:
# `private_apt DIR LINE` points apt at a private state directory DIR whose only source is the
# sources.list LINE, and leaves the options to pass to apt-get in the array apt_options.
private_apt() {
    local apt_dir=$1
    mkdir -p "$apt_dir/lists/partial" "$apt_dir/cache/archives/partial"
    printf '%s\n' "$2" > "$apt_dir/sources.list"
    apt_options=(
        -o Dir::Etc::SourceList="$apt_dir/sources.list" -o Dir::Etc::SourceParts=/dev/null
        -o Dir::State::Lists="$apt_dir/lists" -o Dir::Cache="$apt_dir/cache"
        -o Acquire::Retries=2 -o Acquire::http::Timeout=30 -o Acquire::https::Timeout=30
        # The private lists are read as the user running this; apt's sandbox user may not reach them.
        -o APT::Sandbox::User=root
    )
    [ "$(id -u)" -eq 0 ] || apt_options+=(-o Debug::NoLocking=1)
}
