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
import functools
import math
from collections.abc import Callable, Mapping
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


class NotJson(ValueError):
    """A message holding what JSON cannot: a NaN or infinite number in a ``Struct``/``Value``
    (binary protobuf carries one; the proto3 JSON mapping and REST refuse it)."""


def to_json(message: Message, *, int64_as_string: bool = False) -> Any:
    """The JSON value of ``message`` (fields at their defaults left out, as proto3 does); a
    ``Struct`` number that is not finite is :class:`NotJson`."""
    return _Writer(int64_as_string).message(message)


def from_json(cls: type[Message], data: Any) -> Message:
    """A message of ``cls`` from a REST JSON value; fields it does not know are dropped (an
    engine newer than this copy of the proto may answer with more)."""
    message = cls()
    json_format.ParseDict(data, message, ignore_unknown_fields=True)
    return message


def from_view(cls: type[Message], data: Mapping[str, Any]) -> Message:
    """A message of ``cls`` from the engine's JSON-ready answer (a view, as REST would send it),
    without JSON text: what :func:`from_json` makes of the same value, at a fraction of its cost
    (each type's fields are looked up once). Keys the message does not know are dropped; a null
    is an absent field (a null ``Value``: its null)."""
    message = cls()
    _fill(message, data)
    return message


_Setter = Callable[[Message, str, Any], None]


def _fill(message: Message, data: Mapping[str, Any]) -> None:
    plan = _plan(message.DESCRIPTOR.full_name, message.DESCRIPTOR)
    for key, value in data.items():
        step = plan.get(key)
        if step is not None and (value is not None or step[2]):
            step[1](message, step[0], value)


@functools.cache
def _plan(full_name: str, descriptor: Any) -> dict[str, tuple[str, _Setter, bool]]:
    """Per JSON name: the field's name, how to set it, and whether a null sets it (a Value)."""
    plan: dict[str, tuple[str, _Setter, bool]] = {}
    for field in descriptor.fields:
        setter = _setter(field)
        nullable = field.message_type is not None and (
            field.message_type.full_name == "google.protobuf.Value"
        )
        plan[field.json_name] = (field.name, setter, nullable and not _repeated(field))
        plan.setdefault(field.name, plan[field.json_name])
    return plan


def _setter(field: FieldDescriptor) -> _Setter:
    kind = field.message_type.full_name if field.message_type is not None else None
    if field.message_type is not None and field.message_type.GetOptions().map_entry:
        value_field = field.message_type.fields_by_name["value"]
        if value_field.message_type is not None:
            return lambda m, name, v: _map_of_messages(getattr(m, name), v)
        return lambda m, name, v: getattr(m, name).update(
            {k: _scalar(value_field, x) for k, x in v.items()}
        )
    if _repeated(field):
        if kind is None:
            return lambda m, name, v: getattr(m, name).extend(_scalar(field, x) for x in v)
        return lambda m, name, v: _each(getattr(m, name), v)
    if kind in ("google.protobuf.Timestamp", "google.protobuf.Duration"):
        return lambda m, name, v: getattr(m, name).FromJsonString(v)
    if kind == "google.protobuf.Struct":
        return lambda m, name, v: _present(getattr(m, name)).update(v)
    if kind == "google.protobuf.Value":
        return lambda m, name, v: _set_value(getattr(m, name), v)
    if kind == "google.protobuf.ListValue":
        return lambda m, name, v: _present(getattr(m, name)).extend(v)
    if kind is not None:
        return lambda m, name, v: _fill(_present(getattr(m, name)), v)
    if field.type in (FieldDescriptor.TYPE_ENUM, FieldDescriptor.TYPE_BYTES) or (
        field.type in _INT64
    ):
        return lambda m, name, v: setattr(m, name, _scalar(field, v))
    return setattr


def _present(message: Any) -> Any:
    """``message`` (a field of its parent) marked present, empty as it may stay: ``{}`` is a
    value, not an absence (``update({})`` alone would leave the field unset)."""
    message.SetInParent()
    return message


def _each(target: Any, values: Any) -> None:
    for value in values:
        _fill(target.add(), value)


def _map_of_messages(target: Any, values: Mapping[str, Any]) -> None:
    for key, value in values.items():
        _fill(target[key], value)


def _scalar(field: FieldDescriptor, value: Any) -> Any:
    if field.type == FieldDescriptor.TYPE_ENUM and isinstance(value, str):
        assert field.enum_type is not None
        return field.enum_type.values_by_name[value].number
    if field.type == FieldDescriptor.TYPE_BYTES and isinstance(value, str):
        return base64.b64decode(value)
    if field.type in _INT64:
        return int(value)
    return value


def _set_value(target: Any, value: Any) -> None:
    """A ``google.protobuf.Value`` from a JSON value."""
    if value is None:
        target.null_value = 0
    elif isinstance(value, bool):
        target.bool_value = value
    elif isinstance(value, int | float):
        target.number_value = value
    elif isinstance(value, str):
        target.string_value = value
    elif isinstance(value, dict):
        _present(target.struct_value).update(value)
    else:
        _present(target.list_value).extend(value)


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
            if not math.isfinite(number):
                # JSON has no such number, so no Struct can hold one (the mapping says so too).
                raise NotJson(f"{number} is not a JSON number: send a finite number, or null")
            if number.is_integer() and abs(number) <= _MAX_SAFE:
                return int(number)
            return number
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
