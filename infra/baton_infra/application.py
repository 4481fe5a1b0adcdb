"""Build the CDK app the same way for the CLI, ``make synth`` and the tests."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import aws_cdk as cdk

from baton_infra import nag
from baton_infra.config import DeployConfig, load_cdk_json_context
from baton_infra.stack import BatonStack


def create_app(
    context: Mapping[str, Any] | None = None, *, outdir: str | None = None
) -> tuple[cdk.App, BatonStack]:
    """The app with its one stack. ``context`` overrides cdk.json and the CLI's ``-c`` values.

    cdk.json's context is loaded explicitly because a plain ``cdk.App()`` never reads it; the
    CLI's context (``CDK_CONTEXT_JSON``) still overrides it, and ``context`` overrides both.
    """
    app = cdk.App(
        context=load_cdk_json_context(),
        post_cli_context=dict(context or {}),
        outdir=outdir,
    )
    config = DeployConfig.from_context(app.node.try_get_context)
    stack = BatonStack(app, config.stack_name, config=config)
    nag.register(app)
    return app, stack
