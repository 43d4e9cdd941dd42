# accel auto -> kvm: test host with usable KVM
# boot image: a failed init panics (panic=-1) and -no-reboot makes QEMU exit
# QEMU has no pinning option: kvmlab pins vCPU and emulator threads at run time (sched_setaffinity on the threads query-cpus-fast reports)
# needs 3 free 1G huge pages on the host
/usr/bin/qemu-system-x86_64 \
    -name guest=vhost-user-testpmd-hardware-dpdk,debug-threads=on \
    -uuid 8cc6b3bb-34d4-5da0-81f4-07aa78464b1e \
    -machine q35 \
    -accel kvm \
    -cpu host \
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
    -smp 3,sockets=1,cores=3,threads=1 \
    -m 3072M \
    -object memory-backend-memfd,id=ram-node0,size=3G,hugetlb=on,hugetlbsize=1G,share=on,prealloc=on \
    -numa node,nodeid=0,cpus=0-2,memdev=ram-node0 \
    -rtc base=utc \
    -chardev socket,id=chr-net0,path=/run/kvmlab/vhost-user-testpmd-hardware/.switch/vm0.sock,reconnect=1 \
    -netdev vhost-user,id=net0,chardev=chr-net0 \
    -device virtio-net-pci,id=nic0,netdev=net0,mac=52:54:00:77:d5:05,rx_queue_size=1024,tx_queue_size=1024,bus=pcie.0,addr=0x2 \
    -chardev socket,id=chr-net1,path=/run/kvmlab/vhost-user-testpmd-hardware/.switch/vm1.sock,reconnect=1 \
    -netdev vhost-user,id=net1,chardev=chr-net1 \
    -device virtio-net-pci,id=nic1,netdev=net1,mac=52:54:00:ef:81:95,rx_queue_size=1024,tx_queue_size=1024,bus=pcie.0,addr=0x3 \
    -chardev socket,id=qmp,path=/run/kvmlab/vhost-user-testpmd-hardware/dpdk/qmp.sock,server=on,wait=off \
    -mon chardev=qmp,mode=control \
    -chardev socket,id=console,path=/run/kvmlab/vhost-user-testpmd-hardware/dpdk/console.sock,server=on,wait=off,logfile=/run/kvmlab/vhost-user-testpmd-hardware/dpdk/serial.log,logappend=off \
    -serial chardev:console \
    -device virtio-serial-pci,id=vser0,bus=pcie.0,addr=0x4 \
    -chardev socket,id=qga0,path=/run/kvmlab/vhost-user-testpmd-hardware/dpdk/qga.sock,server=on,wait=off \
    -device virtserialport,bus=vser0.0,chardev=qga0,name=org.qemu.guest_agent.0 \
    -device virtio-rng-pci,bus=pcie.0,addr=0x5 \
    -pidfile /run/kvmlab/vhost-user-testpmd-hardware/dpdk/qemu.pid
