"""The pieces of the ``swarmstate`` command; :mod:`swarmstate.cli` is its entry point."""
