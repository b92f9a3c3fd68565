-- The fingerprint of the exporter's tables that `events` was last refilled from.
SELECT fingerprint FROM {own:Identifier}.otel_refreshed FINAL
