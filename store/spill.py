"""Where a DuckDB connection of the store's readers spills: the system's temporary folder.

An in-memory DuckDB spills a large sort or join to `.tmp` under the working directory, so
a derived build over 100M events left gigabytes in whatever folder `dupescope` was started
from. Each connection gets a folder of its own: DuckDB removes the folder it made when the
connection closes, with whatever is in it. (A merge spills into its store instead:
store/embedded.py.)
"""

from __future__ import annotations

import os
import tempfile
import uuid


def spill_folder() -> str:
    """A folder, not made yet, for one DuckDB connection's spill files."""
    return os.path.join(tempfile.gettempdir(), f"dupescope-spill-{os.getpid()}-{uuid.uuid4().hex}")
