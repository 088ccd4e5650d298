"""The pytest plugin (entry point `pytest11`, so installing the wheel is enough):

- `plant_store_server` (session): one server per test process, so one per pytest-xdist
  worker; its `Server` options come from the `plant_store_options` fixture (override it
  in a conftest.py: `return {"seed_file": "seed.json"}`).
- `plant_store` (function): resets that server, then mints a fresh principal and its
  read-write token: `.url`, `.control`, `.principal`, `.token`.
- `plant_store_noproc` (session): a server started elsewhere, from `PLANT_STORE_URL` and
  `PLANT_STORE_CONTROL_TOKEN`. To run the `plant_store` fixture against it, override
  `plant_store_server` with it in a conftest.py.
"""

import os
import secrets
import threading
import time

import pytest

from ._control import Control
from ._server import Server

URL_VAR = "PLANT_STORE_URL"
CONTROL_TOKEN_VAR = "PLANT_STORE_CONTROL_TOKEN"
#: Seconds between an xdist worker's looks at whether its controller still runs.
PARENT_POLL = 0.2


class PlantStore:
    """What a test gets from the `plant_store` fixture."""

    __slots__ = ("url", "control", "principal", "token")

    def __init__(self, url: str, control: Control, principal: str, token: str):
        self.url = url
        self.control = control
        self.principal = principal
        self.token = token

    def __repr__(self) -> str:
        return "PlantStore(url=%r, principal=%r)" % (self.url, self.principal)


class Elsewhere:
    """A server started elsewhere (`plant_store_noproc`): `.url` and `.control`."""

    def __init__(self, url: str, control: Control):
        self.url = url
        self.control = control

    def __repr__(self) -> str:
        return "Elsewhere(%r)" % (self.url,)


@pytest.fixture(scope="session")
def plant_store_options():
    """Keyword arguments of `plant_store.Server` for the session's server."""
    return {}


@pytest.fixture(scope="session")
def plant_store_server(plant_store_options):
    """A server of this test process's own, stopped at the end of the session."""
    with Server(**plant_store_options) as server:
        if os.environ.get("PYTEST_XDIST_WORKER"):
            _stop_with_parent(server)
        yield server


def _stop_with_parent(server):
    """A pytest-xdist worker whose controller was killed runs on to the end of its test
    (however long): its server must not. The server ends with the worker anyway (it
    holds the server's standard input); this ends it with the controller."""
    parent = os.getppid()

    def watch():
        while server.pid is not None and os.getppid() == parent:
            time.sleep(PARENT_POLL)
        server.stop()

    threading.Thread(target=watch, name="plant-store-parent", daemon=True).start()


@pytest.fixture
def plant_store(plant_store_server):
    """The session's server, reset, and a principal of the test's own."""
    control = plant_store_server.control
    control.reset()
    principal = "test-" + secrets.token_hex(6)
    token = control.mint(principal)["token"]
    return PlantStore(plant_store_server.url, control, principal, token)


@pytest.fixture(scope="session")
def plant_store_noproc():
    """A server already running: `PLANT_STORE_URL` and `PLANT_STORE_CONTROL_TOKEN`."""
    url, token = os.environ.get(URL_VAR), os.environ.get(CONTROL_TOKEN_VAR)
    if not url or not token:
        pytest.fail(
            "plant_store_noproc needs %s (http://HOST:PORT) and %s" % (URL_VAR, CONTROL_TOKEN_VAR),
            pytrace=False,
        )
    control = Control(url.rstrip("/"), token)
    yield Elsewhere(url.rstrip("/"), control)
    control.close()
