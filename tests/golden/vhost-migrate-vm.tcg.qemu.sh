# accel auto -> tcg: test host
# boot image: a failed init panics (panic=-1) and -no-reboot makes QEMU exit
# cpu host-passthrough under TCG: QEMU's 'max' model (all TCG can emulate)
# vhost-user under TCG: vectors=0 (QEMU 7.2 with TCG crashes when the guest driver starts a vhost-user virtio-net with MSI-X)
/usr/bin/qemu-system-x86_64 \
    -name guest=vhost-migrate-vm,debug-threads=on \
    -uuid c8e7152c-4509-5c49-b3d0-a260515a93cd \
    -machine q35,memory-backend=ram0 \
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
    -m 512M \
    -object memory-backend-memfd,id=ram0,size=512M,share=on \
    -rtc base=utc \
    -chardev socket,id=chr-net0,path=/run/kvmlab/vhost-migrate/.switch/vm0.sock,reconnect=1 \
    -netdev vhost-user,id=net0,chardev=chr-net0 \
    -device virtio-net-pci,id=nic0,netdev=net0,mac=52:54:00:2f:dd:ab,vectors=0,bus=pcie.0,addr=0x1 \
    -chardev socket,id=chr-net1,path=/run/kvmlab/vhost-migrate/.switch/vm1.sock,reconnect=1 \
    -netdev vhost-user,id=net1,chardev=chr-net1 \
    -device virtio-net-pci,id=nic1,netdev=net1,mac=52:54:00:f6:54:ae,vectors=0,bus=pcie.0,addr=0x2 \
    -netdev user,id=net2,hostfwd=tcp:127.0.0.1:2240-:22 \
    -device virtio-net-pci,id=nic2,netdev=net2,mac=52:54:00:3c:95:e2,bus=pcie.0,addr=0x3 \
    -chardev socket,id=qmp,path=/run/kvmlab/vhost-migrate/vm/qmp.sock,server=on,wait=off \
    -mon chardev=qmp,mode=control \
    -chardev socket,id=console,path=/run/kvmlab/vhost-migrate/vm/console.sock,server=on,wait=off,logfile=/run/kvmlab/vhost-migrate/vm/serial.log,logappend=off \
    -serial chardev:console \
    -device virtio-serial-pci,id=vser0,bus=pcie.0,addr=0x4 \
    -chardev socket,id=qga0,path=/run/kvmlab/vhost-migrate/vm/qga.sock,server=on,wait=off \
    -device virtserialport,bus=vser0.0,chardev=qga0,name=org.qemu.guest_agent.0 \
    -chardev file,id=probe,path=/run/kvmlab/vhost-migrate/vm/probe.log \
    -device virtserialport,bus=vser0.0,chardev=probe,name=org.kvmlab.probe.0 \
    -device virtio-rng-pci,bus=pcie.0,addr=0x5 \
    -pidfile /run/kvmlab/vhost-migrate/vm/qemu.pid
