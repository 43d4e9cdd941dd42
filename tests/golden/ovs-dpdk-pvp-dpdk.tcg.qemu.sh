# accel auto -> tcg: test host
# boot image: a failed init panics (panic=-1) and -no-reboot makes QEMU exit
# cpu host-passthrough under TCG: QEMU's 'max' model (all TCG can emulate)
# vhost-user under TCG: vectors=0 (QEMU 7.2 with TCG crashes when the guest driver starts a vhost-user virtio-net with MSI-X)
/usr/bin/qemu-system-x86_64 \
    -name guest=ovs-dpdk-pvp-dpdk,debug-threads=on \
    -uuid e05b6d42-96f7-56ff-a4ea-6c7efa43edad \
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
    -chardev socket,id=chr-net0,path=/run/kvmlab/ovs-dpdk-pvp/.switch/vm0.sock,server=on,wait=off \
    -netdev vhost-user,id=net0,chardev=chr-net0 \
    -device virtio-net-pci,id=nic0,netdev=net0,mac=52:54:00:b3:0b:30,vectors=0,rx_queue_size=1024,tx_queue_size=1024,bus=pcie.0,addr=0x2 \
    -chardev socket,id=chr-net1,path=/run/kvmlab/ovs-dpdk-pvp/.switch/vm1.sock,server=on,wait=off \
    -netdev vhost-user,id=net1,chardev=chr-net1 \
    -device virtio-net-pci,id=nic1,netdev=net1,mac=52:54:00:55:9e:22,vectors=0,rx_queue_size=1024,tx_queue_size=1024,bus=pcie.0,addr=0x3 \
    -chardev socket,id=qmp,path=/run/kvmlab/ovs-dpdk-pvp/dpdk/qmp.sock,server=on,wait=off \
    -mon chardev=qmp,mode=control \
    -chardev socket,id=console,path=/run/kvmlab/ovs-dpdk-pvp/dpdk/console.sock,server=on,wait=off,logfile=/run/kvmlab/ovs-dpdk-pvp/dpdk/serial.log,logappend=off \
    -serial chardev:console \
    -device virtio-serial-pci,id=vser0,bus=pcie.0,addr=0x4 \
    -chardev socket,id=qga0,path=/run/kvmlab/ovs-dpdk-pvp/dpdk/qga.sock,server=on,wait=off \
    -device virtserialport,bus=vser0.0,chardev=qga0,name=org.qemu.guest_agent.0 \
    -device virtio-rng-pci,bus=pcie.0,addr=0x5 \
    -pidfile /run/kvmlab/ovs-dpdk-pvp/dpdk/qemu.pid
