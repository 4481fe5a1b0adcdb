"""cdk-nag (AwsSolutions) wiring and the one way this project acknowledges a finding.

cdk-nag 3 is a CDK policy-validation plugin, not an Aspect: registered on the app, it runs at
synthesis and fails it on any finding not acknowledged on the construct (or an ancestor).
"""

from __future__ import annotations

import aws_cdk as cdk
from cdk_nag import AwsSolutionsChecks
from constructs import IConstruct


def register(app: cdk.App) -> None:
    """Gate synthesis on the AwsSolutions pack (``cdk synth`` fails on any finding)."""
    cdk.Validations.of(app).add_plugins(AwsSolutionsChecks(app))


def acknowledge(scope: IConstruct, rule_id: str, reason: str) -> None:
    """Accept one finding on ``scope`` and below; ``reason`` is the one-sentence justification."""
    if len(reason.split()) < 6:
        raise ValueError(f"{rule_id}: give a real reason, not {reason!r}")
    cdk.Validations.of(scope).acknowledge(cdk.Acknowledgment(id=rule_id, reason=reason))


def logical_id(construct: IConstruct) -> str:
    """The logical ID of ``construct``'s resource, as cdk-nag spells it in finding IDs."""
    element = construct.node.default_child
    if not isinstance(element, cdk.CfnElement):
        raise TypeError(f"{construct.node.path} has no CloudFormation resource")
    return cdk.Stack.of(element).get_logical_id(element)
