"""`dupescope timeline` as a new process imports no pandas where the derived state is
current (a collector keeps it so), and `dupescope duplicates` none where it absorbs a
collector's batch (a build from nothing costs more than the import).

pandas costs 0.14 s to import on the 2-core machine, a third of the command; pyarrow
imports it as soon as it is handed a Python value (store/arrow_values.py). These tests
run the command in a process of its own, on a store whose key is found through the lookup
index, its membership filter, and a hot segment a collector wrote, and look at what that
process imported.
"""

from __future__ import annotations

import subprocess
import sys

from forensics_cases import run

from queries import duplicates
from store.embedded import EmbeddedStore

KEY = {"idempotency_key": "inv-1"}
FIRST = run("j1", 1, "w1", "00:00", [("00:02", "side_effect")], **KEY)
AGAIN = run("j1", 2, "w2", "00:40", [("00:41", "side_effect"), ("00:42", "ack")], **KEY)

#: Runs the command in this process, then names the pandas modules it imported.
PROGRAM = """
import sys
from dupescope.cli import main
main(sys.argv[1:], standalone_mode=False)
print("imported:", sorted(m for m in sys.modules if m.split(".")[0] == "pandas"),
      file=sys.stderr)
"""


def _imported_pandas(*args: str) -> tuple[str, list[str]]:
    done = subprocess.run([sys.executable, "-c", PROGRAM, *args], capture_output=True,
                          text=True, timeout=120, check=True)
    line = next(line for line in done.stderr.splitlines() if line.startswith("imported:"))
    return done.stdout, eval(line.removeprefix("imported:"))  # a list literal we printed


def _store(tmp_path, make_table) -> str:
    folder = tmp_path / "store"
    store = EmbeddedStore(folder)
    store.write(make_table(FIRST))
    store.write(make_table(run("j9", 1, "w1", "00:00", [("00:01", "ack")])))
    store.compact()  # one indexed segment, with its membership filter
    store.write_hot(make_table(AGAIN))  # and a collector's batch not compacted yet
    duplicates(store)  # the derived state kept current, as a running collector keeps it
    store.close()
    assert any(folder.glob("index/**/*.filter")), "the lookup index has a filter"
    return str(folder)


def test_the_timeline_with_its_verdict_imports_no_pandas(tmp_path, make_table) -> None:
    out, pandas = _imported_pandas("timeline", "inv-1", "--store",
                                   _store(tmp_path, make_table), "--format", "json")
    assert '"event":"side_effect"' in out and "harmful" in out  # both runs were read
    assert pandas == []


def test_the_timeline_table_without_the_verdict_imports_no_pandas(tmp_path, make_table) -> None:
    out, pandas = _imported_pandas("timeline", "j1", "--store", _store(tmp_path, make_table),
                                   "--no-verdict")
    assert len(out.splitlines()) == 1 + len(FIRST) + len(AGAIN)
    assert pandas == []


def test_duplicates_absorbing_a_batch_imports_no_pandas(tmp_path, make_table) -> None:
    folder = tmp_path / "store"
    store = EmbeddedStore(folder)
    store.write(make_table(FIRST))
    duplicates(store)  # kept current before the batch
    store.write_hot(make_table(AGAIN))  # the batch the command derives
    store.close()
    out, pandas = _imported_pandas("duplicates", "--store", str(folder), "--format", "json")
    assert '"key":"inv-1"' in out and '"harmful":true' in out
    assert pandas == []
