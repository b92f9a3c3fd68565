"""The running collector: receivers (OTLP/HTTP, OTLP/gRPC, JSON-lines POST, file tails)
feeding one group-committing writer, so that every acknowledgement means "durable"."""
