"""A module-level sync tool body for `ProcessIsolation` (the worker process imports it by name)."""

from __future__ import annotations

import json
import socket


def get_blocking(host: str, port: int, path: str, read_timeout: float) -> dict[str, object]:
    """One HTTP/1.0 GET on a plain blocking socket; the parsed JSON body."""
    with socket.create_connection((host, port), timeout=read_timeout) as sock:
        sock.sendall(f"GET {path} HTTP/1.0\r\nHost: {host}\r\n\r\n".encode())
        chunks = []
        while chunk := sock.recv(65536):
            chunks.append(chunk)
    head, _, body = b"".join(chunks).partition(b"\r\n\r\n")
    if not head.startswith(b"HTTP/1.1 200") and not head.startswith(b"HTTP/1.0 200"):
        raise OSError(f"unexpected answer: {head[:40]!r}")
    value: dict[str, object] = json.loads(body)
    return value
