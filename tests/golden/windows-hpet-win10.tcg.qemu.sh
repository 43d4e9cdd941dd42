# accel auto -> tcg: test host
# boot image: a failed init panics (panic=-1) and -no-reboot makes QEMU exit
# cpu host-passthrough under TCG: QEMU's 'max' model (all TCG can emulate)
# hyperv vpindex dropped: QEMU under TCG cannot set the VP_INDEX MSR ("kernel doesn't allow setting HyperV VP_INDEX")
# pit tickpolicy applies to KVM's in-kernel PIT; not used under TCG
/usr/bin/qemu-system-x86_64 \
    -name guest=windows-hpet-win10,debug-threads=on \
    -uuid bc3c6875-6c73-5133-b194-5573eb316885 \
    -machine q35,hpet=on \
    -accel tcg,thread=multi \
    -cpu max,hv-relaxed=on,hv-vapic=on,hv-spinlocks=0x1fff,hv-runtime=on,hv-synic=on,hv-stimer=on,hv-frequencies=on,hv-time=on \
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
    -m 4096M \
    -rtc base=localtime,driftfix=slew \
    -blockdev driver=file,node-name=disk0-file,filename=/labs/disks/win10.qcow2,aio=native,cache.direct=on,cache.no-flush=off \
    -blockdev driver=qcow2,node-name=disk0,file=disk0-file,cache.direct=on,cache.no-flush=off \
    -device virtio-blk-pci,id=disk0,drive=disk0,write-cache=on,bootindex=1,bus=pcie.0,addr=0x2 \
    -netdev user,id=net0,hostfwd=tcp:127.0.0.1:3389-:3389 \
    -device e1000e,id=nic0,netdev=net0,mac=52:54:00:a1:8e:7b,bus=pcie.0,addr=0x3 \
    -chardev socket,id=qmp,path=/run/kvmlab/windows-hpet/win10/qmp.sock,server=on,wait=off \
    -mon chardev=qmp,mode=control \
    -chardev socket,id=console,path=/run/kvmlab/windows-hpet/win10/console.sock,server=on,wait=off,logfile=/run/kvmlab/windows-hpet/win10/serial.log,logappend=off \
    -serial chardev:console \
    -device virtio-serial-pci,id=vser0,bus=pcie.0,addr=0x4 \
    -chardev socket,id=qga0,path=/run/kvmlab/windows-hpet/win10/qga.sock,server=on,wait=off \
    -device virtserialport,bus=vser0.0,chardev=qga0,name=org.qemu.guest_agent.0 \
    -device virtio-rng-pci,bus=pcie.0,addr=0x5 \
    -pidfile /run/kvmlab/windows-hpet/win10/qemu.pid
