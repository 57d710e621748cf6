"""Durable backends: ``disk`` (one SQLite file) and ``postgres``."""
