#!/bin/sh
# kvmlab: QEMU's masked host view (see kvmlab/runtime/hostview.py). Run by
#   unshare --mount --propagation private -- sh hostview.sh BB VIEW EMPTY [MASK]... -- QEMU-ARGV
# (BB: busybox, whose applets start much faster than util-linux's under TCG, or "").
# Bind-mounts / onto VIEW (in this private mount namespace only), mounts each MASK over
# its path below VIEW, then execs QEMU (same pid). Masks:
#   d MODE DIR        an empty read-only tmpfs over DIR
#   f FILE            the empty file EMPTY, bind-mounted read-only over FILE
#   w MODE DIR, k KEEP..., r DIR
#                     a writable tmpfs over DIR, the real KEEP directories bound back
#                     inside it, then DIR made read-only
# Any failure exits before QEMU starts: a guest never sees an unmasked view.
bb=$1 view=$2 empty=$3
shift 3
run() { if [ -n "$bb" ]; then "$bb" "$@"; else "$@"; fi; }
fail() { echo "kvmlab: cannot hide $1 from the guest ($2); QEMU not started" >&2; exit 1; }
saved=$(umask)
umask 0222
run mkdir -p "$view" && : >"$empty" || fail / "creating $view"
run mount -o rbind / "$view" || fail / "bind-mounting / onto $view"
while [ "$1" != -- ]; do
	case $1 in
	d) run mount -t tmpfs -o "ro,mode=$2,size=16k" kvmlab-hidden "$view$3" || fail "$3" tmpfs ;;
	w) run mount -t tmpfs -o "mode=$2,size=16k" kvmlab-hidden "$view$3" || fail "$3" tmpfs ;;
	k) { run mkdir -p "$view$2" && run mount -o rbind "$2" "$view$2"; } || fail "$2" "keeping it" ;;
	r) run mount -o remount,ro "$view$2" || fail "$2" "making it read-only" ;;
	f) { run mount -o bind "$empty" "$view$2" && run mount -o remount,bind,ro "$view$2"; } ||
		fail "$2" "bind-mounting an empty file" ;;
	*) fail "$1" "unknown mask kind" ;;
	esac
	case $1 in [dw]) shift 3 ;; *) shift 2 ;; esac
done
shift
umask "$saved"
exec "$@"
