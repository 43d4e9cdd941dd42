#!/bin/sh
# kvmlab's VM-exit tracer: runs where the guest's KVM runs (the host, or inside a guest
# hypervisor through its agent), so no Python starts there.
#
#   trace.sh run NAME SECONDS PID   profile QEMU process PID (or @PIDFILE) for SECONDS
#   trace.sh clean NAME             remove what a killed run NAME left behind
#
# Everything lives in a private tracefs instance (instances/NAME) filtered to PID's
# threads (set_event_pid), with in-kernel hist triggers: counts per exit reason and vCPU,
# port I/O by port, MSR exits by index, MMIO by address, and each exit's handling time
# (kvm_exit -> kvm_entry) through a synthetic event NAME_lat. The kernel aggregates, so
# the cost does not grow with output (Documentation/trace/histogram.rst). Output: the
# sections "=== cpu-start", "=== window SECONDS", "=== cpu-end", "=== hist FILE" (one per
# histogram). Exit status 5: hist triggers unavailable; 4: no tracefs or no permission;
# 3: no such process; 2: bad arguments. NAME is kvmlab_ and letters, digits, underscores (it
# is removed by 'clean', so nothing but kvmlab's own instance and event is ever touched);
# SECONDS a decimal number; PID digits.
set -u
LC_ALL=C
export LC_ALL
usage() {
	echo "usage: trace.sh run NAME SECONDS PID|@PIDFILE | clean NAME${1:+ ($1)}" >&2
	exit 2
}
[ $# -ge 2 ] || usage
mode=$1
name=$2
case $name in
kvmlab_*[!A-Za-z0-9_]* | kvmlab_) usage "bad NAME" ;;
kvmlab_*) ;;
*) usage "bad NAME" ;;
esac
T=/sys/kernel/tracing
[ -d $T/instances ] || T=/sys/kernel/debug/tracing
I=$T/instances/$name
S=${name}_lat

# The triggers, in the order they are set; removed in reverse (the synthetic event's
# hist first, then the onmatch that generates it, then the variables it reads).
EXIT_COUNT='hist:keys=isa,exit_reason,vcpu_id:vals=hitcount:size=8192'
EXIT_START='hist:keys=vcpu_id:ts0=common_timestamp:r=exit_reason'
ENTRY_LAT="hist:keys=vcpu_id:lat=common_timestamp-\$ts0:onmatch(kvm.kvm_exit).trace($S,\$r,\$lat)"
LAT_SUM='hist:keys=reason:vals=hitcount,lat:size=1024'
LAT_LOG='hist:keys=reason,lat.log2:vals=hitcount:size=8192'
PIO='hist:keys=port,rw,size:vals=hitcount:size=4096'
MSR='hist:keys=ecx,write:vals=hitcount:size=4096'
MMIO='hist:keys=gpa,type:vals=hitcount:size=8192'

untrigger() { # FILE TRIGGER: remove a trigger if set (quietly)
	[ -e "$1" ] && echo "!$2" >>"$1" 2>/dev/null
}

clean() {
	[ -d "$I" ] || return 0
	E=$I/events
	untrigger "$E/synthetic/$S/trigger" "$LAT_LOG"
	untrigger "$E/synthetic/$S/trigger" "$LAT_SUM"
	untrigger "$E/kvm/kvm_entry/trigger" "$ENTRY_LAT"
	untrigger "$E/kvm/kvm_exit/trigger" "$EXIT_START"
	untrigger "$E/kvm/kvm_exit/trigger" "$EXIT_COUNT"
	untrigger "$E/kvm/kvm_pio/trigger" "$PIO"
	untrigger "$E/kvm/kvm_msr/trigger" "$MSR"
	untrigger "$E/kvm/kvm_mmio/trigger" "$MMIO"
	grep -q "^$S[[:space:]]" "$T/synthetic_events" 2>/dev/null &&
		echo "!$S" >>"$T/synthetic_events" 2>/dev/null
	rmdir "$I" 2>/dev/null || { echo "kvmlab-trace: could not remove $I" >&2; return 1; }
}

cpu() { # the QEMU process's threads: tid, utime, stime, guest_time (clock ticks), comm
	# builtins only (read, set): forks are slow in an emulated guest hypervisor
	read -r up _ </proc/uptime
	echo "=== $1 $up $hz"
	for t in "/proc/$pid/task"/*; do
		{ read -r s <"$t/stat" && read -r c <"$t/comm"; } 2>/dev/null || continue
		# fields after the ")" closing comm: utime is the 12th, stime 13th, guest_time 41st
		set -f
		# shellcheck disable=SC2086
		set -- ${s##*) }
		set +f
		[ $# -ge 41 ] && echo "${t##*/} ${12} ${13} ${41} $c"
	done
}

trigger() { # FILE TRIGGER
	echo "$2" 2>/dev/null >>"$1" && return 0
	if grep -q "hist" "$T/README" 2>/dev/null; then
		echo "kvmlab-trace: the kernel refused '$2' on ${1#"$I"/}: $(tail -n 3 "$T/error_log" 2>/dev/null)" >&2
	else
		echo "kvmlab-trace: this kernel has no hist triggers (CONFIG_HIST_TRIGGERS)" >&2
	fi
	exit 5
}

case $mode in
clean)
	clean
	exit $?
	;;
run) ;;
*)
	usage
	;;
esac

[ $# -eq 4 ] || usage
seconds=$3
pid=$4
case $seconds in
'' | . | *[!0-9.]* | *.*.*) usage "bad SECONDS" ;;
esac
case $pid in
@/*) { read -r pid <"${pid#@}"; } 2>/dev/null || {
	echo "kvmlab-trace: cannot read the pid file ${4#@}" >&2
	exit 3
} ;;
esac
case $pid in
'' | *[!0-9]*)
	echo "kvmlab-trace: not a process id: '$pid'" >&2
	exit 3
	;;
esac
[ -w $T/instances ] || {
	echo "kvmlab-trace: cannot write $T/instances (tracefs not mounted, or not root)" >&2
	exit 4
}
[ -d $T/events/kvm ] || {
	echo "kvmlab-trace: no kvm trace events (is the kvm module loaded?)" >&2
	exit 4
}
[ -d "/proc/$pid/task" ] || {
	echo "kvmlab-trace: no process $pid" >&2
	exit 3
}
hz=$(getconf CLK_TCK 2>/dev/null) || hz=100
case $hz in '' | *[!0-9]* | 0) hz=100 ;; esac
mkdir "$I" || exit 4
trap 'clean; exit 130' INT TERM HUP
trap 'clean' EXIT
E=$I/events
ls "/proc/$pid/task" | tr '\n' ' ' >"$I/set_event_pid" || exit 4
cpu cpu-start
echo "$S u32 reason; u64 lat" >>"$T/synthetic_events" || exit 5
trigger "$E/kvm/kvm_exit/trigger" "$EXIT_COUNT"
trigger "$E/kvm/kvm_exit/trigger" "$EXIT_START"
trigger "$E/kvm/kvm_entry/trigger" "$ENTRY_LAT"
trigger "$E/synthetic/$S/trigger" "$LAT_SUM"
trigger "$E/synthetic/$S/trigger" "$LAT_LOG"
trigger "$E/kvm/kvm_pio/trigger" "$PIO"
trigger "$E/kvm/kvm_msr/trigger" "$MSR"
trigger "$E/kvm/kvm_mmio/trigger" "$MMIO"
sleep "$seconds"
# Pause every histogram (builtins only: no fork between the end of the window and this).
echo "$EXIT_COUNT:pause" >>"$E/kvm/kvm_exit/trigger"
echo "$LAT_SUM:pause" >>"$E/synthetic/$S/trigger"
echo "$LAT_LOG:pause" >>"$E/synthetic/$S/trigger"
echo "$PIO:pause" >>"$E/kvm/kvm_pio/trigger"
echo "$MSR:pause" >>"$E/kvm/kvm_msr/trigger"
echo "$MMIO:pause" >>"$E/kvm/kvm_mmio/trigger"
cpu cpu-end
for f in kvm/kvm_exit "synthetic/$S" kvm/kvm_pio kvm/kvm_msr kvm/kvm_mmio; do
	echo "=== hist ${f##*/}"
	cat "$E/$f/hist"
done
