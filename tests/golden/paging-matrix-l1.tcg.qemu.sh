# accel auto -> tcg: test host
# boot image: a failed init panics (panic=-1) and -no-reboot makes QEMU exit
# cpu host-passthrough under TCG: QEMU's 'max' model (all TCG can emulate)
/usr/bin/qemu-system-x86_64 \
    -name guest=paging-matrix-l1,debug-threads=on \
    -uuid a0b4dab8-5551-5749-8019-bc91e1f56fce \
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
    -append 'console=ttyS0 quiet panic=-1 kvmlab.share=9p kvmlab.tag=hostfs kvm_amd.npt=1 kvm_intel.ept=1' \
    -no-reboot \
    -fsdev local,id=hostfs,path=/,security_model=passthrough,readonly=on,multidevs=remap \
    -device virtio-9p-pci,fsdev=hostfs,mount_tag=hostfs,bus=pcie.0,addr=0x1 \
    -smp 1,sockets=1,cores=1,threads=1 \
    -m 3072M \
    -rtc base=utc \
    -chardev socket,id=qmp,path=/run/kvmlab/paging-matrix/l1/qmp.sock,server=on,wait=off \
    -mon chardev=qmp,mode=control \
    -chardev socket,id=console,path=/run/kvmlab/paging-matrix/l1/console.sock,server=on,wait=off,logfile=/run/kvmlab/paging-matrix/l1/serial.log,logappend=off \
    -serial chardev:console \
    -device virtio-serial-pci,id=vser0,bus=pcie.0,addr=0x2 \
    -chardev socket,id=qga0,path=/run/kvmlab/paging-matrix/l1/qga.sock,server=on,wait=off \
    -device virtserialport,bus=vser0.0,chardev=qga0,name=org.qemu.guest_agent.0 \
    -chardev socket,id=relay-l2,path=/run/kvmlab/paging-matrix/l1/relay-l2.sock,server=on,wait=off \
    -device virtserialport,bus=vser0.0,chardev=relay-l2,name=kvmlab.relay.l2 \
    -device virtio-rng-pci,bus=pcie.0,addr=0x3 \
    -pidfile /run/kvmlab/paging-matrix/l1/qemu.pid
