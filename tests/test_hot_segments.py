"""Hot segments: what a collector writes is read like any segment, and compacted away."""

import errno
import os
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import listed_once
from native_support import require_native
from support.charge_events import CHARGE, count

from collectors.normalise import Normaliser
from collectors.otlp_native import NativeTraceDecoder
from queries import timeline
from sample_data.otlp_requests import trace_request
from store import hot_segments
from store.embedded import EmbeddedStore
from store.materialised import unique_events
from store.schema import as_events, as_runs


def _names(store: EmbeddedStore) -> list[str]:
    return [p.suffix for p in store.segments()]


def test_hot_writes_are_appended_to_one_hot_log(embedded, make_table) -> None:
    embedded.write_hot(make_table(CHARGE[:2]))
    embedded.write_hot(make_table(CHARGE[2:]))
    assert _names(embedded) == [".arrowlog"]
    assert count(embedded) == 4


def test_hot_rows_are_read_with_the_parquet_rows(embedded, make_table) -> None:
    embedded.write(make_table(CHARGE[:2]))
    embedded.write_hot(make_table(CHARGE[2:]))
    events = embedded.execute("SELECT event FROM events ORDER BY ts")["event"].tolist()
    assert events == ["enqueue", "deliver", "side_effect", "ack"]


def test_a_hot_segment_reads_back_the_same_values_as_a_parquet_one(
    tmp_path: Path, make_table
) -> None:
    hot, cold = EmbeddedStore(tmp_path / "hot"), EmbeddedStore(tmp_path / "cold")
    hot.write_hot(make_table(CHARGE))
    cold.write(make_table(CHARGE))
    query = "SELECT * FROM events ORDER BY ts"
    assert hot.execute(query).equals(cold.execute(query))


def test_a_hot_segment_of_runs_reads_back_the_same_values(tmp_path: Path, make_table) -> None:
    runs, plain = EmbeddedStore(tmp_path / "runs"), EmbeddedStore(tmp_path / "plain")
    runs.write_hot(as_runs(make_table(CHARGE)))
    plain.write_hot(make_table(CHARGE))
    query = "SELECT * FROM events ORDER BY ts"
    assert runs.execute(query).equals(plain.execute(query))
    assert timeline(runs, "inv-1").shape[0] == 4


def test_spans_with_steps_make_hot_segments_of_less_than_half_the_bytes(
    tmp_path: Path,
) -> None:
    require_native("_otlp_native")  # the run-end encoded columns are the extension's
    request = trace_request(1, 200)  # each span: a deliver row and three step rows
    table, _, _ = NativeTraceDecoder(Normaliser()).decode(
        request.SerializeToString(), lambda: request, "src"
    )
    runs, plain = EmbeddedStore(tmp_path / "runs"), EmbeddedStore(tmp_path / "plain")
    runs.write_hot(table)
    plain.write_hot(as_events(table))
    size = {s: s.segments()[0].stat().st_size for s in (runs, plain)}
    assert size[runs] < 0.5 * size[plain]
    assert count(runs) == count(plain) == 800


def test_hot_segments_of_runs_compact_into_plain_parquet(embedded, make_table) -> None:
    embedded.write_hot(as_runs(make_table(CHARGE[:2])))
    embedded.write_hot(make_table(CHARGE[2:]))
    assert embedded.compact() == 1  # the one log
    assert pq.read_table(embedded.segments()[0])["job_id"].to_pylist() == ["j1"] * 4


def test_a_key_timeline_finds_rows_in_hot_segments(embedded, make_table) -> None:
    embedded.write(make_table(CHARGE[:1]))
    embedded.write_hot(make_table(CHARGE[1:]))
    assert timeline(embedded, "inv-1")["event"].tolist() == [
        "enqueue", "deliver", "side_effect", "ack"
    ]


def test_compaction_turns_hot_segments_into_one_parquet_segment(embedded, make_table) -> None:
    embedded.write(make_table(CHARGE[:2]))
    embedded.write_hot(make_table(CHARGE[2:]))
    embedded.write_hot(make_table(CHARGE))  # a resent batch: its rows are repeats
    assert embedded.compact() == 2  # the Parquet segment and the log
    assert _names(embedded) == [".parquet"]
    assert pq.read_table(embedded.segments()[0]).num_rows == 4


def test_a_lone_hot_segment_is_compacted(embedded, make_table) -> None:
    embedded.write_hot(make_table(CHARGE))
    assert embedded.compact(min_segments=16) == 1
    assert _names(embedded) == [".parquet"]


def test_a_reader_that_mapped_hot_segments_reads_on_after_they_are_compacted(
    embedded, make_table
) -> None:
    embedded.write_hot(make_table(CHARGE))
    reader = EmbeddedStore(embedded.root)
    assert count(reader) == 4
    assert timeline(reader, "inv-1").shape[0] == 4
    embedded.compact()
    assert count(reader) == 4
    assert timeline(reader, "inv-1").shape[0] == 4
    reader.close()


def test_a_new_hot_segment_changes_the_snapshot(embedded, make_table) -> None:
    embedded.write(make_table(CHARGE[:2]))
    before = embedded.snapshot_id()
    embedded.write_hot(make_table(CHARGE[2:]))
    assert embedded.snapshot_id() != before


def test_a_day_held_in_one_hot_segment_has_its_repeats_collapsed(embedded, make_table) -> None:
    embedded.write_hot(make_table(CHARGE + CHARGE[:1]))  # the enqueue twice, one event_uid
    con = embedded.connection()
    unique = con.execute(f"SELECT count(*) FROM ({unique_events(embedded, con)})").fetchone()
    assert unique == (4,)


def _wait_for_spares(folder: Path, count: int) -> set[int]:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        inodes = {p.stat().st_ino for p in folder.iterdir()} if folder.exists() else set()
        if len(inodes) >= count:
            return inodes
        time.sleep(0.01)
    raise AssertionError(f"fewer than {count} spare files in {folder}")


def test_a_new_hot_log_fills_a_spare_file_made_ahead(embedded, make_table) -> None:
    embedded.write_hot(make_table(CHARGE[:2]))  # the first write starts making spares
    spares = _wait_for_spares(embedded.events_dir / ".spare", 8)
    embedded.compact()  # closes the log: the next write starts another
    embedded.write_hot(make_table(CHARGE[2:]))
    newest = embedded.segments()[-1]
    assert newest.suffix == ".arrowlog" and newest.stat().st_ino in spares
    assert count(embedded) == 4


def test_spare_files_are_made_again_once_half_are_used(tmp_path: Path) -> None:
    spares = hot_segments.SpareFiles(tmp_path / ".spare")
    spares.take()  # the first take starts making spares
    first = _wait_for_spares(tmp_path / ".spare", 8)
    taken = [spares.take() for _ in range(4)]  # half of them
    for path in taken:  # moved away as a hot log would be (kept: their inodes stay taken)
        assert path is not None
        path.rename(tmp_path / path.name)
    again = _wait_for_spares(tmp_path / ".spare", 8)
    spares.close()
    assert len(again - first) >= 4


def test_spare_files_left_by_an_earlier_process_are_used(tmp_path: Path, make_table) -> None:
    left = tmp_path / "store" / "events" / ".spare" / "left-over"
    left.parent.mkdir(parents=True)
    left.write_bytes(b"garbage from a crash")
    inode = left.stat().st_ino
    store = EmbeddedStore(tmp_path / "store")
    store.write_hot(make_table(CHARGE))
    assert store.segments()[0].stat().st_ino == inode
    assert count(store) == 4
    store.close()


def test_a_hot_segment_compacted_between_listing_and_mapping_is_listed_again(
    embedded, make_table, monkeypatch
) -> None:
    embedded.write_hot(make_table(CHARGE))
    stale = embedded.segments()
    embedded.compact()  # the listed hot segment moves to .trash
    reader = EmbeddedStore(embedded.root)
    listed_once(monkeypatch, stale)
    assert count(reader) == 4
    reader.close()


def _spans_table(spans: int = 300) -> pa.Table:
    request = trace_request(0, spans)
    table, _, _ = NativeTraceDecoder(Normaliser()).decode(
        request.SerializeToString(), lambda: request, "test"
    )
    return table


def _ipc_size(table: pa.Table) -> int:
    counter = pa.MockOutputStream()
    with pa.ipc.new_stream(counter, table.schema) as writer:
        writer.write_table(table)
    return counter.size()


class DirectFiles:
    """Spies on `os.open` and `os.write`: which files were opened for direct I/O, and
    what a direct write is made to answer (a failure, or a write cut short)."""

    def __init__(self, monkeypatch, fail_with: int | None = None, cut_to: int | None = None):
        self.opened: list[str] = []
        self.fds: set[int] = set()
        self.fail_with, self.cut_to = fail_with, cut_to
        self.real_open, self.real_write = os.open, os.write
        monkeypatch.setattr(os, "open", self.open)
        monkeypatch.setattr(os, "write", self.write)
        monkeypatch.setitem(hot_segments._direct, "refused", False)

    def open(self, path, flags, *args):
        fd = self.real_open(path, flags, *args)
        self.fds.discard(fd)  # a number closed before, given out again
        if flags & getattr(os, "O_DIRECT", 0):
            self.opened.append(str(path))
            self.fds.add(fd)
        return fd

    def write(self, fd, data):
        if fd in self.fds and self.fail_with is not None:
            raise OSError(self.fail_with, os.strerror(self.fail_with))
        if fd in self.fds and self.cut_to is not None:
            self.fds.discard(fd)
            return self.cut_to  # as if cut short; the next write is misaligned
        return self.real_write(fd, data)


def test_a_hot_segment_is_written_with_direct_io(tmp_path: Path, monkeypatch) -> None:
    files = DirectFiles(monkeypatch)
    hot_segments.write_ipc(_spans_table(), tmp_path / "one.arrow")
    if not hasattr(os, "O_DIRECT") or hot_segments._direct["refused"]:
        pytest.skip("no direct I/O on this file system")
    assert files.opened == [str(tmp_path / "one.arrow")]


def test_a_direct_write_pads_the_stream_to_whole_blocks_and_reads_back(
    tmp_path: Path, monkeypatch
) -> None:
    DirectFiles(monkeypatch)
    table = _spans_table()
    path = tmp_path / "one.arrow"
    hot_segments.write_ipc(table, path)
    if not hasattr(os, "O_DIRECT") or hot_segments._direct["refused"]:
        pytest.skip("no direct I/O on this file system")
    assert _ipc_size(table) % hot_segments.ALIGN  # the stream alone is not whole blocks
    assert path.stat().st_size == -(-_ipc_size(table) // hot_segments.ALIGN) * hot_segments.ALIGN
    assert hot_segments.read_ipc(path).equals(as_events(table))


def test_the_padding_after_a_stream_is_zeros_whatever_the_scratch_held(
    tmp_path: Path, monkeypatch
) -> None:
    DirectFiles(monkeypatch)
    hot_segments.write_ipc(_spans_table(900), tmp_path / "large.arrow")  # fills the scratch
    table = _spans_table(10)
    hot_segments.write_ipc(table, tmp_path / "small.arrow")
    if not hasattr(os, "O_DIRECT") or hot_segments._direct["refused"]:
        pytest.skip("no direct I/O on this file system")
    padding = (tmp_path / "small.arrow").read_bytes()[_ipc_size(table):]
    assert padding and padding == bytes(len(padding))


def test_a_hot_segment_written_as_an_ipc_file_by_an_earlier_version_is_read(
    embedded, make_table
) -> None:
    embedded.write(make_table(CHARGE))
    [segment] = embedded.segments()
    table = pq.read_table(segment)
    earlier = segment.with_suffix(hot_segments.SUFFIX)
    with pa.OSFile(str(earlier), "wb") as sink, pa.ipc.new_file(sink, table.schema) as writer:
        writer.write_table(table)  # the format hot segments had before streams
    segment.unlink()
    assert earlier.read_bytes().startswith(hot_segments.FILE_MAGIC)
    reader = EmbeddedStore(embedded.root)
    assert count(reader) == 4
    reader.close()


def test_a_hot_log_is_renamed_from_its_spare_once_and_appends_rename_nothing(
    embedded, make_table, monkeypatch
) -> None:
    embedded.write_hot(make_table(CHARGE[:1]))
    _wait_for_spares(embedded.events_dir / ".spare", 8)
    embedded.compact()  # closes the log: the next write starts another
    renames: list[tuple[Path, Path]] = []
    real_rename = os.rename

    def rename(source, target) -> None:
        renames.append((Path(source), Path(target)))
        real_rename(source, target)

    monkeypatch.setattr(os, "rename", rename)
    embedded.write_hot(make_table(CHARGE[1:2]))
    embedded.write_hot(make_table(CHARGE[2:]))
    [(source, target)] = renames
    assert source.parent.name == ".spare" and target == embedded.segments()[-1]
    assert count(embedded) == 4


def test_a_hot_write_whose_spares_folder_went_is_written_all_the_same(
    embedded, make_table
) -> None:
    embedded.write_hot(make_table(CHARGE[:1]))
    spares = embedded.events_dir / ".spare"
    _wait_for_spares(spares, 8)
    for spare in spares.iterdir():
        spare.unlink()
    spares.rmdir()
    embedded.write_hot(make_table(CHARGE[1:]))
    assert count(embedded) == 4


def test_a_file_system_refusing_direct_io_gets_the_same_file(tmp_path: Path, monkeypatch) -> None:
    real_open = os.open

    def no_direct_io(path, flags, *args):  # as some file systems answer O_DIRECT
        if flags & getattr(os, "O_DIRECT", 0):
            raise OSError(errno.EINVAL, "Invalid argument")
        return real_open(path, flags, *args)

    monkeypatch.setattr(os, "open", no_direct_io)
    monkeypatch.setitem(hot_segments._direct, "refused", False)
    table = _spans_table()
    hot_segments.write_ipc(table, tmp_path / "buffered.arrow")
    assert hot_segments._direct["refused"]
    assert (tmp_path / "buffered.arrow").stat().st_size == _ipc_size(table)
    assert hot_segments.read_ipc(tmp_path / "buffered.arrow").equals(as_events(table))


def test_a_file_larger_than_the_scratch_memory_is_streamed(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(hot_segments, "KEEP_SCRATCH", 64 * 1024)
    kept = len(getattr(hot_segments._scratch, "memory", b""))
    table = _spans_table(3000)
    assert kept < table.nbytes  # had it been encoded in memory, that memory would grow
    hot_segments.write_ipc(table, tmp_path / "large.arrow")
    assert hot_segments.read_ipc(tmp_path / "large.arrow").equals(as_events(table))
    assert len(getattr(hot_segments._scratch, "memory", b"")) == kept  # no memory its size


def test_metadata_beyond_the_estimate_is_written_all_the_same(tmp_path: Path) -> None:
    table = _spans_table(10)
    # Not in table.nbytes, and more than any scratch memory kept from earlier writes.
    table = table.replace_schema_metadata({"note": "x" * hot_segments.KEEP_SCRATCH})
    hot_segments.write_ipc(table, tmp_path / "noted.arrow")
    with pa.memory_map(str(tmp_path / "noted.arrow")) as source:
        written = pa.ipc.open_stream(source).read_all()
    assert written.equals(table) and written.schema.metadata == table.schema.metadata


def test_a_first_direct_write_refused_is_written_buffered_and_not_tried_again(
    tmp_path: Path, monkeypatch
) -> None:
    files = DirectFiles(monkeypatch, fail_with=errno.EINVAL)
    table = _spans_table()
    hot_segments.write_ipc(table, tmp_path / "refused.arrow")
    assert hot_segments.read_ipc(tmp_path / "refused.arrow").equals(as_events(table))
    assert hot_segments._direct["refused"]
    hot_segments.write_ipc(table, tmp_path / "next.arrow")
    assert len(files.opened) == (1 if hasattr(os, "O_DIRECT") else 0)


def test_a_direct_write_cut_short_is_written_again_buffered(tmp_path: Path, monkeypatch) -> None:
    DirectFiles(monkeypatch, cut_to=1000)
    table = _spans_table()
    hot_segments.write_ipc(table, tmp_path / "short.arrow")
    assert (tmp_path / "short.arrow").stat().st_size == _ipc_size(table)
    assert hot_segments.read_ipc(tmp_path / "short.arrow").equals(as_events(table))
    assert not hot_segments._direct["refused"]  # the next file is written direct again
