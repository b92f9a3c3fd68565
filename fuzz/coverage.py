"""How much of the C the corpus reaches: line and branch coverage of each extension
from a gcov build, replaying fuzz/corpus/<target>/ (and the seeds) through it.

    .venv/bin/python fuzz/coverage.py otlp        (or uid_memory, line_scan, text_views)

No sanitizers and no libFuzzer here: each input runs once through the target's own
check, and gcov counts what ran.
"""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
import sysconfig
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "fuzz" / "build" / "coverage"
SOURCES = {
    "otlp": "_otlp_native",
    "uid_memory": "_uid_memory",
    "line_scan": "_line_scan",
    "text_views": "_text_views",
}


def build(name: str) -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    for stale in OUT.glob(f"{name}*.gc*"):
        stale.unlink()
    subprocess.run(
        ["gcc", "-O0", "-fPIC", "-shared", "--coverage", f"-I{sysconfig.get_paths()['include']}",
         str(ROOT / "collectors" / f"{name}.c"), "-o",
         str(OUT / f"{name}{sysconfig.get_config_var('EXT_SUFFIX')}")],
        check=True, cwd=OUT)


def main() -> None:
    target = sys.argv[1] if len(sys.argv) > 1 else "otlp"
    name = SOURCES[target]
    if os.environ.get("FUZZ_COVERAGE_CHILD") != "1":
        build(name)
        env = {**os.environ, "FUZZ_COVERAGE_CHILD": "1"}
        subprocess.run([sys.executable, __file__, target], check=True, env=env)
        gcda = next(OUT.glob(f"*{name}*.gcda"))
        report = subprocess.run(["gcov", "-b", "-n", "-o", str(gcda.parent), gcda.name],
                                cwd=OUT, capture_output=True, text=True, check=True)
        block = report.stdout.split(f"File '{ROOT / 'collectors' / name}.c'")[1]
        print(f"collectors/{name}.c, over its corpus:{block.split('File ')[0].rstrip()}")
        return
    sys.path[:0] = [str(ROOT / "fuzz"), str(ROOT)]
    import native

    native.BUILD = OUT
    native.load(name)
    import atheris

    atheris.instrument_imports = lambda **_: __import__("contextlib").nullcontext()
    check = importlib.import_module(f"{target}_target").test_one_input
    folders = [ROOT / "fuzz" / "corpus" / target, ROOT / "fuzz" / "seeds" / target]
    inputs = [p for f in folders if f.is_dir() for p in sorted(f.iterdir())]
    failed = 0
    for path in inputs:
        try:
            check(path.read_bytes())
        except AssertionError:
            failed += 1
    print(f"replayed {len(inputs)} inputs ({failed} differing)")


if __name__ == "__main__":
    main()
