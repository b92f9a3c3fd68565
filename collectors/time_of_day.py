"""Dating log lines that carry only a time of day (RQ's and arq's `HH:MM:SS`).

RQ (`%(asctime)s %(message)s`, datefmt `%H:%M:%S`) and arq (`%(asctime)s: %(message)s`,
the same datefmt) write no date, no fraction of a second and no zone. A line's date comes
from `DayBasis`:

- `date` (`--date YYYY-MM-DD`): the date of the file's first line; each later line whose
  time of day is more than an hour before the line above it has crossed midnight, and
  takes the next day. This reads a log of any length.
- otherwise `reference`, the file's modification time (for a followed file, the time it
  is read, which is its modification time too): each line is the latest moment at or
  before it with that time of day. Right for a log that covers less than 24 hours before
  it was last written; for an older or longer log, give `--date`.

A line whose time carries its own date (a `--date-format` such as `%Y-%m-%d %H:%M:%S`)
takes that date and no basis.

**Order within one second.** A second holds many lines, and lines of different workers'
files within one second cannot be ordered by their time. Each line of a second is placed
at a microsecond of its own, in one of three slots, each line one microsecond after the
line of its slot above it in its own file:

- from .000000: the ends (ack, nack, fail) of runs that started in an earlier second;
- from .250000: the runs that start and end within this second and end in a nack or a
  fail, start and end;
- from .375000: the runs that start and end within this second and end in an ack;
- from .500000: the starts of runs that go on past this second.

So within one second a job's run is placed after the end of a run that began earlier, a
run that succeeded after one that failed, and a run going on past the second after the
runs over within it, in every file: a job's next run comes after its previous run's
end, as it does when that end is what made it run again (a retry after a failure, a job
run again after its work-horse was killed), whichever workers logged them (RQ and arq run
no job again after it succeeded). The costs: two runs of one job that both start and
fail within one second, in different workers' files, are in no particular order (the
retry may read as an overlap); a real overlap whose first run ends in the very second the
second run starts reads as a retry or a redelivery; and two starts of different workers
within one second are in no particular order.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta, tzinfo

from store.contract import MICROS_RANGE

#: The times a line may start with: `HH:MM:SS`, or with a date (and a fraction) before it.
TIME_PATTERN = r"(?:\d{4}-\d{2}-\d{2}[ T])?\d{2}:\d{2}:\d{2}(?:[.,]\d{1,6})?"
_TIME = re.compile(
    r"(?:(?P<date>\d{4}-\d{2}-\d{2})[ T])?(?P<h>\d{2}):(?P<m>\d{2}):(?P<s>\d{2})"
    r"(?:[.,](?P<frac>\d{1,6}))?"
)
#: Where each kind of line is placed within its second (see the module's docstring).
END_SLOT, SHORT_FAILED_SLOT, SHORT_SLOT, START_SLOT = 0, 250_000, 375_000, 500_000
#: A time of day this far before the line above it has crossed midnight (`--date`).
MIDNIGHT_STEP = timedelta(hours=1)
#: How far after the reference a line may be (a clock a little ahead of the file's).
REFERENCE_SLACK = timedelta(seconds=2)


@dataclass(frozen=True)
class DayBasis:
    """Where time-only lines take their date: `date` (the first line's), else
    `reference` (the file's modification time), in `zone` (the workers' clock)."""

    date: date | None = None
    reference: datetime | None = None
    zone: tzinfo = UTC

    def with_reference(self, moment: datetime) -> DayBasis:
        return DayBasis(self.date, moment, self.zone)


def parse_date(text: str) -> date:
    """`--date`: YYYY-MM-DD. ValueError otherwise."""
    try:
        return date.fromisoformat(text.strip())
    except ValueError as exc:
        raise ValueError(f"date {text!r} is not YYYY-MM-DD") from exc


class LineClock:
    """Dates one file's lines in order (see the module's docstring); keeps what the next
    line needs, so it is copied with a reader's checkpoint."""

    def __init__(self, basis: DayBasis) -> None:
        self.basis = basis
        self.day: date | None = basis.date
        self.last_of_day: time | None = None
        self.placed_second = -1  # the second the last line was placed in
        self.placed: dict[int, int] = {}  # by slot: the microsecond of its last line

    def second(self, text: str) -> tuple[int, bool]:
        """A line's time `text` -> (µs since the epoch of its second, or of the line where
        the time has a fraction; whether it had one). ValueError for a time that is none."""
        found = _TIME.fullmatch(text)
        if found is None:
            raise ValueError(f"time {text!r} is not HH:MM:SS")
        try:
            of_day = time(int(found["h"]), int(found["m"]), int(found["s"]))
        except ValueError as exc:
            raise ValueError(f"time {text!r} is no time of day: {exc}") from exc
        if found["date"]:
            try:
                day = date.fromisoformat(found["date"])
            except ValueError as exc:
                raise ValueError(f"time {text!r} is not a date: {exc}") from exc
        else:
            day = self._day(of_day)
        moment = datetime.combine(day, of_day, tzinfo=self.basis.zone)
        us = round(moment.timestamp()) * 1_000_000
        frac = found["frac"]
        if frac:
            us += int(frac.ljust(6, "0"))
        if not MICROS_RANGE[0] <= us <= MICROS_RANGE[1] - 1_000_000:
            raise ValueError(f"time {text!r} out of range")
        return us, bool(frac)

    def place(self, second: int, slot: int) -> int:
        """The next free microsecond of `slot` (an offset: END_SLOT, SHORT_FAILED_SLOT,
        SHORT_SLOT, START_SLOT) within `second`, after the last line placed there."""
        if second != self.placed_second:
            self.placed_second, self.placed = second, {}
        us = self.placed.get(slot, second + slot - 1) + 1
        self.placed[slot] = us
        return us

    def _day(self, of_day: time) -> date:
        if self.day is not None:  # --date: forward from the first line
            if self.last_of_day is not None and _seconds(of_day) < _seconds(
                self.last_of_day
            ) - MIDNIGHT_STEP.total_seconds():
                self.day += timedelta(days=1)
            self.last_of_day = of_day
            return self.day
        reference = self.basis.reference or datetime.now(UTC)
        local = reference.astimezone(self.basis.zone) + REFERENCE_SLACK
        candidate = datetime.combine(local.date(), of_day, tzinfo=self.basis.zone)
        if candidate > local:
            candidate -= timedelta(days=1)
        return candidate.date()


def _seconds(moment: time) -> float:
    return moment.hour * 3600 + moment.minute * 60 + moment.second
