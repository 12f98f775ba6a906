"""YAML loading for CloudFormation/SAM templates, short-form intrinsic tags included.

`!Ref X` becomes `{"Ref": "X"}`, `!GetAtt A.B` becomes `{"Fn::GetAtt": ["A", "B"]}`,
`!Condition C` becomes `{"Condition": "C"}` and every other `!Name` tag becomes
`{"Fn::Name": ...}` (`!Sub`, `!If`, `!Join`, `!Select`, `!Equals`, ...), which is the
long form CloudFormation itself expands them to.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml


class TemplateLoader(yaml.SafeLoader):
    """A SafeLoader that understands CloudFormation's `!` tags."""


def _construct_value(loader: TemplateLoader, node: yaml.Node) -> Any:
    if isinstance(node, yaml.ScalarNode):
        return loader.construct_scalar(node)
    if isinstance(node, yaml.SequenceNode):
        return loader.construct_sequence(node, deep=True)
    if isinstance(node, yaml.MappingNode):
        return loader.construct_mapping(node, deep=True)
    raise yaml.constructor.ConstructorError(None, None, f"unexpected node {node!r}", node.start_mark)


def _construct_intrinsic(loader: TemplateLoader, tag_suffix: str, node: yaml.Node) -> dict[str, Any]:
    value = _construct_value(loader, node)
    if tag_suffix == "Ref":
        return {"Ref": value}
    if tag_suffix == "Condition":
        return {"Condition": value}
    if tag_suffix == "GetAtt" and isinstance(value, str):
        resource, _, attribute = value.partition(".")
        return {"Fn::GetAtt": [resource, attribute]}
    return {f"Fn::{tag_suffix}": value}


TemplateLoader.add_multi_constructor("!", _construct_intrinsic)


def load_yaml(path: Path) -> dict[str, Any]:
    """Parse a template file; the top level must be a mapping."""
    with path.open(encoding="utf-8") as handle:
        document = yaml.load(handle, Loader=TemplateLoader)  # noqa: S506 - SafeLoader subclass
    if not isinstance(document, dict):
        raise TypeError(f"{path}: a template must be a YAML mapping")
    return document
