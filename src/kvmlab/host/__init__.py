"""The host doctor: is this host ready for QEMU/KVM labs, and which accelerator to use.

Entry points: :func:`kvmlab.host.doctor.run_checks`, :func:`kvmlab.host.accel.choose_accel`,
and the formatters in :mod:`kvmlab.host.output`. Everything reads the host through
:class:`kvmlab.host.probe.HostProbe`, so a recorded tree can stand in for ``/``
(:mod:`kvmlab.host.record` makes one).
"""
