"""The plain-language verdict on one key: what ran, why it ran again, and whether it harmed.

The cause and outcome come from the forensic answer (`queries.duplicates`); the words
that make them concrete ("the first worker went silent after its side effect") come from
the key's own executions (queries/key_executions.py), so the sentence names what the
person can see in the timeline. The dashboard's timeline page and `dupescope timeline`
show the same Verdict; each escapes or formats it for its own medium.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from queries.key_executions import frame_rows

if TYPE_CHECKING:  # imported where a frame is given: `dupescope timeline` gives none
    import pandas as pd

#: One execution of `queries.key_executions.summarise_rows`, as plain values.
Run = Mapping[str, Any]

ORDINALS = ("first", "second", "third", "fourth", "fifth")
TIMES = {2: "twice", 3: "three times"}
ABSORBED_HOW = {
    "idempotency_hit": "found the idempotency record and skipped the effect",
    "lock_contended": "could not take the lock and did not run the effect",
    "occ_conflict": "lost the optimistic-concurrency check and changed nothing",
}


@dataclass(frozen=True)
class Verdict:
    """One sentence for the person on call, and whether the duplicate did harm.

    `text` holds the outcome and, for a duplicate, the cause explained in the words of
    its executions. `cause`, `causes` and `job_type` are the key's row of the forensic
    answer (absent when there is none), and `cause_line` says them in one line
    (`billing.charge · cause worker_crash (all that apply: ...)`) as the page's caption.
    Text is plain: it quotes worker ids and error reasons from the events, unescaped.
    """

    text: str
    harmful: bool | None  # None: not a duplicate, nothing ran, or the outcome is unknown
    cause: str | None = None
    causes: tuple[str, ...] = ()
    job_type: str | None = None
    cause_line: str | None = None
    #: `harmful`, `absorbed` or `unknown` (no run reported its effect); None when no
    #: duplicate.
    outcome: str | None = None

    def as_dict(self) -> dict[str, Any]:
        """The verdict as JSON-ready values (`causes` as a list)."""
        return {
            "text": self.text,
            "harmful": self.harmful,
            "cause": self.cause,
            "causes": list(self.causes),
            "job_type": self.job_type,
            "cause_line": self.cause_line,
            "outcome": self.outcome,
        }


def ordinal(position: int) -> str:
    return ORDINALS[position - 1] if 0 < position <= len(ORDINALS) else f"#{position}"


def times(count: int) -> str:
    return TIMES.get(count, f"{count} times")


def _seconds(ms: Any) -> str:
    value = float(ms) / 1000
    return f"{value:.0f} s" if value >= 10 else f"{value:.1f} s"


def _present(value: Any) -> bool:
    if value is None or type(value).__name__ in ("NAType", "NaTType"):
        return False
    return not (isinstance(value, float) and math.isnan(value))


def _short_reason(reason: Any) -> str:
    """`WorkerLostError('Worker exited prematurely: ...')` -> `WorkerLostError`."""
    return re.split(r"[(:]", str(reason), maxsplit=1)[0].strip()[:60] or str(reason)[:60]


def _still_running(executions: Sequence[Run]) -> int:
    """The position of the first execution that was still running when a later one
    started (0: the first)."""
    for position, row in enumerate(executions[:-1]):
        if any(later["start"] < row["end"] for later in executions[position + 1 :]):
            return position
    return 0


def _first_where(executions: Sequence[Run], wanted: Any) -> int:
    """The position of the first execution `wanted` holds for, else of the first."""
    return next((i for i, row in enumerate(executions) if wanted(row)), 0)


def _reason(cause: str | None, executions: Sequence[Run], job_ids: int) -> str:
    """Why the key ran more than once, in the words of its executions."""
    if cause == "producer_retry":
        return f"because the producer enqueued it {times(job_ids)} as separate jobs"
    if cause == "visibility_timeout":
        at = _still_running(executions)
        row = executions[at]
        vt = row["visibility_timeout_ms"]
        window = f" ({_seconds(vt)})" if _present(vt) else ""
        return (
            f"because the visibility timeout{window} ran out while the "
            f"{ordinal(at + 1)} execution was still running (it ran "
            f"{_seconds(row['duration_ms'])})"
        )
    if cause == "worker_crash":
        at = _first_where(executions, lambda r: r["outcome"] == "silent"
                          or _present(r["settled_by"]))
        row = executions[at]
        who = f"the {ordinal(at + 1)} worker"
        if _present(row["worker_id"]):
            who += f" ({row['worker_id']})"
        if _present(row["settled_by"]) or row["outcome"] != "silent":
            why = f" ({_short_reason(row['reason'])})" if _present(row["reason"]) else ""
            after = " after its side effect" if row["side_effect"] else ""
            return (
                f"because {who} was lost{after} and its delivery was settled on its "
                f"behalf{why}"
            )
        after = "after its side effect" if row["side_effect"] else "before finishing"
        return f"because {who} went silent {after}"
    if cause == "broker_redelivery":
        return "because the broker delivered it again after the first execution had acked"
    if cause == "retry_after_failure":
        at = _first_where(executions, lambda r: r["outcome"] in ("nack", "fail"))
        row = executions[at]
        why = f" ({row['reason']})" if _present(row["reason"]) else ""
        after = " after its side effect" if row["side_effect"] else ""
        return (
            f"because the {ordinal(at + 1)} execution failed{after}{why} "
            "and was retried"
        )
    return "for a reason the events do not show"


#: What the verdict says when no run reported its effect: the outcome cannot be told, and
#: what would tell it.
UNKNOWN_OUTCOME = (
    "no execution reported what became of its effect, so whether it harmed is unknown "
    "(absorbed or run twice cannot be told from these events). To tell them apart, emit "
    "`side_effect` where the task runs its effect (one line with dupescope's "
    "instrumentation: `instrument.current_run().side_effect()`), or log it as a JSON line "
    "keyed by the task id: {\"event\": \"side_effect\", \"job_id\": TASK_ID, \"ts\": ...}."
)


def outcome_of_rows(executions: Sequence[Run]) -> str:
    """`harmful`, `absorbed` or `unknown`, by the contract's rule, from a key's executions
    (queries/key_executions.py): the answer for a key the forensic answer has no row of."""
    if sum(bool(row["side_effect"]) for row in executions) >= 2:
        return "harmful"

    def reported(row: Run) -> bool:
        if "effect_reported" in row:
            return bool(row["effect_reported"])
        # A summary without the column: what it says of effects and skips.
        return bool(row["side_effect"]) or _present(row["absorbed_by"])

    return "absorbed" if any(reported(row) for row in executions) else "unknown"


def outcome_of(executions: pd.DataFrame) -> str:
    """`outcome_of_rows` of a frame of executions."""
    return outcome_of_rows(frame_rows(executions))


def _outcome(executions: Sequence[Run], harmful: bool) -> str:
    effects = [i for i, row in enumerate(executions) if row["side_effect"]]
    if harmful and len(effects) >= 2:
        if len(effects) == 2:
            return f"the {ordinal(effects[1] + 1)} execution ran the effect again: harmful."
        return f"the effect ran {times(len(effects))}: harmful."
    if harmful:
        return "the effect ran more than once: harmful."
    if not effects:
        return "no execution ran the effect: absorbed."
    extras = [i for i in range(len(executions)) if i not in effects]
    if not extras:
        return "the effect ran once: absorbed."
    guarded = [i for i in extras if executions[i]["absorbed_by"] in ABSORBED_HOW]
    if guarded:
        how = ABSORBED_HOW[executions[guarded[0]]["absorbed_by"]]
        return f"the {ordinal(guarded[0] + 1)} execution {how}: absorbed."
    return f"only the {ordinal(effects[0] + 1)} execution ran the effect: absorbed."


def _leading(cause: str | None, count: int) -> str:
    redelivered = cause in ("visibility_timeout", "worker_crash", "broker_redelivery")
    verb = "Delivered" if redelivered else "Ran"
    return f"{verb} {times(count)}"


def _causes(duplicate: Mapping[str, Any]) -> tuple[str, ...]:
    causes = duplicate.get("causes")
    if isinstance(causes, str):
        return (causes,)
    if causes is None or not hasattr(causes, "__iter__"):
        return ()
    return tuple(str(c) for c in causes)


def _text_or_none(value: Any) -> str | None:
    return str(value) if _present(value) else None


def cause_line(duplicate: Mapping[str, Any]) -> str:
    """The key's job type and causes in one line, as the timeline page's caption."""
    listed = ", ".join(_causes(duplicate))
    return f"{duplicate.get('job_type')} · cause {duplicate.get('cause')}" + (
        f" (all that apply: {listed})" if listed else ""
    )


def _about(duplicate: Mapping[str, Any] | None) -> dict[str, Any]:
    """The Verdict fields taken from the key's row of `duplicates`."""
    if not duplicate:
        return {}
    return {
        "cause": _text_or_none(duplicate.get("cause")),
        "causes": _causes(duplicate),
        "job_type": _text_or_none(duplicate.get("job_type")),
        "cause_line": cause_line(duplicate),
    }


def verdict_of_rows(executions: Sequence[Run],
                    duplicate: Mapping[str, Any] | None = None) -> Verdict:
    """The verdict for one key from its executions (`summarise_rows`, in the order they
    started) and its row of `duplicates`, if any."""
    about = _about(duplicate)
    count = len(executions)
    if count == 0:
        return Verdict(
            "No execution recorded: the job was never delivered to a worker.", None, **about
        )
    if count == 1:
        ran = "ran its side effect" if executions[0]["side_effect"] else "ran no side effect"
        return Verdict(f"Ran once and {ran}: not a duplicate.", None, **about)
    cause = about.get("cause")
    said = duplicate.get("outcome") if duplicate else None
    harmful_value = duplicate.get("harmful") if duplicate else None
    if _present(said):
        outcome = str(said)
    elif _present(harmful_value):  # a row of an answer that names no outcome
        outcome = "harmful" if bool(harmful_value) else "absorbed"
    else:
        outcome = outcome_of_rows(executions)
    harmful = None if outcome == "unknown" else outcome == "harmful"
    job_ids = len({row["job_id"] for row in executions if _present(row["job_id"])})
    told = UNKNOWN_OUTCOME if harmful is None else _outcome(executions, harmful)
    text = f"{_leading(cause, count)} {_reason(cause, executions, job_ids)}; " + told
    if duplicate is None:
        text += " (Cause not classified: no forensic answer for this key.)"
    return Verdict(text, harmful, **about, outcome=outcome)


def verdict(executions: pd.DataFrame, duplicate: Mapping[str, Any] | None = None) -> Verdict:
    """`verdict_of_rows` of a frame of executions (`queries.key_executions.summarise`)."""
    return verdict_of_rows(frame_rows(executions), duplicate)
