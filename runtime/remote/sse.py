"""Reading Server-Sent Events from an httpx response, one event at a time."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
from pydantic import BaseModel


class Event(BaseModel):
    event: str
    id: str | None = None
    data: dict[str, Any]


async def read_events(response: httpx.Response) -> AsyncIterator[Event]:
    fields: dict[str, str] = {}
    async for line in response.aiter_lines():
        if not line:
            if "event" in fields:
                yield Event(event=fields["event"], id=fields.get("id"), data=json.loads(fields.get("data", "{}")))
            fields = {}
        elif not line.startswith(":"):  # a comment keeps the line open; nothing to read
            key, _, value = line.partition(":")
            fields[key] = value.removeprefix(" ")
