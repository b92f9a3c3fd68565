"""The C extensions again, built for fuzzing: clang with AddressSanitizer, UBSan and
libFuzzer's coverage hooks, into fuzz/build/ (the installed, optimised ones are left as
they are). The targets load these in place of the installed ones (fuzz/native.py).

Every UBSan check aborts: a finding must fail the run, not print a line and go on.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BUILD = ROOT / "fuzz" / "build"
MODULES = ("_otlp_native", "_uid_memory", "_line_scan", "_text_views")
FLAGS = [
    "-g", "-O1", "-fno-omit-frame-pointer", "-fPIC", "-shared",
    "-fsanitize=address,undefined,fuzzer-no-link",
    "-fno-sanitize-recover=all",
]


def compiler() -> str:
    for name in (os.environ.get("FUZZ_CC", ""), "clang", "clang-14"):
        if name and shutil.which(name):
            return name
    sys.exit("fuzz/build.py: clang is needed (`make fuzz` installs Debian's clang as root)")


def build(name: str, cc: str) -> Path:
    source = ROOT / "collectors" / f"{name}.c"
    out = BUILD / f"{name}{sysconfig.get_config_var('EXT_SUFFIX')}"
    if out.exists() and out.stat().st_mtime > max(source.stat().st_mtime,
                                                  Path(__file__).stat().st_mtime):
        return out
    BUILD.mkdir(parents=True, exist_ok=True)
    include = sysconfig.get_paths()["include"]
    subprocess.run([cc, *FLAGS, f"-I{include}", str(source), "-o", str(out)], check=True)
    return out


def main() -> None:
    cc = compiler()
    for name in MODULES:
        print(f"built {build(name, cc).relative_to(ROOT)}")


if __name__ == "__main__":
    main()
