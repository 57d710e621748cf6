"""Helpers the tests share (none of them a test): imported as ``tests.support.NAME``."""
