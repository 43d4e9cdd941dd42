"""Running guests: the guest contract (:mod:`.machine`) and its two backends
(:mod:`.qemu`, :mod:`.libvirt`, chosen by :mod:`.backends`), a lab brought up and down
(:mod:`.lab`), and the run directories that record what runs."""
