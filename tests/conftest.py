"""Shared fixtures. The autouse guard fails any test that tries to reach anything but this machine."""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Iterator
from typing import Any

import pytest

_LOCAL_NAMES = {"localhost", "localhost.localdomain", "ip6-localhost", ""}


def _is_local(host: Any) -> bool:
    if isinstance(host, bytes):
        host = host.decode(errors="replace")
    if not isinstance(host, str):
        return False
    if host in _LOCAL_NAMES:
        return True
    try:
        return ipaddress.ip_address(host.split("%")[0]).is_loopback
    except ValueError:
        return False


class NetworkAttempts(list[str]):
    """Hosts a test tried to reach off this machine."""


@pytest.fixture(autouse=True)
def _no_real_network(monkeypatch: pytest.MonkeyPatch) -> Iterator[NetworkAttempts]:
    """Refuse (and fail the test for) any connection or DNS lookup beyond loopback.

    Real LLM providers and the internet are never reached from tests; local fake servers on 127.0.0.1 are.
    The failure is recorded, not only raised, so code that swallows the error still fails the test.
    """
    attempts = NetworkAttempts()
    real_connect = socket.socket.connect
    real_connect_ex = socket.socket.connect_ex
    real_getaddrinfo = socket.getaddrinfo

    def check(address: Any) -> None:
        if isinstance(address, tuple) and address and not _is_local(address[0]):
            attempts.append(str(address[0]))
            raise ConnectionRefusedError(f"test tried to reach {address[0]!r}: only 127.0.0.1 is allowed")

    def connect(self: socket.socket, address: Any) -> Any:
        if self.family in (socket.AF_INET, socket.AF_INET6):
            check(address)
        return real_connect(self, address)

    def connect_ex(self: socket.socket, address: Any) -> Any:
        if self.family in (socket.AF_INET, socket.AF_INET6):
            check(address)
        return real_connect_ex(self, address)

    def getaddrinfo(host: Any, *args: Any, **kwargs: Any) -> Any:
        if host is not None and not _is_local(host):
            attempts.append(str(host))
            raise socket.gaierror(f"test tried to resolve {host!r}: only local hosts are allowed")
        return real_getaddrinfo(host, *args, **kwargs)

    monkeypatch.setattr(socket.socket, "connect", connect)
    monkeypatch.setattr(socket.socket, "connect_ex", connect_ex)
    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    yield attempts
    if attempts:
        pytest.fail(f"test tried to reach the network beyond this machine: {sorted(set(attempts))}")
