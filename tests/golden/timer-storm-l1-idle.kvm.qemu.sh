# accel kvm: set in the lab file
# boot image: a failed init panics (panic=-1) and -no-reboot makes QEMU exit
/usr/bin/qemu-system-x86_64 \
    -name guest=timer-storm-l1-idle,debug-threads=on \
    -machine q35,hpet=off \
    -accel kvm \
    -cpu host,kvmclock=off \
    -nodefaults \
    -no-user-config \
    -display none \
    -msg timestamp=on \
    -kernel /cache/images/KEY/kernel \
    -initrd /cache/images/KEY/initrd.img \
    -append 'console=ttyS0 quiet panic=-1 kvmlab.share=9p kvmlab.tag=hostfs tsc=unstable nohz=off' \
    -no-reboot \
    -fsdev local,id=hostfs,path=/,security_model=passthrough,readonly=on,multidevs=remap \
    -device virtio-9p-pci,fsdev=hostfs,mount_tag=hostfs \
    -smp 2,sockets=1,cores=2,threads=1 \
    -m 512M \
    -rtc base=utc \
    -chardev socket,id=qmp,path=/run/kvmlab/timer-storm/l1/idle/qmp.sock,server=on,wait=off \
    -mon chardev=qmp,mode=control \
    -chardev socket,id=console,path=/run/kvmlab/timer-storm/l1/idle/console.sock,server=on,wait=off,logfile=/run/kvmlab/timer-storm/l1/idle/serial.log,logappend=off \
    -serial chardev:console \
    -device virtio-serial-pci,id=vser0 \
    -chardev socket,id=qga0,path=/run/kvmlab/timer-storm/l1/idle/qga.sock,server=on,wait=off \
    -device virtserialport,bus=vser0.0,chardev=qga0,name=org.qemu.guest_agent.0 \
    -device virtio-rng-pci \
    -pidfile /run/kvmlab/timer-storm/l1/idle/qemu.pid
