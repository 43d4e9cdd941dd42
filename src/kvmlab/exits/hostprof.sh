#!/bin/sh
# kvmlab's host-side profiler of a guest's QEMU: runs where that QEMU runs (this host, or
# inside a guest hypervisor through its agent), so no Python starts there.
#
#   hostprof.sh run NAME SECONDS RATE PID|@PIDFILE   sample QEMU process PID for SECONDS
#   hostprof.sh clean NAME PID|@PIDFILE              stop and remove what a killed run left
#
# Samples with the software clock (perf record -e cpu-clock -F RATE -g: a TCG guest
# hypervisor has no PMU) and prints, in sections: "=== perf-version", "=== threads-start
# UPTIME HZ PID" and "=== threads-end UPTIME HZ PID" (each QEMU thread's
# /proc/PID/task/TID/stat around the window), "=== report" (perf kvm --host --guest
# report --stdio --children --sort pid,dso,sym -n: host samples as [k] and [.], a vCPU's
# samples in guest mode as [g] or [u]; plain perf report, the fallback, hides those and
# says so in a "=== note" line). perf switches into the traced process's mount namespace
# to read its files and back, which resets a chrooted perf's root (kvmlab's guest
# hypervisors run in a chroot), so perf runs inside QEMU's namespace and root from the
# start (nsenter -m -r) unless they are already ours. The recording goes to a fresh
# directory, mktemp -d /tmp/NAME.XXXXXX there, removed afterwards; 'clean' stops the
# recorder of such a directory (its pid file, checked against its command line) and
# removes it: nothing else is ever removed. NAME is kvmlab_ and letters, digits,
# underscores; SECONDS a decimal number; RATE and PID digits.
# Exit status 2: bad arguments; 3: no such process; 4: perf (or nsenter) missing or not
# runnable for this kernel; 5: perf record failed; 6: perf not permitted
# (kernel.perf_event_paranoid, not root); 7: perf report failed.
set -u
LC_ALL=C
export LC_ALL
usage() {
	echo "usage: hostprof.sh run NAME SECONDS RATE PID|@PIDFILE | clean NAME PID|@PIDFILE${1:+ ($1)}" >&2
	exit 2
}
[ $# -ge 3 ] || usage
mode=$1
name=$2
case $name in
kvmlab_*[!A-Za-z0-9_]* | kvmlab_) usage "bad NAME" ;;
kvmlab_*) ;;
*) usage "bad NAME" ;;
esac
case $mode in
run)
	[ $# -eq 5 ] || usage
	secs=$3
	rate=$4
	pid=$5
	case $secs in
	'' | . | *[!0-9.]* | *.*.*) usage "bad SECONDS" ;;
	esac
	case $rate in
	'' | *[!0-9]*) usage "bad RATE" ;;
	esac
	;;
clean)
	[ $# -eq 3 ] || usage
	secs=0
	rate=0
	pid=$3
	;;
*) usage ;;
esac
case $pid in
@/*) { read -r pid <"${pid#@}"; } 2>/dev/null || {
	[ "$mode" = clean ] && exit 0
	echo "kvmlab-hostprof: cannot read the pid file ${pid#@}" >&2
	exit 3
} ;;
esac
case $pid in
'' | *[!0-9]*)
	echo "kvmlab-hostprof: not a process id: '$pid'" >&2
	exit 3
	;;
esac
[ -d "/proc/$pid/task" ] || {
	[ "$mode" = clean ] && exit 0
	echo "kvmlab-hostprof: no process $pid" >&2
	exit 3
}
if [ "$mode" = run ]; then
	command -v perf >/dev/null || {
		echo "kvmlab-hostprof: perf is not installed" >&2
		exit 4
	}
	# A distribution's perf wrapper fails here when no perf matches the running kernel.
	version=$(perf --version 2>&1) || {
		echo "kvmlab-hostprof: perf does not run for kernel $(uname -r): $(echo "$version" | head -n 3 | tr '\n' ' ')" >&2
		exit 4
	}
	read -r paranoid </proc/sys/kernel/perf_event_paranoid 2>/dev/null || paranoid=2
	if [ "$(id -u)" != 0 ] && [ "$paranoid" -gt 1 ]; then
		echo "kvmlab-hostprof: perf may not sample the kernel: kernel.perf_event_paranoid is $paranoid and this is not root" >&2
		exit 6
	fi
fi
# shellcheck disable=SC2016
body='
set -u
name=$1 mode=$2 secs=$3 rate=$4 pid=$5
if [ "$mode" = clean ]; then
	for d in /tmp/"$name".*; do
		[ -d "$d" ] && [ ! -L "$d" ] || continue
		if read -r p <"$d/perf.pid" 2>/dev/null; then
			case $(tr "\0" " " <"/proc/$p/cmdline" 2>/dev/null) in
			*perf*"$d/perf.data"*) kill "$p" 2>/dev/null ;;
			esac
		fi
		rm -f "$d/perf.data" "$d/perf.data.old" "$d/perf.pid" "$d/err" "$d/out" "$d/rec"
		rmdir "$d" 2>/dev/null || echo "kvmlab-hostprof: could not remove $d" >&2
	done
	exit 0
fi
d=$(mktemp -d "/tmp/$name.XXXXXX") || {
	echo "kvmlab-hostprof: cannot create a directory in /tmp (QEMU'\''s mount namespace)" >&2
	exit 5
}
f=$d/perf.data
rec=
clean() {
	[ -n "$rec" ] && kill "$rec" 2>/dev/null && wait "$rec" 2>/dev/null
	rm -f "$f" "$f.old" "$d/perf.pid" "$d/err" "$d/out" "$d/rec"
	rmdir "$d"
}
trap clean EXIT
trap "exit 130" INT TERM HUP
hz=$(getconf CLK_TCK 2>/dev/null) || hz=100
threads() {
	read -r up _ </proc/uptime
	echo "=== $1 $up $hz $pid"
	cat "/proc/$pid/task"/*/stat 2>/dev/null
	echo
}
echo "=== perf-version"
perf --version
threads threads-start
# Not -q: the message of perf itself is the reason kvmlab gives when the recording fails
# (on success its "[ perf record: ... ]" lines stay in $d/err, unread).
record() {
	perf record -e cpu-clock -F "$rate" -g -p "$pid" -o "$f" -- sleep "$secs" >"$d/rec" 2>"$d/err" &
	rec=$!
	echo "$rec" >"$d/perf.pid"
	wait "$rec"
	status=$?
	rec=
}
record
# A perf without the 2023 upstream fix "synthesize thread map: ignore exited threads" exits
# 255 printing nothing when a thread of the process exits while it lists the threads (QEMU
# thread-pool workers come and go); Debian 12 perf 6.1 did so once in a few fresh test runs
# inside a TCG L1. Once, it is run again, and the profile says so (its window then starts
# at the first run).
if [ "$status" -ne 0 ] && [ ! -s "$d/err" ] && [ ! -s "$d/rec" ]; then
	echo "=== note perf record exited $status and printed nothing; it was run again"
	record
fi
threads threads-end
if [ "$status" -ne 0 ] || [ ! -s "$f" ]; then
	cat "$d/err" "$d/rec" >&2
	if [ ! -s "$d/err" ] && [ ! -s "$d/rec" ]; then # perf said nothing: say what is known
		if [ "$status" -ne 0 ]; then
			echo "kvmlab-hostprof: perf record exited $status and printed nothing" >&2
		else
			echo "kvmlab-hostprof: perf record wrote no data (exit 0, $(wc -c <"$f" 2>/dev/null || echo no) bytes in its file; pid $pid $(test -d "/proc/$pid" && echo still runs || echo has exited))" >&2
		fi
	fi
	if grep -qiE "paranoid|not permitted|permission denied|EACCES|access to performance monitoring" "$d/err"; then
		exit 6
	fi
	exit 5
fi
report() { # perf report with its options; guest samples shown only under perf kvm --guest
	"$@" --stdio --children --percentage absolute --sort pid,dso,sym -n -g none >"$d/out" 2>"$d/err"
}
if ! report perf kvm --host --guest -i "$f" report; then
	why=$(head -n 1 "$d/err")
	report perf report -i "$f" || {
		cat "$d/err" >&2
		exit 7
	}
	echo "=== note perf kvm --host --guest report failed ($why): guest-mode samples are not shown"
fi
echo "=== report"
cat "$d/out"
'
if [ "$(readlink /proc/self/ns/mnt)" = "$(readlink "/proc/$pid/ns/mnt" 2>/dev/null)" ] &&
	[ "$(readlink /proc/self/root)" = "$(readlink "/proc/$pid/root" 2>/dev/null)" ]; then
	exec sh -c "$body" hostprof.sh "$name" "$mode" "$secs" "$rate" "$pid"
fi
command -v nsenter >/dev/null || {
	echo "kvmlab-hostprof: nsenter is not installed (QEMU runs in another mount namespace or root)" >&2
	exit 4
}
exec nsenter -t "$pid" -m -r -w sh -c "$body" hostprof.sh "$name" "$mode" "$secs" "$rate" "$pid"
