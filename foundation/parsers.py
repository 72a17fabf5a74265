"""The one JSON parser of the API, and the one check of text every input gets.

Every JSON body is read by JSONParser (DRF's DEFAULT_PARSER_CLASSES, and
`json_body` for the views outside DRF); paths, queries and headers are
checked with the same `text_refusal` (config.middleware). Its own module:
DRF imports the parser while foundation.api is still importing DRF.
"""

import io
from collections import deque

from rest_framework import exceptions, parsers
from rest_framework.exceptions import ErrorDetail

from foundation.db import UNSTORABLE_CHARACTERS
from foundation.limits import JSON_MAX_DEPTH

TOO_DEEP = f"JSON nested more than {JSON_MAX_DEPTH} levels deep."


def text_refusal(text: str) -> ErrorDetail | None:
    """Why `text` is refused, when it holds characters PostgreSQL cannot store (foundation.db); None when it is fine."""
    found = UNSTORABLE_CHARACTERS.search(text)
    if found is None:
        return None
    if found.group() == "\x00":
        return ErrorDetail("Null characters are not allowed.", code="null_characters_not_allowed")
    return ErrorDetail("Unpaired surrogates are not allowed.", code="surrogate_characters_not_allowed")


class JSONParser(parsers.JSONParser):
    """DRF's JSON parser, for every body the API reads (DEFAULT_PARSER_CLASSES; `json_body` outside DRF).

    Nesting past JSON_MAX_DEPTH is a parse error (Python's parser recurses: far deeper, it would run out
    of stack), and text PostgreSQL cannot store is refused where it is, in keys or values, so no view or
    serializer ever sees either.
    """

    def parse(self, stream, media_type=None, parser_context=None):
        try:
            data = super().parse(stream, media_type, parser_context)
        except RecursionError as exc:
            raise exceptions.ParseError(TOO_DEEP) from exc
        if fields := _refused_text(data):
            raise exceptions.ValidationError(fields)
        return data


def json_body(raw: bytes):
    """A request body read as JSONParser reads every DRF view's: for views outside DRF."""
    return JSONParser().parse(io.BytesIO(raw))


def _refused_text(data) -> dict:
    """Per-field messages, in DRF's nested error shape, for the text PostgreSQL cannot store in `data`;
    ParseError for containers nested past JSON_MAX_DEPTH (the outermost is level 1)."""
    fields = {}
    pending = deque([(data, (), 1)])  # a queue, not recursion: the depth is what is being checked
    while pending:
        value, at, depth = pending.popleft()
        if isinstance(value, str):
            if refusal := text_refusal(value):
                _add_refusal(fields, at, refusal)
            continue
        if not isinstance(value, dict | list):
            continue
        if depth > JSON_MAX_DEPTH:
            raise exceptions.ParseError(TOO_DEEP)
        for key, item in value.items() if isinstance(value, dict) else enumerate(value):
            if isinstance(key, str) and (refusal := text_refusal(key)):
                _add_refusal(fields, at, refusal)  # said of the object: the key itself is never echoed
                continue
            pending.append((item, (*at, key), depth + 1))
    return fields


def _add_refusal(fields: dict, at: tuple, refusal: ErrorDetail) -> None:
    *parents, name = at or ("non_field_errors",)
    for step in parents:
        fields = fields.setdefault(step, {})
        if not isinstance(fields, dict):  # an outer field already says it
            return
    fields.setdefault(name, [refusal])
