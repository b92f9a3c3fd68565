"""Hot logs: a writer's group commits appended to one file; readers take whole frames only."""

import errno
import fcntl
import os
import struct
from pathlib import Path

import pytest
from support.charge_events import CHARGE, count

from queries import timeline
from store import hot_log, hot_segments
from store.embedded import EmbeddedStore


def _logs(store: EmbeddedStore) -> list[Path]:
    return [p for p in store.segments() if hot_log.is_log(p)]


def _second_frame(log: Path) -> int:
    """Where a log's second frame begins."""
    (length,) = struct.unpack_from("<Q", log.read_bytes(), 8)
    return hot_segments.aligned(hot_log.HEADER + length)


def _two_frames(store: EmbeddedStore, make_table) -> Path:
    store.write_hot(make_table(CHARGE[:2]))
    store.write_hot(make_table(CHARGE[2:]))
    [log] = _logs(store)
    store.close()  # as a collector that stopped
    return log


def test_a_reader_sees_the_frames_appended_after_its_first_read(embedded, make_table) -> None:
    embedded.write_hot(make_table(CHARGE[:2]))
    reader = EmbeddedStore(embedded.root)
    assert count(reader) == 2
    embedded.write_hot(make_table(CHARGE[2:]))
    assert count(reader) == 4
    reader.close()


def test_a_hot_log_that_grows_changes_the_snapshot(embedded, make_table) -> None:
    embedded.write_hot(make_table(CHARGE[:2]))
    before = embedded.snapshot_id()
    embedded.write_hot(make_table(CHARGE[2:]))
    assert embedded.snapshot_id() != before


def test_a_key_timeline_sees_rows_appended_after_a_first_lookup(embedded, make_table) -> None:
    embedded.write_hot(make_table(CHARGE[:2]))
    reader = EmbeddedStore(embedded.root)
    assert timeline(reader, "inv-1").shape[0] == 2
    embedded.write_hot(make_table(CHARGE[2:]))
    assert timeline(reader, "inv-1").shape[0] == 4
    reader.close()


def test_a_frame_cut_short_by_a_crash_is_not_read(tmp_path: Path, make_table) -> None:
    log = _two_frames(EmbeddedStore(tmp_path / "store"), make_table)
    os.truncate(log, _second_frame(log) + hot_log.HEADER + 10)
    reader = EmbeddedStore(tmp_path / "store")
    assert count(reader) == 2
    reader.close()


def test_a_frame_whose_bytes_changed_is_not_read(tmp_path: Path, make_table) -> None:
    log = _two_frames(EmbeddedStore(tmp_path / "store"), make_table)
    data = bytearray(log.read_bytes())
    data[_second_frame(log) + hot_log.HEADER + 100] ^= 0xFF
    log.write_bytes(bytes(data))
    reader = EmbeddedStore(tmp_path / "store")
    assert count(reader) == 2
    reader.close()


def test_garbage_after_the_last_frame_is_not_read(tmp_path: Path, make_table) -> None:
    log = _two_frames(EmbeddedStore(tmp_path / "store"), make_table)
    with open(log, "ab") as handle:
        handle.write(os.urandom(5000))
    reader = EmbeddedStore(tmp_path / "store")
    assert count(reader) == 4
    reader.close()


def test_compaction_leaves_a_log_that_a_writer_holds(tmp_path: Path, make_table) -> None:
    writer = EmbeddedStore(tmp_path / "store")
    writer.write_hot(make_table(CHARGE))
    other = EmbeddedStore(tmp_path / "store")
    assert other.compact() == 0
    assert [p.suffix for p in other.segments()] == [".arrowlog"]
    writer.close()
    other.close()


def test_a_log_whose_writer_closed_it_is_compacted(tmp_path: Path, make_table) -> None:
    writer = EmbeddedStore(tmp_path / "store")
    writer.write_hot(make_table(CHARGE))
    writer.close()
    other = EmbeddedStore(tmp_path / "store")
    assert other.compact() == 1
    assert [p.suffix for p in other.segments()] == [".parquet"]
    assert count(other) == 4
    other.close()


def test_compacting_the_writers_own_store_takes_its_log_and_the_next_write_starts_another(
    embedded, make_table
) -> None:
    embedded.write_hot(make_table(CHARGE[:2]))
    assert embedded.compact() == 1
    embedded.write_hot(make_table(CHARGE[2:]))
    assert sorted(p.suffix for p in embedded.segments()) == [".arrowlog", ".parquet"]
    assert count(embedded) == 4


def test_a_log_is_closed_once_it_holds_log_frames(embedded, make_table, monkeypatch) -> None:
    monkeypatch.setattr(hot_log, "LOG_FRAMES", 2)
    for event in CHARGE[:3]:
        embedded.write_hot(make_table([event]))
    assert len(_logs(embedded)) == 2
    assert count(embedded) == 3


def test_a_log_is_closed_once_it_holds_log_bytes(embedded, make_table, monkeypatch) -> None:
    monkeypatch.setattr(hot_log, "LOG_BYTES", 1)
    for event in CHARGE[:3]:
        embedded.write_hot(make_table([event]))
    assert len(_logs(embedded)) == 3


def test_after_a_failed_write_the_next_commit_starts_a_new_log(
    embedded, make_table, monkeypatch
) -> None:
    embedded.write_hot(make_table(CHARGE[:1]))
    real_fdatasync = os.fdatasync
    monkeypatch.setattr(os, "fdatasync", lambda fd: (_ for _ in ()).throw(OSError(errno.EIO, "")))
    with pytest.raises(OSError):
        embedded.write_hot(make_table(CHARGE[1:2]))
    monkeypatch.setattr(os, "fdatasync", real_fdatasync)
    embedded.write_hot(make_table(CHARGE[2:]))
    assert len(_logs(embedded)) == 2


def test_a_commit_too_large_for_the_scratch_memory_is_a_hot_segment_of_its_own(
    embedded, make_table, monkeypatch
) -> None:
    monkeypatch.setattr(hot_segments, "KEEP_SCRATCH", 64 * 1024)
    embedded.write_hot(make_table(CHARGE * 300))
    [segment] = embedded.segments()
    assert segment.suffix == ".arrow"
    assert hot_segments.read_ipc(segment).num_rows == 1200


def test_a_file_system_refusing_direct_io_gets_the_same_log(
    embedded, make_table, monkeypatch
) -> None:
    real_open = os.open

    def no_direct_io(path, flags, *args):  # as some file systems answer O_DIRECT
        if flags & hot_segments.O_DIRECT:
            raise OSError(errno.EINVAL, "Invalid argument")
        return real_open(path, flags, *args)

    monkeypatch.setattr(os, "open", no_direct_io)
    monkeypatch.setitem(hot_segments._direct, "refused", False)
    embedded.write_hot(make_table(CHARGE[:2]))
    embedded.write_hot(make_table(CHARGE[2:]))
    assert hot_segments._direct["refused"]
    assert count(embedded) == 4


def test_a_direct_append_refused_goes_on_buffered(embedded, make_table, monkeypatch) -> None:
    real_pwrite = os.pwrite
    refused = []

    def pwrite(fd, data, offset):  # as a file system that opens O_DIRECT but cannot write it
        if fcntl.fcntl(fd, fcntl.F_GETFL) & hot_segments.O_DIRECT:
            refused.append(fd)
            raise OSError(errno.EINVAL, "Invalid argument")
        return real_pwrite(fd, data, offset)

    monkeypatch.setattr(os, "pwrite", pwrite)
    embedded.write_hot(make_table(CHARGE[:2]))
    embedded.write_hot(make_table(CHARGE[2:]))
    if not hot_segments.O_DIRECT or hot_segments._direct["refused"]:
        pytest.skip("no direct I/O on this file system")
    assert refused
    assert count(embedded) == 4


def test_a_log_closed_before_its_first_frame_is_discarded_by_compaction(
    embedded, make_table
) -> None:
    embedded.write(make_table(CHARGE))
    [segment] = embedded.segments()
    (segment.parent / f"0-empty{hot_log.LOG_SUFFIX}").touch()
    embedded.compact()
    assert [p.suffix for p in embedded.segments()] == [".parquet"]
    assert count(embedded) == 4
