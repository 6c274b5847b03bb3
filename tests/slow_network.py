"""A network slow in the ways a hostile or broken receiver can make it: a name whose DNS
never answers, a connection slow to be accepted, a TLS handshake that never ends. The name
lookup and the connect are the system's (socket.getaddrinfo, socket.connect), so those two
are stood in for; the TLS server is a real socket."""

import socket
import threading
import time
from dataclasses import dataclass, field

from core import netguard

STALL_SECONDS = 10  # a stalled lookup answers after this at the latest (a failing test ends)


@dataclass
class StalledDns:
    """socket.getaddrinfo, but a name given to `stall()` blocks until `release()` (a resolver
    whose DNS server never answers), then resolves to the address given for it."""

    names: dict[str, str] = field(default_factory=dict)
    lookups: list[str] = field(default_factory=list)
    released: threading.Event = field(default_factory=threading.Event)

    def stall(self, name: str, *, resolves_to: str = "127.0.0.1") -> None:
        self.names[name] = resolves_to

    def release(self) -> None:
        self.released.set()

    def getaddrinfo(self, real, host, port, *args, **kwargs):
        if host in self.names:
            self.lookups.append(host)
            self.released.wait(timeout=STALL_SECONDS)
            host = self.names[host]
        return real(host, port, *args, **kwargs)

    def wait_for_lookups_to_end(self) -> None:
        """No lookup thread left behind for the next test."""
        self.release()
        for _ in range(100):
            if netguard._RESOLVER.running() == 0:
                return
            time.sleep(0.05)


class SilentTlsServer:
    """A loopback port that accepts connections and reads what comes (a ClientHello, a
    request), then either says nothing (`drip=False`) or drips a TLS record header that never
    completes, a byte every 0.2 s: each byte well within any socket timeout."""

    def __init__(self, *, drip: bool = False) -> None:
        self.drip = drip
        self.accepted = 0
        self._stop = threading.Event()
        self._listener = socket.socket()
        self._listener.bind(("127.0.0.1", 0))
        self._listener.listen(16)
        self.port = self._listener.getsockname()[1]
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self._listener.accept()
            except OSError:
                return
            self.accepted += 1
            threading.Thread(target=self._hold, args=(conn,), daemon=True).start()

    def _hold(self, conn: socket.socket) -> None:
        with conn:
            try:
                conn.recv(4096)
                if self.drip:
                    for byte in b"\x16\x03\x03\x40\x00" + b"\x02" * 200:
                        if self._stop.wait(0.2):
                            return
                        conn.send(bytes([byte]))
                self._stop.wait(60)
            except OSError:
                pass

    def close(self) -> None:
        self._stop.set()
        self._listener.close()


def slow_connect(monkeypatch, *, port: int, seconds: float) -> None:
    """Connections to `port` are accepted `seconds` late (a SYN-ACK slow to come back)."""
    real_connect = socket.socket.connect

    def connect(sock, address):
        if address[1] == port:
            time.sleep(seconds)
        return real_connect(sock, address)

    monkeypatch.setattr(socket.socket, "connect", connect)
