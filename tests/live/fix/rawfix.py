"""A raw FIX 4.4 peer over a socket (simplefix), to send what QuickFIX never would."""

from __future__ import annotations

import queue
import socket
import threading
import time
from datetime import UTC, datetime

import simplefix


def stamp() -> str:
    return datetime.now(UTC).strftime("%Y%m%d-%H:%M:%S.%f")[:-3]


class RawPeer:
    """One FIX connection; a reader thread queues what arrives and answers Logout."""

    def __init__(self, sock: socket.socket, sender: str, target: str):
        self.sock, self.sender, self.target = sock, sender, target
        self.seq = 0
        self.received: queue.Queue[simplefix.FixMessage] = queue.Queue()
        self._parser = simplefix.FixParser()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    @classmethod
    def connect(cls, port: int, sender: str, target: str) -> RawPeer:
        return cls(socket.create_connection(("127.0.0.1", port), timeout=5), sender, target)

    def _read(self) -> None:
        while True:
            try:
                data = self.sock.recv(65536)
            except OSError:
                return
            if not data:
                return
            self._parser.append_buffer(data)
            while (msg := self._parser.get_message()) is not None:
                if msg.get(35) == b"5":
                    self.send("5", [])
                self.received.put(msg)

    def send(self, msg_type: str, body: list[tuple[int, str]], *, bad_checksum: bool = False,
             seq: int | None = None) -> None:  # fmt: skip
        if seq is None:
            self.seq += 1
            seq = self.seq
        m = simplefix.FixMessage()
        m.append_pair(8, "FIX.4.4")
        m.append_pair(35, msg_type)
        m.append_pair(49, self.sender)
        m.append_pair(56, self.target)
        m.append_pair(34, seq)
        m.append_pair(52, stamp())
        for tag, value in body:
            m.append_pair(tag, value)
        raw = m.encode()
        if bad_checksum:
            good = raw[-4:-1]
            raw = raw[:-4] + (b"000" if good != b"000" else b"001") + raw[-1:]
        self.sock.sendall(raw)

    def expect(self, msg_type: str, timeout_s: float = 5.0) -> simplefix.FixMessage:
        """The next message of `msg_type` (others, heartbeats say, are skipped)."""
        deadline = time.monotonic() + timeout_s
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(f"no {msg_type} message within {timeout_s} s")
            try:
                msg = self.received.get(timeout=left)
            except queue.Empty:
                continue
            if msg.get(35) == msg_type.encode():
                return msg

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass


class RawAcceptor:
    """Listens on a free port; `peer()` is the one connection, answered its Logon."""

    def __init__(self, sender: str = "FOXHUNT-EX", target: str = "FOXHUNT"):
        self.server = socket.socket()
        self.server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.server.bind(("127.0.0.1", 0))
        self.server.listen(1)
        self.port = self.server.getsockname()[1]
        self.sender, self.target = sender, target
        self._peer: queue.Queue[RawPeer] = queue.Queue()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        try:
            sock, _ = self.server.accept()
        except OSError:
            return
        peer = RawPeer(sock, self.sender, self.target)
        logon = peer.expect("A")
        peer.send("A", [(98, "0"), (108, logon.get(108).decode())])
        self._peer.put(peer)

    def peer(self, timeout_s: float = 5.0) -> RawPeer:
        return self._peer.get(timeout=timeout_s)

    def close(self) -> None:
        self.server.close()
