"""Dataclasses that round-trip JSON objects: known fields typed, unknown ones kept.

The JSON contract may gain fields; a report read by an older package must still write
back what it read. So every record keeps the keys it does not know in ``extra``, and
``to_dict`` writes the known fields in declaration order (the contract's order), then the
extra ones in the order they came. A field declared ``optional`` is left out when it is
``None``, as the binary leaves it out when it does not apply.
"""

from __future__ import annotations

import dataclasses
import typing
from typing import Any, Dict, List

# Set on a field whose key the binary leaves out when it does not apply.
OPTIONAL = {"optional": True}


def optional_field() -> Any:
    """A field that is ``None`` when its key is absent, and written back only when set."""
    return dataclasses.field(default=None, metadata=OPTIONAL)


def extra_field() -> Any:
    """The record's keys this package does not know, kept in the order they came."""
    return dataclasses.field(default_factory=dict, repr=False, compare=True)


class Record:
    """Base of every report record: ``from_dict`` / ``to_dict`` by the declared fields."""

    extra: Dict[str, Any]

    @classmethod
    def from_dict(cls, data: Dict[str, Any]):
        """Builds the record from a decoded JSON object, keeping unknown keys in ``extra``."""
        if not isinstance(data, dict):
            raise TypeError(f"{cls.__name__} expects a JSON object, got {type(data).__name__}")
        hints = typing.get_type_hints(cls)
        values: Dict[str, Any] = {}
        known = set()
        for field in dataclasses.fields(cls):
            if field.name == "extra":
                continue
            known.add(field.name)
            if field.name in data:
                values[field.name] = _decode(hints[field.name], data[field.name])
            elif not field.metadata.get("optional"):
                raise KeyError(f"{cls.__name__}: the JSON object has no {field.name!r}")
        values["extra"] = {k: v for k, v in data.items() if k not in known}
        return cls(**values)

    def to_dict(self) -> Dict[str, Any]:
        """The JSON object this record came from: same keys, same order, same values."""
        out: Dict[str, Any] = {}
        for field in dataclasses.fields(self):
            if field.name == "extra":
                continue
            value = getattr(self, field.name)
            if value is None and field.metadata.get("optional"):
                continue
            out[field.name] = _encode(value)
        out.update(self.extra)
        return out


def _decode(hint: Any, value: Any) -> Any:
    """Turns a JSON value into the declared type: records, lists of records, or as is."""
    if value is None:
        return None
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if origin is typing.Union:
        inner = [a for a in args if a is not type(None)]
        return _decode(inner[0], value) if len(inner) == 1 else value
    if origin in (list, List) and args:
        return [_decode(args[0], item) for item in value]
    if isinstance(hint, type) and issubclass(hint, Record):
        return hint.from_dict(value)
    return value


def _encode(value: Any) -> Any:
    """The JSON value of a field: records and lists of them as plain objects."""
    if isinstance(value, Record):
        return value.to_dict()
    if isinstance(value, list):
        return [_encode(item) for item in value]
    if isinstance(value, dict):
        return {k: _encode(v) for k, v in value.items()}
    return value
