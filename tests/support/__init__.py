"""What the tests of several sources share: scoring a source's duplicates against the
truth, a side-effect ledger the jobs write, and a Redis database of a test's own."""
