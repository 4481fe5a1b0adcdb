"""Messages to REST JSON and back.

REST JSON is the proto3 JSON mapping with two choices the REST API makes: 64-bit integers are JSON
numbers (the mapping allows numbers or strings; REST's strict validation wants numbers), and a
``Struct``/``Value`` number that is whole is an integer (binary protobuf carries every number in a
``Struct`` as a double: ``3`` would come back as ``3.0``, which JSON does not distinguish but
Python, jsonb and the workers do). ``int64_as_string`` gives the canonical mapping (strings), as
the Connect protocol's JSON answers use it.

A field whose type had to widen (a Step's ``input``, a Struct, became a Value, as it may be one
``${…}``) gets a new number; the old one stays as ``legacy_<name>``, deprecated, for code
generated from the older proto. REST JSON never shows it: a message read as JSON takes a legacy
field's value for its field when that is unset, and a message made from JSON sets the legacy
field too wherever the value fits its old type.
"""

from __future__ import annotations

import base64
import functools
import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
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
    return _reader(message.DESCRIPTOR, int64_as_string)(message)


def from_json(cls: type[Message], data: Any) -> Message:
    """A message of ``cls`` from a REST JSON value; fields it does not know are dropped (an
    engine newer than this copy of the proto may answer with more)."""
    message = cls()
    json_format.ParseDict(data, message, ignore_unknown_fields=True)
    if _reaches_legacy(message.DESCRIPTOR):
        _fill_legacy(message)
    return message


def from_view(cls: type[Message], data: Mapping[str, Any]) -> Message:
    """A message of ``cls`` from the engine's JSON-ready answer (a view, as REST would send it),
    without JSON text: what :func:`from_json` makes of the same value, at a fraction of its cost
    (each type's fields are looked up once, scalars are set by the constructor). Keys the
    message does not know are dropped; a null is an absent field (a null ``Value``: its null)."""
    return _build(cls, _plan(cls.DESCRIPTOR), data)


_Setter = Callable[[Message, str, Any], None]


@dataclass(frozen=True, slots=True)
class _Plan:
    """How to make a message type from a JSON value, worked out once per type."""

    # A plain scalar field's field name, by its JSON name and its field name (set as they are,
    # by the constructor).
    plain: dict[str, str]
    # A scalar field whose value is converted (64-bit integers, enums, bytes): key, name, how.
    converted: tuple[tuple[str, str, Callable[[Any], Any]], ...]
    # Any other field (messages, repeated, maps): key, name, how to set it, whether a null sets
    # it (a Value's null).
    others: tuple[tuple[str, str, _Setter, bool], ...]


_ABSENT = object()


def _build(factory: Callable[..., Message], plan: _Plan, data: Mapping[str, Any]) -> Message:
    plain = plan.plain
    values = {plain[k]: v for k, v in data.items() if v is not None and k in plain}
    for key, name, convert in plan.converted:
        value = data.get(key)
        if value is not None:
            values[name] = convert(value)
    message = factory(**values)
    for key, name, setter, nullable in plan.others:
        value = data.get(key, _ABSENT)
        if value is not _ABSENT and (value is not None or nullable):
            setter(message, name, value)
    return message


@functools.cache
def _plan(descriptor: Any) -> _Plan:
    plain: dict[str, str] = {}
    converted: list[tuple[str, str, Callable[[Any], Any]]] = []
    others: list[tuple[str, str, _Setter, bool]] = []
    for field in descriptor.fields:
        keys = dict.fromkeys((field.json_name, field.name))  # one key when they are the same
        if field.message_type is None and not _repeated(field):
            convert = _converter(field)
            for key in keys:
                if convert is None:
                    plain[key] = field.name
                else:
                    converted.append((key, field.name, convert))
            continue
        nullable = not _repeated(field) and (
            field.message_type is not None
            and field.message_type.full_name == "google.protobuf.Value"
        )
        setter = _setter(field)
        others.extend((key, field.name, setter, nullable) for key in keys)
    for old, new in _legacy(descriptor):
        keys = dict.fromkeys((new.json_name, new.name))
        others.extend((key, old.name, _legacy_setter(old), False) for key in keys)
    return _Plan(plain, tuple(converted), tuple(others))


LEGACY_PREFIX = "legacy_"
_INT32_RANGE = range(-(2**31), 2**31)


@functools.cache
def _legacy(descriptor: Any) -> tuple[tuple[FieldDescriptor, FieldDescriptor], ...]:
    """The (old, new) field pairs of a message type: each deprecated ``legacy_<name>`` field
    and the field ``<name>`` that took its place under a wider type."""
    pairs = []
    for field in descriptor.fields:
        if field.name.startswith(LEGACY_PREFIX) and field.GetOptions().deprecated:
            new = descriptor.fields_by_name.get(field.name.removeprefix(LEGACY_PREFIX))
            if new is not None:
                pairs.append((field, new))
    return tuple(pairs)


def _fits(old: FieldDescriptor, value: Any) -> bool:
    """Whether a JSON value fits a legacy field's old type (a Struct, a bool or an int32)."""
    if old.message_type is not None:
        return isinstance(value, dict)
    if old.type == FieldDescriptor.TYPE_BOOL:
        return isinstance(value, bool)
    return isinstance(value, int) and not isinstance(value, bool) and value in _INT32_RANGE


def _legacy_setter(old: FieldDescriptor) -> _Setter:
    """Sets ``old`` from its new field's JSON value when the value fits it."""

    def set_old(message: Message, name: str, value: Any) -> None:
        if not _fits(old, value):
            return
        if old.message_type is not None:
            _present(getattr(message, name)).update(value)
        else:
            setattr(message, name, value)

    return set_old


@functools.cache
def _reaches_legacy(descriptor: Any, _seen: frozenset[str] = frozenset()) -> bool:
    """Whether a message of ``descriptor`` may hold one with legacy fields (a Definition's
    steps do; a poll's jobs do not)."""
    if _legacy(descriptor):
        return True
    seen = _seen | {descriptor.full_name}
    return any(
        field.message_type is not None
        and field.message_type.full_name not in seen
        and not field.message_type.full_name.startswith("google.protobuf.")
        and _reaches_legacy(field.message_type, seen)
        for field in descriptor.fields
    )


def _fill_legacy(message: Any) -> None:
    """Set each legacy field of ``message`` and the messages within it from its new field,
    where the value fits (see the module's docstring)."""
    descriptor = message.DESCRIPTOR
    for old, new in _legacy(descriptor):
        if message.HasField(new.name):
            value = _value(getattr(message, new.name))
            if _fits(old, value):
                _legacy_setter(old)(message, old.name, value)
    for field, value in message.ListFields():
        sub = field.message_type
        if sub is None or sub.full_name.startswith("google.protobuf.") or not _reaches_legacy(sub):
            continue
        if sub.GetOptions().map_entry:
            continue
        for each in value if _repeated(field) else (value,):
            _fill_legacy(each)


def _converter(field: FieldDescriptor) -> Callable[[Any], Any] | None:
    if field.type in (FieldDescriptor.TYPE_ENUM, FieldDescriptor.TYPE_BYTES) or (
        field.type in _INT64
    ):
        return lambda value: _scalar(field, value)
    return None


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
        if field.message_type is None:
            return lambda m, name, v: getattr(m, name).extend(_scalar(field, x) for x in v)
        # Looked up at each call (cached): a message type may contain itself (a Step's steps).
        sub = field.message_type
        return lambda m, name, v: _each(getattr(m, name), _plan(sub), v)
    if kind == "google.protobuf.Timestamp":
        return lambda m, name, v: _set_time(getattr(m, name), v)
    if kind == "google.protobuf.Duration":
        return lambda m, name, v: getattr(m, name).FromJsonString(v)
    if kind == "google.protobuf.Struct":
        return lambda m, name, v: _present(getattr(m, name)).update(v)
    if kind == "google.protobuf.Value":
        return lambda m, name, v: _set_value(getattr(m, name), v)
    if kind == "google.protobuf.ListValue":
        return lambda m, name, v: _present(getattr(m, name)).extend(v)
    assert field.message_type is not None
    sub = field.message_type
    return lambda m, name, v: getattr(m, name).CopyFrom(
        _build(type(getattr(m, name)), _plan(sub), v)
    )


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_FINER_THAN_MICROSECONDS = re.compile(r"\.[0-9]{7}")


def _set_time(target: Any, text: str) -> None:
    """A Timestamp from an RFC 3339 time (the engine's ``2026-11-26T10:50:01.123456Z``)."""
    seconds, nanos = _instant(text)
    if nanos < 0:  # not a time datetime reads (more than microseconds, or malformed)
        target.FromJsonString(text)
    else:
        target.seconds, target.nanos = seconds, nanos


@functools.lru_cache(maxsize=256)
def _instant(text: str) -> tuple[int, int]:
    """Seconds and nanoseconds since the epoch, read by ``datetime`` (C) rather than
    ``FromJsonString`` (strptime); remembered, as the jobs of one poll share their lease's end.
    ``(0, -1)``: not one ``datetime`` reads exactly (past microseconds, it rounds)."""
    if _FINER_THAN_MICROSECONDS.search(text):
        return 0, -1
    try:
        moment = datetime.fromisoformat(text)
    except (TypeError, ValueError):
        return 0, -1
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    delta = moment - _EPOCH
    return delta.days * 86_400 + delta.seconds, delta.microseconds * 1000


def _present(message: Any) -> Any:
    """``message`` (a field of its parent) marked present, empty as it may stay: ``{}`` is a
    value, not an absence (``update({})`` alone would leave the field unset)."""
    message.SetInParent()
    return message


def _each(target: Any, plan: _Plan, values: Any) -> None:
    for value in values:
        _build(target.add, plan, value)


def _map_of_messages(target: Any, values: Mapping[str, Any]) -> None:
    for key, value in values.items():
        entry = target[key]
        entry.CopyFrom(_build(type(entry), _plan(entry.DESCRIPTOR), value))


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
    if isinstance(value, dict):  # the usual: a job's input
        if value:
            target.struct_value.update(value)
        else:
            target.struct_value.SetInParent()
    elif isinstance(value, str):
        target.string_value = value
    elif isinstance(value, bool):
        target.bool_value = value
    elif isinstance(value, int | float):
        target.number_value = value
    elif value is None:
        target.null_value = 0
    else:
        _present(target.list_value).extend(value)


_Reader = Callable[[Any], Any]


@functools.cache
def _reader(descriptor: Any, int64_as_string: bool) -> _Reader:
    """How to read a message of ``descriptor`` as JSON (its fields' conversions found once)."""
    name = descriptor.full_name
    if name == "google.protobuf.Struct":
        return _struct
    if name == "google.protobuf.Value":
        return _value
    if name == "google.protobuf.ListValue":
        return lambda message: [_value(v) for v in message.values]
    if name in ("google.protobuf.Timestamp", "google.protobuf.Duration"):
        return lambda message: message.ToJsonString()
    # Keyed by the field descriptors themselves: ListFields hands out these very objects.
    fields = {
        field: (field.json_name, _field_reader(field, int64_as_string))
        for field in descriptor.fields
    }
    pairs = _legacy(descriptor)

    def read(message: Message) -> Any:
        out: dict[str, Any] = {}
        for field, value in message.ListFields():
            json_name, convert = fields[field]
            out[json_name] = value if convert is None else convert(value)
        return out

    if not pairs:
        return read
    legacy = {old: new.json_name for old, new in pairs}

    def read_folding(message: Message) -> Any:
        """``read``, a legacy field's value under its new field's name unless that is set."""
        out = read(message)
        for old, json_name in legacy.items():
            value = out.pop(old.json_name, None)
            if value is not None and json_name not in out:
                out[json_name] = value
        return out

    return read_folding


def _field_reader(field: FieldDescriptor, int64_as_string: bool) -> _Reader | None:
    """A field's value as JSON; None when it is already (a string, a bool, a 32-bit integer)."""
    if field.message_type is not None and field.message_type.GetOptions().map_entry:
        entry = _scalar_reader(field.message_type.fields_by_name["value"], int64_as_string)
        if entry is None:
            return dict
        return lambda value: {k: entry(v) for k, v in value.items()}
    one = _scalar_reader(field, int64_as_string)
    if not _repeated(field):
        return one
    if one is None:
        return list
    each = one
    return lambda value: [each(v) for v in value]


def _scalar_reader(field: FieldDescriptor, int64_as_string: bool) -> _Reader | None:
    if field.message_type is not None:
        # Looked up at each call: a message type may contain itself.
        sub = field.message_type
        return lambda value: _reader(sub, int64_as_string)(value)  # noqa: PLW0108
    if field.type in _INT64:
        return str if int64_as_string else int
    if field.type == FieldDescriptor.TYPE_ENUM and field.enum_type is not None:
        names = {v.number: v.name for v in field.enum_type.values}
        return lambda value: names.get(value, value)
    if field.type == FieldDescriptor.TYPE_BYTES:
        return lambda value: base64.b64encode(value).decode("ascii")
    if field.type in (FieldDescriptor.TYPE_DOUBLE, FieldDescriptor.TYPE_FLOAT):
        return _number
    return None


def _struct(message: Any) -> dict[str, Any]:
    return {k: _value(v) for k, v in message.fields.items()}


def _value(value: Any) -> Any:
    """A ``google.protobuf.Value`` as JSON: a whole number as an integer (see the module's
    docstring); a number JSON has no form for is :class:`NotJson`."""
    kind = value.WhichOneof("kind")
    if kind == "string_value":
        return value.string_value
    if kind == "number_value":
        number = value.number_value
        if not math.isfinite(number):
            # JSON has no such number, so no Struct can hold one (the mapping says so too).
            raise NotJson(f"{number} is not a JSON number: send a finite number, or null")
        if number.is_integer() and abs(number) <= _MAX_SAFE:
            return int(number)
        return number
    if kind == "bool_value":
        return value.bool_value
    if kind == "struct_value":
        return _struct(value.struct_value)
    if kind == "list_value":
        return [_value(v) for v in value.list_value.values]
    return None


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
