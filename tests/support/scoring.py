"""How well a source's `dupescope duplicates --format json` rows match the truth.

precision: reported keys that truly ran more than once / reported keys.
recall: true duplicates reported / true duplicates.
cause accuracy: of the true duplicates reported whose true cause the source can carry
(`evidence`), the share whose reported `cause` is the true one.
harm accuracy (`harm`): of the true duplicates reported, the share whose `outcome` is the
true one (`harmful` when the effect ran twice, else `absorbed`); an `unknown` is never
right, and `unknowns` counts them.
An empty report has precision 1.0 (it said nothing wrong): its recall tells.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Score:
    reported: int
    true_duplicates: int
    found: int
    cause_judged: int
    cause_right: int
    false_positives: list[str] = field(default_factory=list)
    missed: list[str] = field(default_factory=list)
    wrong_causes: dict[str, tuple[str, str]] = field(default_factory=dict)  # key: (said, true)

    @property
    def precision(self) -> float:
        return self.found / self.reported if self.reported else 1.0

    @property
    def recall(self) -> float:
        return self.found / self.true_duplicates if self.true_duplicates else 1.0

    @property
    def cause_accuracy(self) -> float:
        return self.cause_right / self.cause_judged if self.cause_judged else 1.0

    def summary(self) -> str:
        return (
            f"precision {self.precision:.3f} ({self.found}/{self.reported}), "
            f"recall {self.recall:.3f} ({self.found}/{self.true_duplicates}), "
            f"cause {self.cause_accuracy:.3f} ({self.cause_right}/{self.cause_judged}); "
            f"false positives {self.false_positives[:5]}"
            f"{'...' if len(self.false_positives) > 5 else ''}, missed {self.missed}, "
            f"wrong causes {self.wrong_causes}"
        )


def score(
    rows: Iterable[Mapping],
    truth: Mapping[str, str],
    evidence: Iterable[str] | None = None,
) -> Score:
    """Score duplicate rows against `truth` (key -> true cause; see Truth.by_key and
    Truth.by_job_id). `evidence`: the causes this source can tell; None means all."""
    said = {str(row["key"]): row.get("cause") for row in rows}
    judged = set(evidence) if evidence is not None else None
    found = [k for k in said if k in truth]
    considered = [k for k in found if judged is None or truth[k] in judged]
    wrong = {k: (str(said[k]), truth[k]) for k in considered if said[k] != truth[k]}
    return Score(
        reported=len(said),
        true_duplicates=len(truth),
        found=len(found),
        cause_judged=len(considered),
        cause_right=len(considered) - len(wrong),
        false_positives=sorted(k for k in said if k not in truth),
        missed=sorted(k for k in truth if k not in said),
        wrong_causes=wrong,
    )


@dataclass(frozen=True)
class Harm:
    judged: int
    right: int
    unknowns: int
    wrong: dict[str, tuple[str, str]] = field(default_factory=dict)  # key: (said, true)

    @property
    def accuracy(self) -> float:
        return self.right / self.judged if self.judged else 1.0

    def summary(self) -> str:
        return (f"harm {self.accuracy:.3f} ({self.right}/{self.judged}), "
                f"unknown {self.unknowns}, wrong {dict(list(self.wrong.items())[:5])}")


def harm(rows: Iterable[Mapping], truth: Mapping[str, str], harmful: set[str]) -> Harm:
    """Score the `outcome` of the true duplicates among `rows` (`truth`: key -> cause, as
    for `score`) against `harmful`, the keys whose effect truly ran twice."""
    said = {str(row["key"]): row.get("outcome") for row in rows}
    found = [k for k in said if k in truth]
    expected = {k: "harmful" if k in harmful else "absorbed" for k in found}
    wrong = {k: (str(said[k]), expected[k]) for k in found if said[k] != expected[k]}
    return Harm(judged=len(found), right=len(found) - len(wrong),
                unknowns=sum(said[k] == "unknown" for k in found), wrong=wrong)
