"""Messages to REST JSON and back.

REST JSON is the proto3 JSON mapping with two choices the REST API makes: 64-bit integers are JSON
numbers (the mapping allows numbers or strings; REST's strict validation wants numbers), and a
``Struct``/``Value`` number that is whole is an integer (binary protobuf carries every number in a
``Struct`` as a double: ``3`` would come back as ``3.0``, which JSON does not distinguish but
Python, jsonb and the workers do). ``int64_as_string`` gives the canonical mapping (strings), as
the Connect protocol's JSON answers use it.
"""

from __future__ import annotations

import base64
import math
from typing import Any

from google.protobuf import json_format
from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.message import Message

_INT64 = frozenset(
    {
        FieldDescriptor.TYPE_INT64,
        FieldDescriptor.TYPE_SINT64,
        FieldDescriptor.TYPE_SFIXED64,
        FieldDescriptor.TYPE_UINT64,
        FieldDescriptor.TYPE_FIXED64,
    }
)
_MAX_SAFE = 2**53


def to_json(message: Message, *, int64_as_string: bool = False) -> Any:
    """The JSON value of ``message`` (fields at their defaults left out, as proto3 does)."""
    return _Writer(int64_as_string).message(message)


def from_json(cls: type[Message], data: Any) -> Message:
    """A message of ``cls`` from a REST JSON value; fields it does not know are dropped (an
    engine newer than this copy of the proto may answer with more)."""
    message = cls()
    json_format.ParseDict(data, message, ignore_unknown_fields=True)
    return message


class _Writer:
    def __init__(self, int64_as_string: bool) -> None:
        self.int64_as_string = int64_as_string

    def message(self, message: Message) -> Any:
        name = message.DESCRIPTOR.full_name
        if name == "google.protobuf.Struct":
            return {k: self.value(v) for k, v in message.fields.items()}  # type: ignore[attr-defined]
        if name == "google.protobuf.Value":
            return self.value(message)
        if name == "google.protobuf.ListValue":
            return [self.value(v) for v in message.values]  # type: ignore[attr-defined]
        if name in ("google.protobuf.Timestamp", "google.protobuf.Duration"):
            return message.ToJsonString()  # type: ignore[attr-defined]
        out: dict[str, Any] = {}
        for field, value in message.ListFields():
            if field.message_type is not None and field.message_type.GetOptions().map_entry:
                value_field = field.message_type.fields_by_name["value"]
                out[field.json_name] = {k: self.scalar(value_field, v) for k, v in value.items()}
            elif _repeated(field):
                out[field.json_name] = [self.scalar(field, v) for v in value]
            else:
                out[field.json_name] = self.scalar(field, value)
        return out

    def scalar(self, field: FieldDescriptor, value: Any) -> Any:
        if field.type == FieldDescriptor.TYPE_MESSAGE:
            return self.message(value)
        if field.type in _INT64:
            return str(value) if self.int64_as_string else int(value)
        if field.type == FieldDescriptor.TYPE_ENUM and field.enum_type is not None:
            enum_value = field.enum_type.values_by_number.get(value)
            return enum_value.name if enum_value is not None else value
        if field.type == FieldDescriptor.TYPE_BYTES:
            return base64.b64encode(value).decode("ascii")
        if isinstance(value, float):
            return _number(value)
        return value

    def value(self, value: Any) -> Any:
        kind = value.WhichOneof("kind")
        if kind is None or kind == "null_value":
            return None
        if kind == "number_value":
            number = value.number_value
            if math.isfinite(number) and number.is_integer() and abs(number) <= _MAX_SAFE:
                return int(number)
            return _number(number)
        if kind == "struct_value":
            return self.message(value.struct_value)
        if kind == "list_value":
            return [self.value(v) for v in value.list_value.values]
        return getattr(value, kind)


def _repeated(field: FieldDescriptor) -> bool:
    # protobuf 7 has is_repeated only; before 5.29 there was label only.
    flag = getattr(field, "is_repeated", None)
    if flag is not None:
        return bool(flag)
    return bool(getattr(field, "label", None) == FieldDescriptor.LABEL_REPEATED)


def _number(value: float) -> Any:
    """A double as JSON: NaN and the infinities as the mapping's strings."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    return value
