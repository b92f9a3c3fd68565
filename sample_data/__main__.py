"""`python -m sample_data`: rebuild the committed sample, or write a large fast-mode file."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from sample_data import HERE, SAMPLE_EVENTS, SAMPLE_SEED


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m sample_data", description=__doc__)
    p.add_argument("--seed", type=int, default=SAMPLE_SEED)
    p.add_argument("--events", type=int, default=SAMPLE_EVENTS,
                   help="target number of events (exact in --fast mode)")
    p.add_argument("--out", type=Path, default=HERE,
                   help="output folder (default: the committed sample beside the code)")
    p.add_argument("--format", choices=("jsonl", "otlp", "both"), default="both")
    p.add_argument("--fast", action="store_true",
                   help="write <out>/events-<n>.jsonl by templating copies of a base block")
    p.add_argument("--otlp-endpoint", default=None,
                   help="also send the spans to a collector, e.g. http://127.0.0.1:4318/v1/traces")
    args = p.parse_args(argv)

    started = time.perf_counter()
    if args.fast:
        from sample_data import fast

        path = args.out / f"events-{args.events}.jsonl"
        fast.write_jsonl(path, args.events, args.seed)
        took = time.perf_counter() - started
        print(f"{path}: {args.events} events in {took:.1f}s "
              f"({args.events / took:,.0f} events/s)", file=sys.stderr)
        return 0

    from sample_data.workload import generate

    w = generate(args.seed, args.events)
    args.out.mkdir(parents=True, exist_ok=True)
    written = [w.write_truth(args.out / "sample.truth.json")]
    if args.format in ("jsonl", "both"):
        written.append(w.write_jsonl(args.out / "sample.jsonl.gz"))
    if args.format in ("otlp", "both"):
        from sample_data.otlp import write_otlp_jsonl_file

        written.append(write_otlp_jsonl_file(w, args.out / "sample.otlp.jsonl.gz"))
    if args.otlp_endpoint:
        from sample_data.otlp import send_otlp_http

        send_otlp_http(w, args.otlp_endpoint)
    for path in written:
        print(f"{path} ({path.stat().st_size:,} bytes)", file=sys.stderr)
    print(f"{len(w.events)} events, {len(w.truth['duplicates'])} duplicates, "
          f"{time.perf_counter() - started:.1f}s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
