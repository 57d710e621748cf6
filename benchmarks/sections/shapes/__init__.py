"""The ``shapes`` section: every state shape users write, against its peer (``section.py``)."""
