"""Connections to a libvirtd, with errors that name the guest, the URI and the fix."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from urllib.parse import urlsplit

import libvirt

from kvmlab.errors import KvmlabError
from kvmlab.render.libvirt_caps import LibvirtCaps

libvirt.registerErrorHandler(lambda _ctx, _err: None, None)  # errors are raised, not printed

KEEPALIVE = (5, 5)
"""libvirt's keepalive on every connection (interval in seconds, unanswered probes): a
daemon that stops answering, or a link that is cut, closes the connection within about
30 s, and a call waiting on it fails then instead of when TCP gives up (15 minutes)."""
_events: list[threading.Thread] = []
_events_lock = threading.Lock()


def _event_loop() -> None:
    """libvirt's default event loop, run by a daemon thread from the first connection on
    (keepalive needs one)."""
    with _events_lock:
        if _events:
            return
        libvirt.virEventRegisterDefaultImpl()

        def run() -> None:
            while True:
                libvirt.virEventRunDefaultImpl()

        thread = threading.Thread(target=run, name="libvirt-events", daemon=True)
        thread.start()
        _events.append(thread)


class LibvirtFailure(KvmlabError):
    """libvirt refused or failed something; carries the URI, the guest and the fix."""

    exit_code = 3

    def __init__(
        self, what: str, uri: str, guest: str | None = None, fix: Sequence[str] = ()
    ) -> None:
        self.uri, self.guest, self.fix = uri, guest, list(fix)
        where = f"guest {guest} on {uri}" if guest else uri
        super().__init__(f"{where}: {what}")

    def lines(self) -> list[str]:
        return [str(self), *(f"  fix: {f}" for f in self.fix)]


class LibvirtUnreachable(LibvirtFailure):
    """No libvirtd answers on the URI."""

    exit_code = 4


def is_local(uri: str) -> bool:
    """Whether the URI names a daemon on this host (no host part, a unix socket, or a
    loopback address: a private daemon's TCP listener)."""
    parts = urlsplit(uri)
    host = parts.hostname or ""
    loopback = host == "localhost" or host == "::1" or host.startswith("127.")
    return not host or loopback or parts.scheme == "qemu+unix"


def start_fix(uri: str) -> list[str]:
    """The exact command that makes a daemon answer on ``uri``."""
    parts = urlsplit(uri)
    if is_local(uri):
        return [
            "start libvirtd: systemctl start libvirtd (without systemd: virtlogd -d && "
            "libvirtd -d), or a private one: kvmlab libvirtd start NAME"
        ]
    if parts.scheme in ("qemu+ssh", "qemu+libssh", "qemu+libssh2"):
        return [f"check that 'ssh {parts.netloc} virsh -c qemu:///system version' works"]
    if parts.scheme in ("qemu+tls", "qemu"):
        return [
            f"check that libvirtd on {parts.hostname} listens for TLS (listen_tls = 1, "
            f"libvirtd --listen) on port {parts.port or 16514} with certificates this host "
            "trusts"
        ]
    return [
        f"check that libvirtd on {parts.hostname} listens (listen_tcp = 1 and "
        f"libvirtd --listen) on port {parts.port or 16509}"
    ]


def describe(exc: libvirt.libvirtError) -> str:
    """libvirt's message, one line."""
    return " ".join(str(exc.get_error_message() or exc).split())


def open_uri(uri: str, guest: str | None = None) -> libvirt.virConnect:
    """A read-write connection; :class:`LibvirtUnreachable` with the fix when none answers,
    or when the peer has not finished the handshake within the ``libvirt-connect`` limit.

    libvirt's open blocks in C without a timeout of its own (a peer that accepts and never
    answers held it for minutes) and would run Python's signal handlers inside its error
    callback, where an exception is lost: it runs in a thread of its own while this one
    waits, so Ctrl-C and SIGTERM act at once and the wait is bounded.
    """
    from kvmlab.runtime.waits import LIMITS

    _event_loop()
    limit = LIMITS["libvirt-connect"]
    seconds = limit.value("ceiling")
    attempt = _Attempt(uri)
    attempt.start()
    attempt.wait(seconds)
    if attempt.is_alive():
        attempt.abandon()
        raise LibvirtUnreachable(
            f"something accepted the connection but gave no libvirt answer within {seconds:g} "
            f"s (limit {limit.name!r}; raise it with {limit.env('ceiling')}=SECONDS)",
            uri,
            guest,
            [_what_listens(uri)],
        )
    if attempt.error is not None:
        why = _unreachable(attempt.error)
        fix = [_what_listens(uri)] if why == NOT_LIBVIRT else start_fix(uri)
        raise LibvirtUnreachable(f"no libvirtd answers ({why})", uri, guest, fix) from None
    conn = attempt.conn
    assert conn is not None
    with contextlib.suppress(libvirt.libvirtError):  # a daemon without keepalive: as before
        conn.setKeepAlive(*KEEPALIVE)
    return conn


class _Attempt(threading.Thread):
    """One ``libvirt.open``, in a daemon thread the caller waits on (interruptibly)."""

    def __init__(self, uri: str) -> None:
        super().__init__(name="libvirt-connect", daemon=True)
        self.uri = uri
        self.conn: libvirt.virConnect | None = None
        self.error: libvirt.libvirtError | None = None
        self._lock = threading.Lock()
        self._abandoned = False

    def run(self) -> None:
        try:
            conn = libvirt.open(self.uri)
        except libvirt.libvirtError as exc:
            self.error = exc
            return
        with self._lock:
            if not self._abandoned:
                self.conn = conn
                return
        with contextlib.suppress(libvirt.libvirtError):  # answered after the caller left
            conn.close()

    def wait(self, timeout: float) -> None:
        """Wait in short steps, so a signal's handler runs in the caller's thread."""
        deadline = time.monotonic() + timeout
        while self.is_alive() and time.monotonic() < deadline:
            self.join(0.1)

    def abandon(self) -> None:
        """The caller gave up: a connection made after now is closed, not handed over."""
        with self._lock:
            self._abandoned = True


NOT_LIBVIRT = "the peer does not speak libvirt's protocol: is it a libvirtd?"


def _unreachable(exc: libvirt.libvirtError) -> str:
    """libvirt's reason, with what its RPC layer says of a peer that is no libvirtd."""
    text = describe(exc)
    if "too large" in text and "packet" in text:
        return NOT_LIBVIRT
    return text


def _what_listens(uri: str) -> str:
    """The fix when something answers at ``uri`` that is not a libvirtd: find out what."""
    parts = urlsplit(uri)
    socket = dict(p.split("=", 1) for p in parts.query.split("&") if "=" in p).get("socket")
    if socket:
        return f"check what listens on {socket} (ss -xlp | grep {socket}): it is no libvirtd"
    port = parts.port or (16514 if parts.scheme in ("qemu+tls", "qemu") else 16509)
    where = parts.hostname or "this host"
    return f"check what listens on {where} port {port} (ss -tlp there): it is no libvirtd"


@contextmanager
def connected(uri: str, guest: str | None = None) -> Iterator[libvirt.virConnect]:
    """A connection closed afterwards."""
    conn = open_uri(uri, guest)
    try:
        yield conn
    finally:
        with contextlib.suppress(libvirt.libvirtError):  # a daemon gone: nothing to close
            conn.close()


def capabilities(conn: libvirt.virConnect, domain_type: str = "qemu") -> LibvirtCaps:
    """What the daemon behind ``conn`` offers, for rendering its domains."""
    try:
        caps_xml = conn.getCapabilities()
        try:
            dom_xml = conn.getDomainCapabilities(None, "x86_64", "q35", domain_type, 0)
        except libvirt.libvirtError:
            dom_xml = conn.getDomainCapabilities(None, "x86_64", "q35", "qemu", 0)
        return LibvirtCaps.from_xml(conn.getLibVersion(), conn.getVersion(), caps_xml, dom_xml)
    except libvirt.libvirtError as exc:
        uri = conn.getURI() if conn else "?"
        raise LibvirtFailure(
            f"cannot read what this libvirt offers for x86_64 q35 guests ({describe(exc)})",
            uri,
            fix=["install QEMU for x86_64 there (qemu-system-x86)"],
        ) from None
