"""The ``threads`` section: 1,000 to 100,000 threads in one store (``section.py``)."""
