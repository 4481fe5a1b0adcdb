"""Helpers shared by the infra tests: synthesize the real app and query its template."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aws_cdk.assertions import Template
from baton_infra.application import create_app
from baton_infra.stack import BatonStack


@dataclass
class Synth:
    """One synthesized app: the stack, its assertions Template and the raw template dict."""

    stack: BatonStack
    template: Template
    json: dict[str, Any]
    _by_type: dict[str, dict[str, dict[str, Any]]] = field(default_factory=dict)

    @property
    def resources(self) -> dict[str, dict[str, Any]]:
        resources: dict[str, dict[str, Any]] = self.json["Resources"]
        return resources

    def of_type(self, cfn_type: str) -> dict[str, dict[str, Any]]:
        if cfn_type not in self._by_type:
            self._by_type[cfn_type] = {
                logical_id: resource
                for logical_id, resource in self.resources.items()
                if resource["Type"] == cfn_type
            }
        return self._by_type[cfn_type]

    def props(self, cfn_type: str) -> list[dict[str, Any]]:
        return [r.get("Properties", {}) for r in self.of_type(cfn_type).values()]


def synthesize(outdir: Path, context: dict[str, Any]) -> Synth:
    """Synthesize the app exactly as ``infra/app.py`` does, with ``context`` on top of cdk.json."""
    app, stack = create_app(context, outdir=str(outdir))
    app.synth()  # runs the cdk-nag gate and CDK's own template validation
    template = Template.from_stack(stack)
    return Synth(stack=stack, template=template, json=dict(template.to_json()))


def function_logical_ids(synth: Synth) -> dict[str, str]:
    """Baton function name (``jobs``) -> logical ID of its AWS::Lambda::Function."""
    ids: dict[str, str] = {}
    for logical_id, resource in synth.of_type("AWS::Lambda::Function").items():
        variables = resource["Properties"].get("Environment", {}).get("Variables", {})
        service = variables.get("POWERTOOLS_SERVICE_NAME", "")
        if service.startswith("baton-"):
            ids[service.removeprefix("baton-")] = logical_id
    return ids
