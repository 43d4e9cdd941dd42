# accel auto -> tcg: test host
# boot image: a failed init panics (panic=-1) and -no-reboot makes QEMU exit
# cpu host-passthrough under TCG: QEMU's 'max' model (all TCG can emulate)
# vhost-user under TCG: vectors=0 (QEMU 7.2 with TCG crashes when the guest driver starts a vhost-user virtio-net with MSI-X)
/usr/bin/qemu-system-x86_64 \
    -name guest=multiqueue-vm,debug-threads=on \
    -uuid a8be38a7-eebd-5a66-817f-412cae2667b7 \
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
    -smp 4,sockets=1,cores=4,threads=1 \
    -m 2048M \
    -object memory-backend-memfd,id=ram0,size=2G,share=on \
    -rtc base=utc \
    -netdev user,id=net0,hostfwd=tcp:127.0.0.1:2224-:22 \
    -device virtio-net-pci,id=nic0,netdev=net0,mac=52:54:00:6d:b0:54,bus=pcie.0,addr=0x2 \
    -netdev tap,id=net1,ifname=kvmlab-mq0,script=no,downscript=no,vhost=off,queues=4 \
    -device virtio-net-pci,id=nic1,netdev=net1,mac=52:54:00:71:74:a6,mq=on,vectors=10,rx_queue_size=1024,bus=pcie.0,addr=0x3 \
    -chardev socket,id=chr-net2,path=/tmp/kvmlab-sock0,server=on,wait=off \
    -netdev vhost-user,id=net2,chardev=chr-net2,queues=2 \
    -device virtio-net-pci,id=nic2,netdev=net2,mac=52:54:00:4c:d4:34,mq=on,vectors=0,rx_queue_size=1024,tx_queue_size=1024,bus=pcie.0,addr=0x4 \
    -chardev socket,id=qmp,path=/run/kvmlab/multiqueue/vm/qmp.sock,server=on,wait=off \
    -mon chardev=qmp,mode=control \
    -chardev socket,id=console,path=/run/kvmlab/multiqueue/vm/console.sock,server=on,wait=off,logfile=/run/kvmlab/multiqueue/vm/serial.log,logappend=off \
    -serial chardev:console \
    -device virtio-serial-pci,id=vser0,bus=pcie.0,addr=0x5 \
    -chardev socket,id=qga0,path=/run/kvmlab/multiqueue/vm/qga.sock,server=on,wait=off \
    -device virtserialport,bus=vser0.0,chardev=qga0,name=org.qemu.guest_agent.0 \
    -device virtio-rng-pci,bus=pcie.0,addr=0x6 \
    -pidfile /run/kvmlab/multiqueue/vm/qemu.pid
