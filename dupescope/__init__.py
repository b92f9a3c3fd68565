"""dupescope: forensics and observability for duplicate job executions."""

__version__ = "0.1.0"
