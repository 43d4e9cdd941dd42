# accel auto -> tcg: test host
# boot image: a failed init panics (panic=-1) and -no-reboot makes QEMU exit
# cpu host-passthrough under TCG: QEMU's 'max' model (all TCG can emulate)
/usr/bin/qemu-system-x86_64 \
    -name guest=basic-vm1,debug-threads=on \
    -uuid 2d8a2a42-dfc1-5e59-b50b-74e88b6bf7fb \
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
    -smp 2,sockets=1,cores=2,threads=1 \
    -m 1024M \
    -rtc base=utc \
    -blockdev driver=file,node-name=disk0-file,filename=/labs/disks/vm1.qcow2,aio=threads,cache.direct=on,cache.no-flush=off \
    -blockdev driver=qcow2,node-name=disk0,file=disk0-file,cache.direct=on,cache.no-flush=off \
    -device virtio-blk-pci,id=disk0,drive=disk0,write-cache=on,bootindex=1,bus=pcie.0,addr=0x2 \
    -netdev user,id=net0,hostfwd=tcp:127.0.0.1:2222-:22 \
    -device virtio-net-pci,id=nic0,netdev=net0,mac=52:54:00:ac:29:a3,bus=pcie.0,addr=0x3 \
    -chardev socket,id=qmp,path=/run/kvmlab/basic/vm1/qmp.sock,server=on,wait=off \
    -mon chardev=qmp,mode=control \
    -chardev socket,id=console,path=/run/kvmlab/basic/vm1/console.sock,server=on,wait=off,logfile=/run/kvmlab/basic/vm1/serial.log,logappend=off \
    -serial chardev:console \
    -device virtio-serial-pci,id=vser0,bus=pcie.0,addr=0x4 \
    -chardev socket,id=qga0,path=/run/kvmlab/basic/vm1/qga.sock,server=on,wait=off \
    -device virtserialport,bus=vser0.0,chardev=qga0,name=org.qemu.guest_agent.0 \
    -device virtio-rng-pci,bus=pcie.0,addr=0x5 \
    -pidfile /run/kvmlab/basic/vm1/qemu.pid
