#!/bin/sh
# kvmlab's perf kvm stat recorder: runs where the guest's KVM runs.
#
#   perf.sh PID|@PIDFILE SECONDS NAME
#
# Records `perf kvm stat record -p PID` for SECONDS and prints the vmexit, ioport and mmio
# reports. perf switches into the traced process's mount namespace to read its files and
# back, which resets a chrooted perf's root (kvmlab's guest hypervisors run in a chroot), so
# perf runs inside QEMU's namespace and root from the start (nsenter -m -r). The recording
# goes to a fresh directory (mktemp -d /tmp/NAME.XXXXXX there), removed afterwards: nothing
# else is ever removed. NAME is kvmlab_ and letters, digits, underscores; SECONDS a decimal
# number; PID digits.
# Exit status 2: bad arguments; 3: no such process; 4: perf or nsenter missing; 5: perf failed.
set -u
LC_ALL=C
export LC_ALL
usage() {
	echo "usage: perf.sh PID|@PIDFILE SECONDS NAME${1:+ ($1)}" >&2
	exit 2
}
[ $# -eq 3 ] || usage
pid=$1
secs=$2
name=$3
case $name in
kvmlab_*[!A-Za-z0-9_]* | kvmlab_) usage "bad NAME" ;;
kvmlab_*) ;;
*) usage "bad NAME" ;;
esac
case $secs in
'' | . | *[!0-9.]* | *.*.*) usage "bad SECONDS" ;;
esac
case $pid in
@/*) { read -r pid <"${pid#@}"; } 2>/dev/null || {
	echo "kvmlab-perf: cannot read the pid file ${1#@}" >&2
	exit 3
} ;;
esac
case $pid in
'' | *[!0-9]*)
	echo "kvmlab-perf: not a process id: '$pid'" >&2
	exit 3
	;;
esac
[ -d "/proc/$pid" ] || {
	echo "kvmlab-perf: no process $pid" >&2
	exit 3
}
for tool in perf nsenter; do
	command -v "$tool" >/dev/null || {
		echo "kvmlab-perf: $tool is not installed (apt-get install linux-perf util-linux)" >&2
		exit 4
	}
done
# shellcheck disable=SC2016
exec nsenter -t "$pid" -m -r -w sh -c '
d=$(mktemp -d "/tmp/$3.XXXXXX") || {
	echo "kvmlab-perf: cannot create a directory in /tmp (QEMU'\''s mount namespace)" >&2
	exit 5
}
f=$d/perf.data
trap "rm -f \"\$f\" \"\$d/err\"; rmdir \"\$d\"" EXIT
trap "exit 130" INT TERM HUP
if ! perf kvm stat record -q -o "$f" -p "$1" sleep "$2" >/dev/null 2>"$d/err"; then
	cat "$d/err" >&2
	exit 5
fi
for e in vmexit ioport mmio; do perf kvm -i "$f" stat report --event=$e 2>/dev/null; done
' perf.sh "$pid" "$secs" "$name"
