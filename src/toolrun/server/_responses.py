"""JSON for responses and stream frames, encoded by msgspec: `FastJSONResponse` (the routes that answer
with a whole run) and `json_text` (one frame of a stream).

Starlette's `JSONResponse` encodes with the stdlib (`json.dumps`, then `.encode`); the `/chat` answer
holds the conversation's messages, so its encoding grows with the conversation. msgspec writes the same
JSON (compact, UTF-8) several times faster. Where they differ: a string with a lone surrogate (msgspec
refuses it; the stdlib path then runs and fails as it always did), and a non-finite float (msgspec writes
`null`, where `JSONResponse` refused the body with a 500; the service's bodies hold none).
"""

from __future__ import annotations

import json
from typing import Any

import msgspec
from starlette.responses import JSONResponse

from toolrun.models._history import clean_text

__all__ = ["FastJSONResponse", "json_text"]

_encode = msgspec.json.Encoder().encode
_encode_any = msgspec.json.Encoder(enc_hook=str).encode


def json_text(value: Any) -> str:
    """`value` as compact JSON text with clean Unicode, for a stream frame (SSE, AG-UI, AI SDK).

    msgspec first (it never writes a lone surrogate: it refuses one); what it refuses goes the stdlib way,
    with lone surrogates made U+FFFD (`clean_text`: encoding one would cut the stream). Values it cannot
    encode become their `str`, as with `json.dumps(default=str)`.
    """
    try:
        return _encode_any(value).decode()
    except (UnicodeEncodeError, TypeError, ValueError, OverflowError):
        return clean_text(json.dumps(value, ensure_ascii=False, default=str, separators=(",", ":")))


class FastJSONResponse(JSONResponse):
    """`JSONResponse` with msgspec's encoder (see the module docstring)."""

    def render(self, content: Any) -> bytes:
        try:
            return _encode(content)
        except (UnicodeEncodeError, TypeError, OverflowError):
            return super().render(content)
