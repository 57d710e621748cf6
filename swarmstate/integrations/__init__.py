"""Integrations with agent frameworks: ``langgraph``."""
