"""``caderno serve``: the HTTP API, the memory proxy and the inspector page (extra ``server``).

``create_app(memory)`` builds the FastAPI application; ``caderno serve``
runs it with uvicorn. Importing ``caderno`` never imports this package.
"""

from __future__ import annotations

from .app import create_app

__all__ = ["create_app"]
