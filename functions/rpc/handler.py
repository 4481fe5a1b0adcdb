"""The Connect protocol's function: every RPC of the proto's ``WorkflowEngine`` service at
``/rpc/workflow.v1.WorkflowEngine/<Method>``, answered by the REST operation it mirrors (see
``baton_lambda.connect``). Its asset holds the REST functions' folders next to its own."""

from __future__ import annotations

from pathlib import Path

from baton_lambda.connect import ConnectFunction

function = ConnectFunction(Path(__file__).resolve().parent.parent)
handler = function.handler
