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

# `trixie_unpack DIR WHAT PACKAGE...` fetches a program of Debian trixie to run without installing
# it: the PACKAGEs (the program's and those of the libraries it loads; WHAT names them in the
# messages) and trixie's own libc are downloaded into DIR/debs through a private apt state in
# DIR/apt, then unpacked afresh under DIR/root. Leaves in `trixie_loader` the start of a command
# that runs a program of DIR/root through trixie's loader, with trixie's libraries. Exits on error.
trixie_unpack() {
    local dir=$1 what=$2 name=${0##*/} deb loader
    shift 2
    private_apt "$dir/apt" "deb http://deb.debian.org/debian trixie main"
    mkdir -p "$dir/debs"
    echo "$name: fetching Debian trixie's $what into $dir" >&2
    if ! timeout 300 apt-get "${apt_options[@]}" update -qq >&2; then
        echo "$name: error: cannot read Debian trixie's package lists (is Debian's archive reachable?)" >&2
        exit 1
    fi
    rm -f "$dir"/debs/*.deb
    local packages=("$@" libc6)
    if ! (cd "$dir/debs" && timeout 300 apt-get "${apt_options[@]}" download -qq "${packages[@]/%//trixie}" >&2); then
        echo "$name: error: cannot download $what and its libraries from Debian trixie" \
            "(is Debian's archive reachable?)" >&2
        exit 1
    fi

    rm -rf "$dir/root.new"
    mkdir -p "$dir/root.new"
    for deb in "$dir"/debs/*.deb; do
        dpkg-deb -x "$deb" "$dir/root.new"
    done
    rm -rf "$dir/root"
    mv "$dir/root.new" "$dir/root"

    loader="$dir/root/usr/lib64/ld-linux-x86-64.so.2"
    [ -x "$loader" ] || loader="$dir/root/lib64/ld-linux-x86-64.so.2"
    if [ ! -e "$loader" ]; then
        echo "$name: error: trixie's libc has no x86-64 loader under $dir/root" >&2
        exit 1
    fi
    trixie_loader="'$loader' --library-path '$dir/root/usr/lib/x86_64-linux-gnu:$dir/root/lib/x86_64-linux-gnu'"
}
