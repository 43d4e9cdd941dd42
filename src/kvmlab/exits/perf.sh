#!/bin/sh
# kvmlab's perf kvm stat recorder: runs where the guest's KVM runs.
#
#   perf.sh PID|@PIDFILE SECONDS NAME
#
# Records `perf kvm stat record -p PID` for SECONDS and prints the vmexit, ioport and mmio
# reports. perf switches into the traced process's mount namespace to read its files and
# back, which resets a chrooted perf's root (kvmlab's guest hypervisors run in a chroot), so
# perf runs inside QEMU's namespace and root from the start (nsenter -m -r).
# Exit status 3: no such process; 4: perf or nsenter missing; 5: perf failed.
pid=$1
secs=$2
name=$3
case $pid in
@*) { read -r pid <"${pid#@}"; } 2>/dev/null || {
	echo "kvmlab-perf: cannot read the pid file ${1#@}" >&2
	exit 3
} ;;
esac
[ -d "/proc/$pid" ] || {
	echo "kvmlab-perf: no process $pid" >&2
	exit 3
}
for tool in perf nsenter; do
	command -v $tool >/dev/null || {
		echo "kvmlab-perf: $tool is not installed (apt-get install linux-perf util-linux)" >&2
		exit 4
	}
done
# shellcheck disable=SC2016
exec nsenter -t "$pid" -m -r -w sh -c '
f=/tmp/$3.perf.data
trap "rm -f $f $f.err" EXIT
if ! perf kvm stat record -q -o "$f" -p "$1" sleep "$2" >/dev/null 2>"$f.err"; then
	cat "$f.err" >&2
	exit 5
fi
for e in vmexit ioport mmio; do perf kvm -i "$f" stat report --event=$e 2>/dev/null; done
' perf.sh "$pid" "$secs" "$name"
