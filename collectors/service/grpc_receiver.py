"""OTLP/gRPC: TraceService/Export and LogsService/Export on grpcio.

The services are registered with generic handlers that receive the request as bytes
(grpcio has already gunzipped it and enforced the size limit), so the body goes to the
same decoder as an HTTP body, possibly in a worker process, without being parsed twice.
A full queue is RESOURCE_EXHAUSTED with a RetryInfo trailer, which OTLP exporters honour
by retrying after the delay. The standard health service (`grpc.health.v1.Health/Check`)
answers what `/healthz` does, for probes that speak gRPC (Kubernetes' `grpc` probe,
grpc_health_probe).
"""

from __future__ import annotations

import logging
import threading
from concurrent import futures
from typing import Any

import grpc
from google.protobuf.duration_pb2 import Duration
from google.rpc.error_details_pb2 import RetryInfo
from grpc_health.v1 import health_pb2, health_pb2_grpc
from opentelemetry.proto.collector.logs.v1 import logs_service_pb2
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2

from collectors.service.auth import bearer_matches
from collectors.service.bodies import BodyError
from collectors.service.collector import Collector, without_paths
from collectors.service.http_receiver import otlp_response
from collectors.service.log_limit import SummarisedLog
from collectors.service.pipeline import QueueFull, WriteFailed

log = logging.getLogger("dupescope.collect")

#: Threads, and RPCs in flight, beyond those exports may take: the health service's.
HEALTH_THREADS = 2

SERVICES = {
    "traces": trace_service_pb2.DESCRIPTOR.services_by_name["TraceService"].full_name,
    "logs": logs_service_pb2.DESCRIPTOR.services_by_name["LogsService"].full_name,
}


class Health(health_pb2_grpc.HealthServicer):
    """`grpc.health.v1`: SERVING, or NOT_SERVING while the store cannot be written (when
    `/healthz` answers 503), for the server ("") and each OTLP service; NOT_FOUND for any
    other name. Like `/healthz` it needs no token: probes send none. `Watch` stays
    UNIMPLEMENTED, which the protocol allows and probes do not use."""

    NAMES = frozenset({"", *SERVICES.values()})

    def __init__(self, collector: Collector) -> None:
        self.collector = collector

    def Check(  # noqa: N802 - the generated service's naming
        self, request: health_pb2.HealthCheckRequest, context: grpc.ServicerContext
    ) -> health_pb2.HealthCheckResponse:
        if request.service not in self.NAMES:
            context.abort(grpc.StatusCode.NOT_FOUND, f"no service {request.service!r}")
        status = health_pb2.HealthCheckResponse
        failing = self.collector.pipeline.failure() is not None
        return status(status=status.NOT_SERVING if failing else status.SERVING)


class GrpcReceiver:
    """A grpcio server with both OTLP services; `port` is the bound one."""

    def __init__(
        self,
        collector: Collector,
        host: str = "127.0.0.1",
        port: int = 4317,
        threads: int = 8,
        credentials: grpc.ServerCredentials | None = None,
    ) -> None:
        """With `credentials`, the port speaks TLS only. Up to `4 * threads` exports are
        in flight at once, each on a thread of its own (it waits for its group commit);
        more are refused RESOURCE_EXHAUSTED. Health checks have threads beyond those, so a
        probe is answered at once however many exports wait for a slow store."""
        self.collector = collector
        self.floods = SummarisedLog(log)  # refusals come many at a time under overload
        limit = collector.max_body_bytes
        exports = threads * 4
        self._exports = threading.BoundedSemaphore(exports)
        self.server = grpc.server(
            futures.ThreadPoolExecutor(
                max_workers=exports + HEALTH_THREADS, thread_name_prefix="dupescope-grpc"
            ),
            options=[
                ("grpc.max_receive_message_length", limit),
                ("grpc.max_send_message_length", 4 * 1024 * 1024),
            ],
            maximum_concurrent_rpcs=exports + HEALTH_THREADS,
        )
        handlers = [
            grpc.method_handlers_generic_handler(
                service,
                {
                    "Export": grpc.unary_unary_rpc_method_handler(
                        self._export(kind),
                        request_deserializer=None,
                        response_serializer=lambda message: message.SerializeToString(),
                    )
                },
            )
            for kind, service in SERVICES.items()
        ]
        self.server.add_generic_rpc_handlers(handlers)
        health_pb2_grpc.add_HealthServicer_to_server(Health(collector), self.server)
        address = f"{host}:{port}"
        self.port = (
            self.server.add_secure_port(address, credentials)
            if credentials is not None
            else self.server.add_insecure_port(address)
        )
        self.host = host

    def _export(self, kind: str) -> Any:
        collector = self.collector

        def export(body: bytes, context: grpc.ServicerContext) -> Any:
            if not self._exports.acquire(blocking=False):
                collector.pipeline.count(throttled=1)
                self._refuse_full(kind, QueueFull(retry_after=1), context)
            try:
                return exported(body, context)
            finally:
                self._exports.release()

        def exported(body: bytes, context: grpc.ServicerContext) -> Any:
            if collector.token is not None:
                metadata = dict(context.invocation_metadata())
                given = str(metadata.get("authorization", ""))
                if not bearer_matches(given, collector.token):
                    context.abort(grpc.StatusCode.UNAUTHENTICATED, "missing or wrong bearer token")
            try:
                result = collector.otlp(kind, body, "protobuf", f"grpc:{kind}")
            except BodyError as exc:
                collector.bad_request()
                context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(exc))
            except QueueFull as exc:
                self._refuse_full(kind, exc, context)
            except WriteFailed as exc:
                self._refused("UNAVAILABLE", kind, exc)
                context.abort(grpc.StatusCode.UNAVAILABLE, f"not stored: {without_paths(str(exc))}")
            return otlp_response(kind, result)

        return export

    def _refuse_full(self, kind: str, exc: QueueFull, context: grpc.ServicerContext) -> None:
        """RESOURCE_EXHAUSTED with a RetryInfo trailer (raises, as `abort` does)."""
        self._refused("RESOURCE_EXHAUSTED", kind, exc)
        info = RetryInfo(retry_delay=Duration(seconds=exc.retry_after))
        context.set_trailing_metadata((("google.rpc.retryinfo-bin", info.SerializeToString()),))
        context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, str(exc))

    def _refused(self, code: str, kind: str, exc: Exception) -> None:
        self.floods.warn(code, "gRPC %s %s: %s", code, kind, exc)

    def start(self) -> GrpcReceiver:
        self.server.start()
        return self

    def stop(self, grace: float = 2.0) -> None:
        self.server.stop(grace).wait()
