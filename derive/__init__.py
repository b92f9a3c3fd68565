"""The derive stage: derived tables and kept answers, kept current batch by batch."""
