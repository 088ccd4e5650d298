"""Where the `plant-store` binary is: the one the wheel installed, or one of your own."""

import os
import shutil
import sys
import sysconfig

#: A binary of your own (a cargo build, another version) instead of the installed one.
BINARY_VAR = "PLANT_STORE_BIN"

NAME = "plant-store"


def _candidates():
    # The wheel puts the binary with the environment's scripts (a venv's bin/)...
    yield sysconfig.get_path("scripts")
    # ... or the user's (`pip install --user`) ...
    yield sysconfig.get_path("scripts", "%s_user" % os.name)
    # ... or, with `pip install --target DIR`, in DIR/bin beside this package.
    yield os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "bin")
    # The interpreter's own directory (some layouts put scripts there).
    yield os.path.dirname(sys.executable)


def binary() -> str:
    """The path of the `plant-store` binary: `$PLANT_STORE_BIN` when set, else the one
    installed with this package, else the first on `PATH`."""
    override = os.environ.get(BINARY_VAR)
    if override:
        if not os.access(override, os.X_OK):
            raise FileNotFoundError("%s=%s is no executable file" % (BINARY_VAR, override))
        return override
    for directory in _candidates():
        if directory:
            path = os.path.join(directory, NAME)
            if os.path.isfile(path) and os.access(path, os.X_OK):
                return path
    found = shutil.which(NAME)
    if found:
        return found
    raise FileNotFoundError(
        "no %s binary: install the plant-store wheel for this platform, or set %s"
        % (NAME, BINARY_VAR)
    )
