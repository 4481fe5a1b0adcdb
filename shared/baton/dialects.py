"""Definition dialects: how a definition document met at run time becomes a Baton definition.

A SUB_WORKFLOW may take its child's definition from an expression (``definition: "${…}"``),
resolved when the child starts, in the dialect its ``definitionDialect`` names. ``baton`` is
built in: the document is a Baton definition. Any other is translated by a function the layer
that knows the dialect registers when its process starts (the Conductor surface registers
``conductor``: a Conductor WorkflowDef). The engine sits below those layers and calls them
through this table without importing them; a document that cannot be read raises
:class:`DialectError`, which fails the step that met it."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from baton.errors import BatonError

BATON = "baton"
# Every dialect a step may name (``steps.SubWorkflowStep.definition_dialect``).
DIALECTS = (BATON, "conductor")

Translate = Callable[[Any], dict[str, Any]]
_registered: dict[str, Translate] = {}


class DialectError(BatonError):
    """A run-time definition document that is no definition of its dialect."""

    title = "Definition not understood"


def register(dialect: str, translate: Translate) -> None:
    """Make ``dialect`` readable in this process (idempotent)."""
    if dialect not in DIALECTS or dialect == BATON:
        raise ValueError(f"unknown definition dialect {dialect!r}")
    _registered[dialect] = translate


def to_baton(dialect: str, document: Any) -> dict[str, Any]:
    """``document`` as a Baton definition body (still to be validated as any definition); a
    :class:`DialectError`'s detail reads after the expression that gave it (``gave …``)."""
    if dialect == BATON:
        if not isinstance(document, dict):
            raise DialectError(f"gave {_kind(document)}, not a definition (a JSON object)")
        return document
    translate = _registered.get(dialect)
    if translate is None:
        raise DialectError(f"gave a {dialect} definition, but no translator for them runs here")
    if not isinstance(document, dict):
        raise DialectError(f"gave {_kind(document)}, not a {dialect} definition (a JSON object)")
    try:
        return translate(document)
    except BatonError as e:
        raise DialectError(f"gave no {dialect} definition Baton can run: {e.detail}") from e
    except (TypeError, ValueError, KeyError, AttributeError) as e:
        # A translator assumes well-typed fields; a document breaking that is still bad input.
        raise DialectError(f"gave no {dialect} definition Baton can read ({e!r})") from e


def _kind(value: Any) -> str:
    return "nothing" if value is None else type(value).__name__
