"""The sanitizer builds of the C extensions (fuzz/build.py), loaded under the names the
collector imports, so the code under test is the collector's own Python around them."""

from __future__ import annotations

import importlib.machinery
import importlib.util
import sys
import sysconfig
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[1]
BUILD = ROOT / "fuzz" / "build"
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


def load(name: str) -> ModuleType:
    """`collectors.<name>` from fuzz/build/, in sys.modules before anything imports it."""
    full = f"collectors.{name}"
    path = BUILD / f"{name}{sysconfig.get_config_var('EXT_SUFFIX')}"
    if not path.exists():
        sys.exit(f"{path.relative_to(ROOT)} is missing: run `make fuzz` (or fuzz/build.py)")
    loaded = sys.modules.get(full)
    if loaded is not None:
        if Path(loaded.__file__) != path:
            sys.exit(f"{full} was imported from {loaded.__file__} before the sanitizer build")
        return loaded
    loader = importlib.machinery.ExtensionFileLoader(full, str(path))
    spec = importlib.util.spec_from_file_location(full, path, loader=loader)
    module = importlib.util.module_from_spec(spec)
    sys.modules[full] = module
    loader.exec_module(module)
    return module
