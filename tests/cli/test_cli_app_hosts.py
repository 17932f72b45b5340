"""DNS rebinding: the real server (``workbench app``) opens a session only for the host names it
serves (``[app] allowed_hosts``, default 127.0.0.1 and localhost). A raw websocket handshake
carrying another site's Host (and the same Origin, as a rebound page would send) is refused;
the same handshake with a served name is accepted (the control)."""

from __future__ import annotations

import base64
import os
import socket
from urllib.parse import urlsplit

import pytest

from tests.support.live_app import serve
from workbench.services.project.lifecycle import init_project

pytestmark = pytest.mark.browser


def _handshake(port: int, host: str) -> str:
    key = base64.b64encode(os.urandom(16)).decode()
    request = (f"GET /_stcore/stream HTTP/1.1\r\nHost: {host}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
               f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\nOrigin: http://{host}\r\n"
               f"Sec-WebSocket-Protocol: streamlit\r\n\r\n")
    with socket.create_connection(("127.0.0.1", port), timeout=20) as s:
        s.sendall(request.encode())
        return s.recv(4096).decode("latin-1").split("\r\n")[0]


def test_a_websocket_under_another_host_name_is_refused(db_path):
    init_project(db_path)
    with serve(db_path) as url:
        port = urlsplit(url).port
        for bad in (f"rebind.attacker.example:{port}", "rebind.attacker.example", f"127.0.0.1.nip.io:{port}"):
            status = _handshake(port, bad)
            assert " 101 " not in status and status.startswith("HTTP/1.1 4"), (bad, status)
        for good in (f"127.0.0.1:{port}", f"localhost:{port}"):
            assert " 101 " in _handshake(port, good), good


def test_a_configured_host_name_is_served(db_path):
    init_project(db_path)
    with serve(db_path, {"WORKBENCH_APP_ALLOWED_HOSTS": "app.example.org"}) as url:
        port = urlsplit(url).port
        assert " 101 " in _handshake(port, f"app.example.org:{port}")
        assert " 101 " in _handshake(port, f"127.0.0.1:{port}")  # [app] host is always served
        assert " 101 " not in _handshake(port, f"localhost:{port}")  # no longer in the list
