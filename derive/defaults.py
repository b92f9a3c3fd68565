"""Default thresholds of the checklist, in one place: the checklist's arguments and the
answers kept at build time must agree, or a kept answer would never be used."""

#: A worker whose causal pairs put its clock this far behind is flagged as skewed.
SKEW_TOLERANCE_MS = 100.0
#: A cache stampede: this many executions on one resource_key ...
STAMPEDE_MIN_EXECUTIONS = 10
#: ... starting within one window of this many microseconds (ten seconds).
STAMPEDE_WINDOW_US = 10_000_000
