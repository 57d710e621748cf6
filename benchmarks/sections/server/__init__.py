"""The server section: many users awaiting one graph on one event loop (see :mod:`.section`)."""
