"""The benchmark harness: plain Python, no Django imports.

Everything here can be imported and tested without a database; Django code talks to it
through the sink interface in ``benchrig.harness.sink``.
"""

from __future__ import annotations

HARNESS_VERSION = "0.1.0"
