#!/bin/sh
# Adds deb-src entries mirroring this machine's own Debian `deb` entries (no mirror is named
# here) when none exist, so `apt-get source --download-only` works for the kbuild workload.
# Idempotent; prints "updated" when it added entries (the caller then runs apt-get update).
set -eu
E=/etc/apt
if grep -rqsE '^[[:space:]]*(Types:.*deb-src|deb-src[[:space:]])' "$E/sources.list" "$E/sources.list.d/"; then
  exit 0
fi
for f in "$E"/sources.list.d/*.sources; do
  [ -f "$f" ] && awk 'BEGIN{RS="";ORS="\n\n"} /debian-archive-keyring/ && /Types:[ a-z-]*deb( |\n|$)/ {sub(/Types:[^\n]*/, "Types: deb-src"); print}' "$f"
done > "$E/sources.list.d/kvmlab-deb-src.sources"
cat "$E/sources.list" "$E"/sources.list.d/*.list 2>/dev/null |
  sed -n 's|^deb \(.*/debian[-a-z]* .*\)|deb-src \1|p' > "$E/sources.list.d/kvmlab-deb-src.list"
for f in "$E/sources.list.d/kvmlab-deb-src.sources" "$E/sources.list.d/kvmlab-deb-src.list"; do
  [ -s "$f" ] || rm -f "$f"
done
echo updated
