# accel auto -> tcg: test host
# boot image: a failed init panics (panic=-1) and -no-reboot makes QEMU exit
# cpu host-passthrough under TCG: QEMU's 'max' model (all TCG can emulate)
/usr/bin/qemu-system-x86_64 \
    -name guest=vhost-migrate-peer,debug-threads=on \
    -uuid 2f134f9e-c1ff-5a18-8f24-0f65e12fd2c4 \
    -machine q35 \
    -accel tcg,thread=multi \
    -cpu max \
    -nodefaults \
    -no-user-config \
    -display none \
    -msg timestamp=on \
    -boot strict=on \
    -kernel /cache/images/KEY/kernel \
    -initrd /cache/images/KEY/initrd.img \
    -append 'console=ttyS0 quiet panic=-1 kvmlab.share=9p kvmlab.tag=hostfs' \
    -no-reboot \
    -fsdev local,id=hostfs,path=/,security_model=passthrough,readonly=on,multidevs=remap \
    -device virtio-9p-pci,fsdev=hostfs,mount_tag=hostfs,bus=pcie.0,addr=0x1 \
    -smp 1,sockets=1,cores=1,threads=1 \
    -m 256M \
    -rtc base=utc \
    -netdev tap,id=net0,ifname=kvt937065f670,script=no,downscript=no,vhost=off \
    -device virtio-net-pci,id=nic0,netdev=net0,mac=52:54:00:4a:f9:00,bus=pcie.0,addr=0x2 \
    -chardev socket,id=qmp,path=/run/kvmlab/vhost-migrate/peer/qmp.sock,server=on,wait=off \
    -mon chardev=qmp,mode=control \
    -chardev socket,id=console,path=/run/kvmlab/vhost-migrate/peer/console.sock,server=on,wait=off,logfile=/run/kvmlab/vhost-migrate/peer/serial.log,logappend=off \
    -serial chardev:console \
    -device virtio-serial-pci,id=vser0,bus=pcie.0,addr=0x3 \
    -chardev socket,id=qga0,path=/run/kvmlab/vhost-migrate/peer/qga.sock,server=on,wait=off \
    -device virtserialport,bus=vser0.0,chardev=qga0,name=org.qemu.guest_agent.0 \
    -device virtio-rng-pci,bus=pcie.0,addr=0x4 \
    -pidfile /run/kvmlab/vhost-migrate/peer/qemu.pid
