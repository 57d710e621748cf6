"""Store: the store contract in memory, with snapshots that cost the change.

``from swarmstate import Store`` is the public import; the modules of this
package are how it works, each named for its part.
"""

from swarmstate.backends.memory.store import Store

__all__ = ["Store"]
