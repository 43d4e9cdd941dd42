#!/bin/bash
# fetch.sh - idempotently set up QEMU 10.0 (bookworm-backports) as a private,
# second QEMU under /opt/kvmlab-qemu10 on Debian 12, WITHOUT installing or
# upgrading any host package (host QEMU 7.2 stays untouched).
#
# What it does:
#  1. adds bookworm-backports (same mirror as the main Debian entry) in
#     /etc/apt/sources.list.d/backports.list, runs apt-get update, checks that
#     apt's default pinning keeps 7.2 as the candidate (backports prio 100).
#  2. apt-get download's the backports qemu-system-x86/-common/-data + seabios
#     (+ ipxe-qemu, same version as host, so the tree is self-contained) and any
#     dependency whose required version is newer than the host's (none today).
#  3. dpkg -x everything into /opt/kvmlab-qemu10/root, adds the
#     root/usr/bin/qemu-bundle -> ../.. symlink (QEMU's get_relocated_path()
#     then maps ALL compiled-in dirs -- firmware path, data dir, module dir --
#     into the private root, so the host's 7.2 modules/firmware are never used),
#     and writes the wrapper /opt/kvmlab-qemu10/qemu-system-x86_64.
#  4. sanity checks (--version, -machine help, -accel help, -device help) and
#     dumps QMP migrate capabilities/parameters of 10.0 and host 7.2 to
#     qmp-replies-10.0.json / qmp-replies-7.2.json. Never boots a guest
#     (-S: vCPUs never start; quit is sent right away).
set -euo pipefail
export LC_ALL=C

BASE=/opt/kvmlab-qemu10
ROOT=$BASE/root
DEBS=$BASE/debs
WRAPPER=$BASE/qemu-system-x86_64
SUITE=bookworm-backports
LIST=/etc/apt/sources.list.d/backports.list
APT="apt-get -o DPkg::Lock::Timeout=600"
PKGS="qemu-system-x86 qemu-system-common qemu-system-data"

[ "$(id -u)" = 0 ] || { echo "run as root" >&2; exit 1; }

# ---------------------------------------------------------------- 1. apt
find_mirror() {
    local u
    # one-line format
    u=$(grep -hsE '^\s*deb\s' /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null \
        | grep -v -- '-security' | grep -v backports | grep -wE 'bookworm' \
        | sed -E 's/\[[^]]*\]//' | awk '{print $2; exit}')
    if [ -z "$u" ]; then
        # deb822 format: first stanza with Types: deb and Suites containing bookworm
        u=$(awk 'BEGIN{RS="";FS="\n"}
                 /(^|\n)Types:[^\n]*[ \t]deb([ \t]|\n|$)/ && /(^|\n)Suites:[^\n]*bookworm([ \t\n]|$)/ {
                     for(i=1;i<=NF;i++) if ($i ~ /^URIs:/) { sub(/^URIs:[ \t]*/,"",$i); split($i,a," "); print a[1]; exit }
                 }' /etc/apt/sources.list.d/*.sources 2>/dev/null)
    fi
    [ -n "$u" ] || { echo "cannot determine Debian mirror URI" >&2; exit 1; }
    echo "${u%/}"
}
MIRROR=$(find_mirror)
LINE="deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $MIRROR $SUITE main"
if [ "$(cat "$LIST" 2>/dev/null)" != "$LINE" ]; then
    echo "$LINE" > "$LIST"
    echo "wrote $LIST: $LINE"
fi
$APT update -q

# backports must NOT be the candidate (default prio 100 < 500)
# (outputs are captured first: "cmd | grep -q" can fail with SIGPIPE under pipefail)
pol=$(apt-cache policy qemu-system-x86)
cand=$(echo "$pol" | awk '/Candidate:/{print $2}')
case "$cand" in *bpo*) echo "ERROR: backports version is candidate ($cand); fix pinning" >&2; exit 1;; esac
grep -q "$SUITE" <<< "$pol" || { echo "ERROR: no $SUITE qemu-system-x86" >&2; exit 1; }
sim=$(apt-get -s dist-upgrade 2>/dev/null)
if grep -E '^Inst' <<< "$sim" | grep -q 'bpo'; then
    echo "ERROR: a dist-upgrade would pull backports packages" >&2; exit 1
fi
echo "host qemu-system-x86 candidate: $cand"
echo "backports qemu-system-x86:      $(apt-cache show qemu-system-x86/$SUITE | awk '/^Version:/{print $2; exit}')"

# ---------------------------------------------------------------- 2. download
mkdir -p "$DEBS"
chown _apt "$DEBS" 2>/dev/null || true   # lets apt download sandboxed

# download PKG/RELEASE unless a .deb with the same name+version is already there
fetch_deb() {   # $1=pkg  $2=release (suite or "host")
    local pkg=$1 rel=$2 ver f
    if [ "$rel" = host ]; then
        ver=$(dpkg-query -W -f='${Version}' "$pkg" 2>/dev/null || true)
        [ -n "$ver" ] || ver=$(apt-cache policy "$pkg" | awk '/Candidate:/{print $2}')
    else
        ver=$(apt-cache show "$pkg/$rel" | awk '/^Version:/{print $2; exit}')
    fi
    for f in "$DEBS/${pkg}"_*.deb; do
        [ -e "$f" ] || continue
        if [ "$(dpkg-deb -f "$f" Package)" = "$pkg" ] && [ "$(dpkg-deb -f "$f" Version)" = "$ver" ]; then
            echo "have $pkg $ver"; return 0
        fi
        rm -f "$f"   # stale version
    done
    (cd "$DEBS" && apt-get download -q "$pkg=$ver")
}

# is the dependency "name (op ver)" satisfied by what dpkg has installed?
host_satisfies() {  # $1 = single dependency atom, e.g. "libfoo1 (>= 1.2)"
    local name cons op v inst o
    name=$(echo "$1" | awk '{print $1}' | sed 's/:any$//')
    cons=$(echo "$1" | sed -n 's/.*(\(.*\)).*/\1/p')
    inst=$(dpkg-query -W -f='${db:Status-Abbrev} ${Version}' "$name" 2>/dev/null | awk '$1=="ii"{print $2}')
    [ -n "$inst" ] || return 1
    [ -n "$cons" ] || return 0
    op=${cons%% *}; v=${cons#* }
    case $op in ">=") o=ge;; ">>") o=gt;; "=") o=eq;; "<<") o=lt;; "<=") o=le;; *) return 1;; esac
    dpkg --compare-versions "$inst" $o "$v"
}

# Resolve: start with the qemu packages, add any Depends the host can't satisfy
# (taken from backports); repeat for the newly added packages.
WANT="$PKGS"
queue="$PKGS"
while [ -n "$queue" ]; do
    next=""
    for p in $queue; do
        deps=$(apt-cache show "$p/$SUITE" | awk '/^(Pre-)?Depends:/{sub(/^(Pre-)?Depends: /,""); print}' | tr ',' '\n' | sed 's/^ *//;s/ *$//')
        while IFS= read -r dep; do
            [ -n "$dep" ] || continue
            ok=""; first=""
            IFS='|' read -ra alts <<< "$dep"
            for a in "${alts[@]}"; do
                a=$(echo "$a" | sed 's/^ *//;s/ *$//'); n=${a%% *}
                [ -z "$first" ] && first=$n
                if echo " $WANT " | grep -q " $n "; then ok=1; break; fi
                if host_satisfies "$a"; then ok=1; break; fi
            done
            [ -n "$ok" ] && continue
            if apt-cache show "$first/$SUITE" >/dev/null 2>&1; then
                echo "dependency not satisfied by host: '$dep' -> taking $first from $SUITE"
                WANT="$WANT $first"; next="$next $first"
            else
                echo "ERROR: dependency '$dep' not satisfied by host and not in $SUITE" >&2; exit 1
            fi
        done <<< "$deps"
    done
    queue=$(echo $next)
done
echo "packages from $SUITE: $WANT"
for p in $WANT; do fetch_deb "$p" "$SUITE"; done
# ipxe-qemu: unversioned dependency, same version as the host -> unpack it too so
# the private tree has its own /usr/lib/ipxe/qemu (NIC option ROMs).
fetch_deb ipxe-qemu host
KEEP="$WANT ipxe-qemu"
# drop .debs of packages no longer wanted
for f in "$DEBS"/*.deb; do
    [ -e "$f" ] || continue
    echo " $KEEP " | grep -q " $(dpkg-deb -f "$f" Package) " || rm -f "$f"
done

# ---------------------------------------------------------------- 3. unpack + wrapper
rm -rf "$ROOT.new"; mkdir -p "$ROOT.new"
for f in "$DEBS"/*.deb; do dpkg -x "$f" "$ROOT.new"; done
# qemu-bundle: QEMU looks for <dir of binary>/qemu-bundle and, if present,
# prefixes every compiled-in path (firmware path /usr/share/qemu:/usr/share/seabios:
# /usr/lib/ipxe/qemu, module dir /usr/lib/x86_64-linux-gnu/qemu, helpers) with it.
ln -sfn ../.. "$ROOT.new/usr/bin/qemu-bundle"
rm -rf "$ROOT"; mv "$ROOT.new" "$ROOT"

cat > "$WRAPPER.tmp" <<'EOF'
#!/bin/sh
# Private QEMU 10.0 (bookworm-backports) - generated by /opt/kvmlab-qemu10/fetch.sh
# The binary finds firmware (usr/share/qemu, usr/share/seabios, usr/lib/ipxe/qemu)
# and modules (usr/lib/x86_64-linux-gnu/qemu) inside $R via the
# $R/usr/bin/qemu-bundle -> ../.. symlink; never the host's 7.2 files.
R=/opt/kvmlab-qemu10/root
if [ ! -L "$R/usr/bin/qemu-bundle" ]; then
    echo "$0: $R/usr/bin/qemu-bundle missing - would load host 7.2 modules; rerun fetch.sh" >&2
    exit 1
fi
# belt and braces: module dir searched first even without the bundle
QEMU_MODULE_DIR=$R/usr/lib/x86_64-linux-gnu/qemu
export QEMU_MODULE_DIR
exec "$R/usr/bin/qemu-system-x86_64" "$@"
EOF
chmod 755 "$WRAPPER.tmp"; mv "$WRAPPER.tmp" "$WRAPPER"

# ---------------------------------------------------------------- 4. checks (no guest is booted)
echo "== checks"
missing=$(ldd "$ROOT/usr/bin/qemu-system-x86_64" | grep 'not found' || true)
[ -z "$missing" ] || { echo "ERROR: missing libs: $missing" >&2; exit 1; }
"$WRAPPER" --version | head -1
"$WRAPPER" -L help | sed 's/^/  firmware dir: /'
mh=$("$WRAPPER" -machine help); ah=$("$WRAPPER" -accel help)
grep -qE '^q35 ' <<< "$mh" || { echo "ERROR: no q35" >&2; exit 1; }; echo "  -machine help: $(echo "$mh" | grep -E '^q35 ')"
grep -qx 'tcg' <<< "$ah" || { echo "ERROR: no tcg" >&2; exit 1; }; echo "  -accel help: $(echo "$ah" | tail -n +2 | tr '\n' ' ')"
devout=$("$WRAPPER" -device help 2>&1) || { echo "ERROR: -device help failed" >&2; echo "$devout" >&2; exit 1; }
if grep -qiE 'failed to (open|initialize) module' <<< "$devout"; then echo "ERROR: module errors:"; echo "$devout" | grep -i module >&2; exit 1; fi
echo "  -device help: OK ($(grep -c '^name ' <<< "$devout") devices)"

qmp_dump() {  # $1 = qemu binary/wrapper, $2 = output json
    local err
    err=$(mktemp)
    printf '%s\n' '{"execute":"qmp_capabilities"}' \
                  '{"execute":"query-migrate-capabilities"}' \
                  '{"execute":"query-migrate-parameters"}' \
                  '{"execute":"quit"}' \
      | timeout 60 "$1" -machine q35 -accel tcg -nodefaults -display none -S -qmp stdio > "$2" 2> "$err"
    if [ -s "$err" ]; then echo "  stderr of $1:"; sed 's/^/    /' "$err"; fi
    if grep -qi 'could not load' "$err"; then rm -f "$err"; echo "ERROR: firmware not found" >&2; exit 1; fi
    rm -f "$err"
    echo "  $2: $(wc -l < "$2") JSON lines"
}
qmp_dump "$WRAPPER" "$BASE/qmp-replies-10.0.json"
qmp_dump /usr/bin/qemu-system-x86_64 "$BASE/qmp-replies-7.2.json"
echo "done. wrapper: $WRAPPER"
