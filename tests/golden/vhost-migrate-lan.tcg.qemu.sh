# accel auto -> tcg: test host
# boot image: a failed init panics (panic=-1) and -no-reboot makes QEMU exit
# cpu host-passthrough under TCG: QEMU's 'max' model (all TCG can emulate)
/usr/bin/qemu-system-x86_64 \
    -name guest=vhost-migrate-lan,debug-threads=on \
    -uuid 4fcde63e-45fc-57a4-af34-e239819191d8 \
    -machine q35 \
    -accel tcg,thread=multi \
    -cpu max \
    -nodefaults \
    -no-user-config \
    -display none \
    -msg timestamp=on \
    -boot strict=on \
    -kernel /cache/images/KEY2/kernel \
    -initrd /cache/images/KEY2/initrd.img \
    -append 'console=ttyS0 quiet panic=-1 kvmlab.share=none kvmlab.tag=hostfs' \
    -no-reboot \
    -smp 1,sockets=1,cores=1,threads=1 \
    -m 256M \
    -rtc base=utc \
    -netdev tap,id=net0,ifname=kvtdc68d7db70,script=no,downscript=no,vhost=off \
    -device virtio-net-pci,id=nic0,netdev=net0,mac=52:54:00:15:7c:97,bus=pcie.0,addr=0x1 \
    -chardev socket,id=qmp,path=/run/kvmlab/vhost-migrate/lan/qmp.sock,server=on,wait=off \
    -mon chardev=qmp,mode=control \
    -chardev socket,id=console,path=/run/kvmlab/vhost-migrate/lan/console.sock,server=on,wait=off,logfile=/run/kvmlab/vhost-migrate/lan/serial.log,logappend=off \
    -serial chardev:console \
    -device virtio-serial-pci,id=vser0,bus=pcie.0,addr=0x2 \
    -chardev socket,id=qga0,path=/run/kvmlab/vhost-migrate/lan/qga.sock,server=on,wait=off \
    -device virtserialport,bus=vser0.0,chardev=qga0,name=org.qemu.guest_agent.0 \
    -chardev file,id=probe,path=/run/kvmlab/vhost-migrate/lan/probe.log \
    -device virtserialport,bus=vser0.0,chardev=probe,name=org.kvmlab.probe.0 \
    -device virtio-rng-pci,bus=pcie.0,addr=0x3 \
    -pidfile /run/kvmlab/vhost-migrate/lan/qemu.pid
