"""The collector stage: sources -> normaliser -> Arrow batches -> a store."""
