#!/bin/busybox sh
# kvmlab guest init (PID 1 of the default guest image; see kvmlab/guest/initramfs.py).
#
# Boots a guest whose root is the host's root, shared read-only (9p or virtio-fs) under
# a tmpfs overlay, and starts the host's qemu-ga on the virtio-serial port named
# org.qemu.guest_agent.0. Kernel command-line parameters:
#   kvmlab.share=9p|virtiofs|none  how the host root is shared (default 9p; none: the
#                              initramfs is the root and carries qemu-ga, see standalone.py)
#   kvmlab.tag=TAG             its mount tag (default hostfs)
#   kvmlab.cache=mmap|loose    9p's cache mode (default mmap: host changes are seen; loose
#                              keeps what was read, so tools start faster in a nested guest,
#                              but a host file changed after boot may read stale)
#   kvmlab.hostname=NAME       the guest's hostname (default kvmlab)
#   kvmlab.kvm=1               load kvm + kvm_amd/kvm_intel with nested=1 (guest hypervisor)
#   kvmlab.vhost=1             load vhost_net and tun
#   MODULE.PARAM=VALUE         a parameter for a module init loads, as modprobe applies it
# Markers "kvmlab: EVENT t=UPTIME" on the console time the boot stages; on failure
# "kvmlab: error: REASON" is followed by the marker "init failed" and a power-off.
#
# Each command busybox runs here is a fork and an exec, ~0.1 s in an L2 guest (KVM inside a
# TCG L1): files are read with the shell's own `read`, not `cat`, nothing on the boot path
# is computed in a $(...) subshell, and a group of modules is one modprobe.

/bin/busybox --install -s /bin
export PATH=/bin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev

mark() {
	read -r up _ </proc/uptime
	echo "kvmlab: $* t=$up"
}

# The reason goes on its own line so that the marker's event is exactly "init failed".
fail() {
	echo "kvmlab: error: $*"
	mark "init failed"
	poweroff -f
}

mark "init start"
read -r rel </proc/sys/kernel/osrelease
read -r cmdline </proc/cmdline
share=9p
tag=hostfs
cache=mmap
name=kvmlab
kvm=0
vhost=0
set -f
for arg in $cmdline; do
	case "$arg" in
	kvmlab.share=*) share=${arg#*=} ;;
	kvmlab.tag=*) tag=${arg#*=} ;;
	kvmlab.cache=*) cache=${arg#*=} ;;
	kvmlab.hostname=*) name=${arg#*=} ;;
	kvmlab.kvm=*) kvm=${arg#*=} ;;
	kvmlab.vhost=*) vhost=${arg#*=} ;;
	esac
done
set +f

# load GROUP: the group's modules not loaded yet, in one busybox modprobe (one exec, not
# one per module). It follows the shipped modules.dep; options come from
# /etc/modprobe.d/kvmlab.conf (e.g. kvm_amd nested=1), then from the kernel command line's
# MODULE.PARAM=VALUE words (e.g. kvm_amd.npt=0 for a guest hypervisor's experiments).
load() {
	found=
	mods=
	while read -r group mod _; do
		[ "$group" = "$1" ] || continue
		found=1
		[ -d "/sys/module/$mod" ] || mods="$mods $mod"
	done </etc/kvmlab/modules
	[ -n "$found" ] || return 1
	[ -n "$mods" ] || return 0
	# shellcheck disable=SC2086 # a word list on purpose
	modprobe -a $mods
}

load base || fail "loading virtio modules"
[ "$share" = none ] || load "$share" || fail "loading $share modules (kernel $rel)"
for dev in /sys/bus/virtio/devices/*/device; do
	[ -e "$dev" ] || continue
	read -r id <"$dev"
	case $id in
	0x0001) load net ;;
	0x0002) load blk ;;
	0x0008) load scsi ;;
	0x0013) load vsock ;;
	esac || mark "warning: cannot load the driver for $dev"
done
for dev in /sys/bus/pci/devices/*; do
	[ -e "$dev/vendor" ] || continue
	read -r vendor <"$dev/vendor"
	read -r id <"$dev/device"
	case "$vendor $id" in
	"0x8086 0x10d3") load e1000e || mark "warning: no e1000e driver for $dev in this kernel" ;;
	esac
done
if [ "$kvm" = 1 ]; then
	if grep -qw svm /proc/cpuinfo; then
		load kvm_amd || mark "warning: cannot load kvm_amd"
	elif grep -qw vmx /proc/cpuinfo; then
		load kvm_intel || mark "warning: cannot load kvm_intel"
	else
		mark "warning: kvmlab.kvm=1 but the vCPU has neither svm nor vmx"
	fi
fi
[ "$vhost" = 1 ] && { load vhost || mark "warning: cannot load vhost_net"; }
mark "modules loaded"

if [ "$share" = none ]; then
	# The self-contained image (migratable guests): the initramfs is the root, with
	# qemu-ga, its libraries and kvmlab-dirty in it; nothing of the host is mounted.
	r=
	mkdir -p /dev/pts /dev/shm /run /var /tmp /root /etc/kvmlab &&
		ln -sf /run /var/run &&
		mount -t devpts -o gid=5,mode=620,ptmxmode=666 devpts /dev/pts &&
		mount -t tmpfs -o mode=1777 tmpfs /dev/shm &&
		mount -t tmpfs -o mode=0755 tmpfs /run || fail "mounting dev/pts, dev/shm, run"
	mount -t tracefs tracefs /sys/kernel/tracing 2>/dev/null
else
	mkdir -p /mnt/lower /mnt/rw /newroot
	case "$cache" in mmap | loose) ;; *) fail "kvmlab.cache=$cache: use mmap or loose" ;; esac
	# 9p cache=mmap: as fast as cache=loose under TCG (python imports 2.24 vs 2.35 s, 3 boots)
	# and it still sees host changes; cache=none was slower (2.56 s, fio --version 1.2 vs
	# 0.8 s). In an L2 (KVM in a TCG L1) loose starts tools faster: fio --version 4.0 vs
	# 5.0 s and sysbench --version 1.6 vs 3.5 s once read (2026-11-28), hence kvmlab.cache.
	case "$share" in
	9p) mount -t 9p -o "ro,trans=virtio,version=9p2000.L,msize=512000,cache=$cache" "$tag" /mnt/lower ;;
	virtiofs) mount -t virtiofs -o ro "$tag" /mnt/lower ;;
	*) false ;;
	esac || fail "mounting $share share $tag"
	mount -t tmpfs -o mode=0755 kvmlab-rw /mnt/rw &&
		mkdir -p /mnt/rw/upper /mnt/rw/work &&
		mount -t overlay -o lowerdir=/mnt/lower,upperdir=/mnt/rw/upper,workdir=/mnt/rw/work \
			kvmlab-root /newroot || fail "mounting the overlay root"
	r=/newroot
	mount -t proc proc $r/proc &&
		mount -t sysfs sysfs $r/sys &&
		mount -t devtmpfs devtmpfs $r/dev &&
		mkdir -p $r/dev/pts $r/dev/shm &&
		mount -t devpts -o gid=5,mode=620,ptmxmode=666 devpts $r/dev/pts &&
		mount -t tmpfs -o mode=1777 tmpfs $r/dev/shm &&
		mount -t tmpfs -o mode=0755 tmpfs $r/run &&
		mkdir -p $r/run/lock &&
		mount -t tmpfs -o mode=1777 tmpfs $r/tmp || fail "mounting proc, sys, dev, run, tmp"
	mount -t tracefs tracefs $r/sys/kernel/tracing 2>/dev/null
	# The guest kernel's modules, for modprobe (busybox modprobe) inside the guest.
	mkdir -p "$r/lib/modules/$rel" && mount --bind "/lib/modules/$rel" "$r/lib/modules/$rel"
fi
mark "root mounted"

hostname "$name"
echo "$name" >$r/etc/hostname
printf '127.0.1.1\t%s\n' "$name" >>$r/etc/hosts
ip link set lo up

port=
tries=0
while [ -z "$port" ] && [ $tries -lt 100 ]; do
	for f in /sys/class/virtio-ports/*/name; do
		[ -e "$f" ] && read -r pname <"$f" && [ "$pname" = org.qemu.guest_agent.0 ] && port=${f%/name}
	done
	[ -n "$port" ] || { tries=$((tries + 1)); sleep 0.05; }
done
[ -n "$port" ] || fail "no virtio-serial port named org.qemu.guest_agent.0"
port=/dev/${port##*/}
for f in /sys/class/virtio-ports/*/name; do # the migration probe, for kvmlab-dirty
	p=${f%/name}
	[ -e "$f" ] && read -r pname <"$f" && [ "$pname" = org.kvmlab.probe.0 ] &&
		ln -sf "/dev/${p##*/}" $r/dev/kvmlab-probe
done
[ -x $r/usr/sbin/qemu-ga ] || fail "no /usr/sbin/qemu-ga on the host (apt-get install qemu-guest-agent)"
(
	while :; do
		env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
			HOME=/root TERM=linux LANG=C.UTF-8 \
			chroot ${r:-/} /usr/sbin/qemu-ga -m virtio-serial -p "$port"
		mark "agent exited rc=$?"
		sleep 1
	done
) &
mark "agent started"

# PID 1 stays in the initramfs; `wait` also reaps orphans re-parented to it.
while :; do
	wait
	sleep 1
done
