"""plant-store for a client's test suite: the server binary (`binary()`), a server of the
test run's own (`Server`), its test control (`Control`), and a pytest plugin
(`plant_store`, `plant_store_server`, `plant_store_noproc` fixtures). Standard library
only. docs/testing.md in the plant-store repository is the guide."""

from ._binary import BINARY_VAR, binary
from ._control import Control, ControlError
from ._server import Server, ServerError

__all__ = ["BINARY_VAR", "binary", "Control", "ControlError", "Server", "ServerError"]
