"""The C extensions are optional: a machine without a C compiler runs the collector on
its Python paths. Tests of the native code skip there, saying so, and fail where a
compiler is present, since the install builds the extensions wherever it can: a build
that failed there is a fault, not a reason to skip."""

from __future__ import annotations

import importlib
import os
import shutil
import sysconfig
from types import ModuleType

import pytest


def compiler() -> str | None:
    """The C compiler setuptools would build with ($CC, else the one Python was built
    with), if it is on this machine."""
    command = os.environ.get("CC") or sysconfig.get_config_var("CC") or "cc"
    return shutil.which(command.split()[0])


def require_native(name: str) -> ModuleType:
    """`collectors.<name>`; skips the test (or, at module level, its module) where no
    compiler could have built it, and fails where one could have."""
    try:
        return importlib.import_module(f"collectors.{name}")
    except ImportError as exc:
        found = compiler()
        if found:
            pytest.fail(f"collectors.{name} is not built, though {found} is here: "
                        f"`make install` builds it ({exc})", pytrace=False)
        pytest.skip(f"collectors.{name} is not built: no C compiler on this machine, so "
                    "the collector runs on its Python path", allow_module_level=True)
