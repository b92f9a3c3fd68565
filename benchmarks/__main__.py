"""`python -m benchmarks` lists the harnesses; `python -m benchmarks NAME ARGS` runs one."""

from __future__ import annotations

import runpy
import sys

from benchmarks import HARNESSES


def main(argv: list[str]) -> int:
    if not argv or argv[0] in ("-h", "--help"):
        print("usage: python -m benchmarks NAME [ARGS]   (NAME --help for its arguments)")
        for name, what in HARNESSES.items():
            print(f"  {name:10} {what}")
        return 0
    name, rest = argv[0], argv[1:]
    if name not in HARNESSES:
        print(f"unknown benchmark {name!r}; one of: {', '.join(HARNESSES)}", file=sys.stderr)
        return 2
    sys.argv = [f"benchmarks.{name}", *rest]
    runpy.run_module(f"benchmarks.{name}", run_name="__main__", alter_sys=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
