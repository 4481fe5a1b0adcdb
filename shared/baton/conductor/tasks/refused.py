"""Why a task type is refused: one of Conductor's own that Baton does not run, or a type no
Conductor server has built in (a custom system task of the server the definition comes from, as
``USER_TASK`` and ``BLOCKING_SYSTEM_TASK`` are in Conductor's test harness)."""

from __future__ import annotations

from collections.abc import Iterable

# Conductor OSS's task types (its TaskType enum) and those of its bundled modules.
CONDUCTOR_TYPES = frozenset(
    {
        "SIMPLE",
        "DYNAMIC",
        "FORK_JOIN",
        "FORK_JOIN_DYNAMIC",
        "DECISION",
        "SWITCH",
        "JOIN",
        "DO_WHILE",
        "SUB_WORKFLOW",
        "START_WORKFLOW",
        "EVENT",
        "WAIT",
        "HUMAN",
        "USER_DEFINED",
        "HTTP",
        "HTTP_POLL",
        "LAMBDA",
        "INLINE",
        "EXCLUSIVE_JOIN",
        "TERMINATE",
        "KAFKA_PUBLISH",
        "JSON_JQ_TRANSFORM",
        "SET_VARIABLE",
        "NOOP",
        "JDBC",
        "LLM_TEXT_COMPLETE",
        "LLM_CHAT_COMPLETE",
        "LLM_INDEX_TEXT",
        "LLM_SEARCH_INDEX",
        "LLM_GENERATE_EMBEDDINGS",
        "LLM_STORE_EMBEDDINGS",
        "LLM_GET_EMBEDDINGS",
        "LIST_MCP_TOOLS",
        "CALL_MCP_TOOL",
        "PULL_WORKFLOW_MESSAGES",
        "AGENT",
        "GET_AGENT_CARD",
        "CANCEL_AGENT",
        "GENERATE_IMAGE",
        "GENERATE_AUDIO",
        "GENERATE_VIDEO",
        "GENERATE_PDF",
    }
)


def unsupported(kind: str, supported: Iterable[str]) -> str:
    """The refusal of task type ``kind``."""
    listed = ", ".join(supported)
    if kind in CONDUCTOR_TYPES:
        return f"task type {kind} cannot be translated to Baton (supported: {listed})"
    return (
        f"task type {kind} is not one of Conductor's task types: a custom system task type of "
        f"the server the definition comes from, which Baton does not have (supported: {listed})"
    )
