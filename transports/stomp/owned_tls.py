"""TLS that jmspy runs itself over the plain TCP socket stomp.py connected: an
``ssl.SSLObject`` over two memory BIOs, shaped like the socket stomp.py reads and writes.

Why: stomp.py 9 over TLS reads its ``SSLSocket`` non-blocking and writes through a queue
on its I/O thread, because one ``SSLSocket`` must not be written by one thread while
another reads it. Every SEND and every ACK then waits for that thread (measured: jmspy
at 0.31-0.49x raw stomp.py with ``ack:auto``, all of it the ACK path). Here the
encryption state is guarded by one short lock and the ciphertext goes to and from the
raw socket outside it, so a producer's or consumer's thread encrypts and writes its own
frames (jmspy's direct frame writer, :mod:`.wire`) while the reading thread waits for
bytes and decrypts them, exactly as on a plain socket.

The locks:

* ``_crypto``: every call on the ``SSLObject`` and its BIOs; never held across a socket
  call, so a blocked write cannot stop a read from decrypting, or the other way round.
* ``_send``: taken before encrypting and held until the ciphertext is written, so
  records reach the socket in the order OpenSSL made them.
* ``_recv``: one reader at a time (the bytes of a record must be fed in order).

What a reader gets: :meth:`TlsStream.recv` decrypts every whole record the bytes it read
completed, so no plaintext stays behind in OpenSSL -- what is left is at most part of a
record, which needs more bytes from the socket, which ``poll`` on :meth:`fileno` sees.
That is what lets jmspy's frame reader and reading turn (which poll the descriptor) work
over TLS as over a plain socket.

The handshake (:func:`handshake`) is the same as ``SSLContext.wrap_socket`` does: the
context the address's settings made (or the application's own ``ssl_context``), SNI and
the host name check from ``server_hostname``, bounded by the connect timeout. Nothing is
ever sent in plain text: the socket is handed to stomp.py only after the handshake, and
every ``send``/``sendall`` encrypts.
"""

from __future__ import annotations

import socket
import ssl
import threading
from typing import Any

__all__ = ["TlsStream", "handshake"]

#: Bytes asked of the socket per read: several TLS records (16 KiB of plaintext each).
RECV_BYTES = 65536

#: Plaintext encrypted per step of one large write (16 TLS records).
WRITE_PIECE = 262144


class TlsStream:
    """One TLS connection over the connected TCP socket ``raw``, after its handshake."""

    __slots__ = ("_crypto", "_in", "_obj", "_out", "_recv", "_send", "raw")

    def __init__(self, raw: socket.socket, obj: ssl.SSLObject, incoming: ssl.MemoryBIO,
                 outgoing: ssl.MemoryBIO) -> None:
        self.raw = raw
        self._obj = obj
        self._in = incoming
        self._out = outgoing
        self._crypto = threading.Lock()
        self._send = threading.Lock()
        self._recv = threading.Lock()

    # -- what a TLS socket answers -------------------------------------------------------
    def version(self) -> str | None:
        """The TLS version agreed ("TLSv1.3"), as ``SSLSocket.version``."""
        return self._obj.version()

    def getpeercert(self, binary_form: bool = False) -> Any:
        return self._obj.getpeercert(binary_form)

    def cipher(self) -> tuple[str, str, int] | None:
        return self._obj.cipher()

    @property
    def server_hostname(self) -> str | None:
        return self._obj.server_hostname

    # -- writing -----------------------------------------------------------------------
    def sendall(self, data: bytes) -> None:
        """Encrypt ``data`` and write all of it (blocking, as ``socket.sendall``)."""
        with self._send:
            view = memoryview(data)
            while view:
                # a large frame in pieces: its ciphertext is never all in memory at once
                piece, view = view[:WRITE_PIECE], view[WRITE_PIECE:]
                with self._crypto:
                    while piece:
                        written = self._obj.write(piece)
                        piece = piece[written:]
                    records = self._out.read()
                self.raw.sendall(records)

    def send(self, data: bytes) -> int:
        self.sendall(data)
        return len(data)

    # -- reading -----------------------------------------------------------------------
    def recv(self, bufsize: int = RECV_BYTES) -> bytes:
        """The plaintext of every whole record the next socket read completes (possibly
        more than ``bufsize``: nothing is kept back); b"" once the peer closed (its
        close_notify or the end of the TCP stream). A broken record raises
        ``ssl.SSLError`` (an OSError), as an ``SSLSocket`` would."""
        del bufsize  # all that was decrypted is returned, so poll() tells the truth
        with self._recv:
            if self._in.pending:  # bytes that came with the end of the handshake
                plain = self._decrypt(b"")
                if plain:
                    return plain
            while True:
                data = self.raw.recv(RECV_BYTES)
                if not data:
                    return b""
                plain = self._decrypt(data)
                if plain is None:
                    return b""
                if plain:
                    return plain
                # only part of a record, or a record with no application data (a
                # session ticket, a key update): read on

    def _decrypt(self, data: bytes) -> bytes | None:
        """Feed ``data``; the plaintext it completes (b"": none yet), None at close_notify."""
        chunks: list[bytes] = []
        closed = False
        with self._crypto:
            self._in.write(data)
            obj = self._obj
            while True:
                try:
                    chunk = obj.read(RECV_BYTES)
                except ssl.SSLWantReadError:
                    break
                except ssl.SSLZeroReturnError:
                    closed = True
                    break
                if not chunk:
                    closed = True
                    break
                chunks.append(chunk)
            answer = self._out.pending
        if answer:
            self._flush_answer()
        if closed and not chunks:
            return None
        return chunks[0] if len(chunks) == 1 else b"".join(chunks)

    def _flush_answer(self) -> None:
        """Write what reading made OpenSSL answer (a TLS 1.3 key update). Only if no
        writer holds the socket: one that does writes these bytes with its own, in
        order, and waiting for it here could deadlock against a peer that is itself
        waiting for us to read."""
        if not self._send.acquire(blocking=False):
            return
        try:
            with self._crypto:
                records = self._out.read()
            if records:
                self.raw.sendall(records)
        finally:
            self._send.release()

    # -- the socket underneath ---------------------------------------------------------
    def fileno(self) -> int:
        return self.raw.fileno()

    def getsockname(self) -> Any:
        return self.raw.getsockname()

    def getpeername(self) -> Any:
        return self.raw.getpeername()

    def setsockopt(self, level: int, option: int, value: int) -> None:
        self.raw.setsockopt(level, option, value)

    def getsockopt(self, level: int, option: int) -> int:
        return self.raw.getsockopt(level, option)

    def settimeout(self, value: float | None) -> None:
        self.raw.settimeout(value)

    def setblocking(self, flag: bool) -> None:
        self.raw.setblocking(flag)

    def shutdown(self, how: int) -> None:
        """Send close_notify if no writer is busy (without waiting on a full socket),
        then shut the TCP socket down: a thread blocked in :meth:`recv` then reads the
        end."""
        if self._send.acquire(blocking=False):
            try:
                with self._crypto:
                    try:
                        self._obj.unwrap()
                    except ssl.SSLError:
                        pass  # the peer's close_notify is not awaited
                    records = self._out.read()
                if records:
                    self.raw.send(records, socket.MSG_DONTWAIT)
            except OSError:
                pass  # the socket is gone already: nothing to say goodbye on
            finally:
                self._send.release()
        self.raw.shutdown(how)

    def close(self) -> None:
        self.raw.close()


def handshake(raw: socket.socket, context: ssl.SSLContext, server_hostname: str,
              timeout: float) -> TlsStream:
    """Run the client handshake over ``raw`` (connected, nothing sent yet) with
    ``context``: SNI and, if the context checks host names, the check against
    ``server_hostname``. Raises what ``wrap_socket`` would (``ssl.SSLError``,
    ``ssl.SSLCertVerificationError``, ``socket.timeout``, or ``ssl.SSLEOFError`` for a
    server that closed mid-handshake); leaves ``raw`` in blocking mode on success."""
    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
    obj = context.wrap_bio(incoming, outgoing, server_side=False,
                           server_hostname=server_hostname)
    raw.settimeout(timeout)
    while True:
        try:
            obj.do_handshake()
            done = True
        except ssl.SSLWantReadError:
            done = False
        except ssl.SSLError:
            _send_alert(raw, outgoing)  # tell the server why, as wrap_socket does
            raise
        records = outgoing.read()
        if records:
            raw.sendall(records)
        if done:
            break
        data = raw.recv(RECV_BYTES)
        if not data:
            raise ssl.SSLEOFError(ssl.SSL_ERROR_EOF,
                                  "the server closed the connection during the handshake")
        incoming.write(data)
    raw.settimeout(None)
    return TlsStream(raw, obj, incoming, outgoing)


def _send_alert(raw: socket.socket, outgoing: ssl.MemoryBIO) -> None:
    try:
        records = outgoing.read()
        if records:
            raw.send(records, socket.MSG_DONTWAIT)
    except OSError:
        pass  # the server is gone: the handshake's own error says what failed
