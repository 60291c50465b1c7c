"""Answering store queries: the providers behind KafkaStreams.store() and query(), and the one store path."""
