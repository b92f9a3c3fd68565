"""TLS for the receivers: one certificate and key, for OTLP/HTTP and OTLP/gRPC alike.

Off by default, since the receivers bind to loopback; needed once the collector listens
where exporters reach it over a network, or a bearer token would travel in the clear.
Exporters then send to `https://` (HTTP) or without `insecure` (gRPC), trusting the
certificate's issuer.
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass
from pathlib import Path

import grpc

#: How long a connecting client has to complete the TLS handshake.
HANDSHAKE_TIMEOUT = 10.0


@dataclass(frozen=True)
class TlsFiles:
    """A PEM certificate (chain) and its private key."""

    cert: Path
    key: Path

    def server_context(self) -> ssl.SSLContext:
        """For the HTTP receiver; raises ssl.SSLError (an OSError) for files that do not
        make a certificate and its key, so a bad pair stops the collector at start."""
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        context.load_cert_chain(self.cert, self.key)
        return context

    def grpc_credentials(self) -> grpc.ServerCredentials:
        return grpc.ssl_server_credentials([(self.key.read_bytes(), self.cert.read_bytes())])
