# accel auto -> tcg: test host
# boot image: a failed init panics (panic=-1) and -no-reboot makes QEMU exit
# cpu host-passthrough under TCG: QEMU's 'max' model (all TCG can emulate)
/usr/bin/qemu-system-x86_64 \
    -name guest=migrate-vm,debug-threads=on \
    -uuid a78f47da-83de-5a66-9c9a-ac6acfd0288f \
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
    -smp 2,sockets=1,cores=2,threads=1 \
    -m 512M \
    -rtc base=utc \
    -netdev user,id=net0,hostfwd=tcp:127.0.0.1:2230-:22 \
    -device virtio-net-pci,id=nic0,netdev=net0,mac=52:54:00:77:0c:ce,bus=pcie.0,addr=0x1 \
    -chardev socket,id=qmp,path=/run/kvmlab/migrate/vm/qmp.sock,server=on,wait=off \
    -mon chardev=qmp,mode=control \
    -chardev socket,id=console,path=/run/kvmlab/migrate/vm/console.sock,server=on,wait=off,logfile=/run/kvmlab/migrate/vm/serial.log,logappend=off \
    -serial chardev:console \
    -device virtio-serial-pci,id=vser0,bus=pcie.0,addr=0x2 \
    -chardev socket,id=qga0,path=/run/kvmlab/migrate/vm/qga.sock,server=on,wait=off \
    -device virtserialport,bus=vser0.0,chardev=qga0,name=org.qemu.guest_agent.0 \
    -chardev file,id=probe,path=/run/kvmlab/migrate/vm/probe.log \
    -device virtserialport,bus=vser0.0,chardev=probe,name=org.kvmlab.probe.0 \
    -device virtio-rng-pci,bus=pcie.0,addr=0x3 \
    -pidfile /run/kvmlab/migrate/vm/qemu.pid
