# accel auto -> tcg: test host
# boot image: a failed init panics (panic=-1) and -no-reboot makes QEMU exit
# cpu host-passthrough under TCG: QEMU's 'max' model (all TCG can emulate)
# vhost-user under TCG: vectors=0 (QEMU 7.2 with TCG crashes when the guest driver starts a vhost-user virtio-net with MSI-X)
/usr/bin/qemu-system-x86_64 \
    -name guest=netcompare-vm2,debug-threads=on \
    -uuid cdd4eaee-0722-568f-8504-a3de4c984e4b \
    -machine q35,memory-backend=ram0 \
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
    -smp 2,sockets=1,cores=2,threads=1 \
    -m 1024M \
    -object memory-backend-memfd,id=ram0,size=1G,share=on \
    -rtc base=utc \
    -netdev user,id=net0 \
    -device virtio-net-pci,id=nic0,netdev=net0,mac=52:54:00:bf:6e:73,bus=pcie.0,addr=0x2 \
    -netdev tap,id=net1,ifname=kvt050648bec1,script=no,downscript=no,vhost=off,queues=4 \
    -device virtio-net-pci,id=nic1,netdev=net1,mac=52:54:00:d1:67:08,mq=on,vectors=10,bus=pcie.0,addr=0x3 \
    -chardev socket,id=chr-net2,path=/run/kvmlab/netcompare/.switch/vm2.sock,server=on,wait=off \
    -netdev vhost-user,id=net2,chardev=chr-net2,queues=2 \
    -device virtio-net-pci,id=nic2,netdev=net2,mac=52:54:00:2f:d6:10,mq=on,vectors=0,bus=pcie.0,addr=0x4 \
    -netdev tap,id=net3,ifname=kvt050648bec3,script=no,downscript=no,vhost=on \
    -device virtio-net-pci,id=nic3,netdev=net3,mac=52:54:00:17:95:4a,bus=pcie.0,addr=0x5 \
    -chardev socket,id=qmp,path=/run/kvmlab/netcompare/vm2/qmp.sock,server=on,wait=off \
    -mon chardev=qmp,mode=control \
    -chardev socket,id=console,path=/run/kvmlab/netcompare/vm2/console.sock,server=on,wait=off,logfile=/run/kvmlab/netcompare/vm2/serial.log,logappend=off \
    -serial chardev:console \
    -device virtio-serial-pci,id=vser0,bus=pcie.0,addr=0x6 \
    -chardev socket,id=qga0,path=/run/kvmlab/netcompare/vm2/qga.sock,server=on,wait=off \
    -device virtserialport,bus=vser0.0,chardev=qga0,name=org.qemu.guest_agent.0 \
    -device virtio-rng-pci,bus=pcie.0,addr=0x7 \
    -pidfile /run/kvmlab/netcompare/vm2/qemu.pid
