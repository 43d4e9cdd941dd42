# accel auto -> tcg: test host
# boot image: a failed init panics (panic=-1) and -no-reboot makes QEMU exit
# cpu host-passthrough under TCG: QEMU's 'max' model (all TCG can emulate)
/usr/bin/qemu-system-x86_64 \
    -name guest=nested-l1-l2,debug-threads=on \
    -uuid 721b6ef0-1ce5-5f9a-864a-2d0f9f5e65f3 \
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
    -m 1024M \
    -rtc base=utc \
    -blockdev driver=file,node-name=disk0-file,filename=/var/lib/kvmlab/images/nested-l2.qcow2,aio=threads,cache.direct=on,cache.no-flush=off \
    -blockdev driver=qcow2,node-name=disk0,file=disk0-file,cache.direct=on,cache.no-flush=off \
    -device virtio-blk-pci,id=disk0,drive=disk0,write-cache=on,bootindex=1,bus=pcie.0,addr=0x2 \
    -netdev user,id=net0 \
    -device virtio-net-pci,id=nic0,netdev=net0,mac=52:54:00:f1:a3:62,bus=pcie.0,addr=0x3 \
    -chardev socket,id=qmp,path=/run/kvmlab/nested/l1/l2/qmp.sock,server=on,wait=off \
    -mon chardev=qmp,mode=control \
    -chardev socket,id=console,path=/run/kvmlab/nested/l1/l2/console.sock,server=on,wait=off,logfile=/run/kvmlab/nested/l1/l2/serial.log,logappend=off \
    -serial chardev:console \
    -device virtio-serial-pci,id=vser0,bus=pcie.0,addr=0x4 \
    -chardev socket,id=qga0,path=/run/kvmlab/nested/l1/l2/qga.sock,server=on,wait=off \
    -device virtserialport,bus=vser0.0,chardev=qga0,name=org.qemu.guest_agent.0 \
    -device virtio-rng-pci,bus=pcie.0,addr=0x5 \
    -pidfile /run/kvmlab/nested/l1/l2/qemu.pid
