"""The OpenAI Responses API in front of the memory proxy's turns: ``POST /v1/responses``."""

from __future__ import annotations

from fastapi import APIRouter

from .proxy import ClientReadableErrors

__all__ = ["router"]

router = APIRouter(route_class=ClientReadableErrors)
