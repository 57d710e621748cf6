"""The stored layout of the LangGraph saver: what its rows are named and what they hold.

One place for the format, below every other module of the saver (an
import-linter contract keeps it there): nothing here reads or writes a
store, knows a saver, or imports a module of the saver outside this package.

* :mod:`.keys`: the store names: thread namespaces, checkpoint and pending
  write keys, the order a key sorts in (an injective encoding of ids);
* :mod:`.entry`: the checkpoint record (its layouts, encoded and decoded);
* :mod:`.pack`: compression of stored byte strings and its envelope;
* :mod:`.legacy`: the earlier layout's list segments, still read;
* :mod:`.items`: a msgpack array's items, as bytes (for segments and the
  serialized lists the write path cuts).
"""
