"""Celery as its users run it, for tests: a real broker, real prefork workers, real faults,
and the truth of what ran twice and why. See harness.py for the API."""
