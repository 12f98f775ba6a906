"""Evaluation of CloudFormation intrinsic functions against local values.

A `Resolver` knows the stack's parameter values, pseudo parameters, conditions and
(once the resources exist locally) each resource's `Ref` value and attributes. It
evaluates `Ref`, `Fn::GetAtt`, `Fn::Sub`, `Fn::Join`, `Fn::Select`, `Fn::Split`,
`Fn::If`, `Fn::Equals`, `Fn::And`, `Fn::Or`, `Fn::Not`, `Condition`, `Fn::FindInMap`
and `Fn::Base64`; anything else is reported as unsupported, naming where it was used.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from localrun.errors import TemplateError

_NO_VALUE = object()
_SUB_VARIABLE = re.compile(r"\$\{([^}]*)\}")


@dataclass(frozen=True)
class ResourceValues:
    """What `!Ref` and `!GetAtt` return for one resource (`ref` None: `!Ref` is not emulated)."""

    ref: str | None
    attributes: Mapping[str, str] = field(default_factory=dict)


def intrinsic_name(value: Any) -> str | None:
    """The intrinsic function a value is (`Ref`, `Fn::GetAtt`, ...), or None."""
    if isinstance(value, dict) and len(value) == 1:
        (key,) = value.keys()
        if key in {"Ref", "Condition"} or key.startswith("Fn::"):
            return str(key)
    return None


def referenced_logical_ids(value: Any) -> set[str]:
    """Logical ids (or parameter names) that a value refers to through Ref, GetAtt or Sub."""
    found: set[str] = set()
    name = intrinsic_name(value)
    if name == "Ref" and isinstance(value["Ref"], str):
        found.add(value["Ref"])
    elif name == "Fn::GetAtt":
        target = value["Fn::GetAtt"]
        if isinstance(target, list) and target:
            found.add(str(target[0]))
    elif name == "Fn::Sub":
        template = value["Fn::Sub"]
        text = template[0] if isinstance(template, list) else template
        if isinstance(text, str):
            for variable in _SUB_VARIABLE.findall(text):
                if not variable.startswith("!"):
                    found.add(variable.split(".", 1)[0])
    if isinstance(value, dict):
        for item in value.values():
            found |= referenced_logical_ids(item)
    elif isinstance(value, list):
        for item in value:
            found |= referenced_logical_ids(item)
    return found


class Resolver:
    """Evaluates intrinsic functions; `resources` is empty until the stack is provisioned."""

    def __init__(
        self,
        *,
        parameters: Mapping[str, str],
        pseudo_parameters: Mapping[str, str],
        conditions: Mapping[str, Any],
        mappings: Mapping[str, Any],
        resources: Mapping[str, ResourceValues] | None = None,
        known_resource_ids: frozenset[str] = frozenset(),
    ) -> None:
        self._parameters = dict(parameters)
        self._pseudo = dict(pseudo_parameters)
        self._conditions_raw = dict(conditions)
        self._condition_values: dict[str, bool] = {}
        self._mappings = mappings
        self._resources = dict(resources or {})
        self._known_resource_ids = known_resource_ids

    def with_resources(self, resources: Mapping[str, ResourceValues]) -> Resolver:
        return Resolver(
            parameters=self._parameters,
            pseudo_parameters=self._pseudo,
            conditions=self._conditions_raw,
            mappings=self._mappings,
            resources=resources,
            known_resource_ids=self._known_resource_ids,
        )

    # -- public API -------------------------------------------------------------------------------

    def resolve(self, value: Any, where: str) -> Any:
        """Evaluate every intrinsic inside `value`; `where` names the place for error messages."""
        result = self._resolve(value, where)
        return None if result is _NO_VALUE else result

    def resolve_str(self, value: Any, where: str) -> str:
        return _to_str(self.resolve(value, where), where)

    def condition(self, name: str, where: str) -> bool:
        if name not in self._condition_values:
            if name not in self._conditions_raw:
                raise TemplateError(f"{where}: unknown condition {name!r}")
            self._condition_values[name] = self._truth(self._conditions_raw[name], f"Conditions.{name}")
        return self._condition_values[name]

    # -- evaluation -------------------------------------------------------------------------------

    def _resolve(self, value: Any, where: str) -> Any:
        name = intrinsic_name(value)
        if name is not None:
            return self._evaluate(name, value[name], where)
        if isinstance(value, dict):
            out: dict[str, Any] = {}
            for key, item in value.items():
                resolved = self._resolve(item, f"{where}.{key}")
                if resolved is not _NO_VALUE:
                    out[key] = resolved
            return out
        if isinstance(value, list):
            items = [self._resolve(item, f"{where}[{index}]") for index, item in enumerate(value)]
            return [item for item in items if item is not _NO_VALUE]
        return value

    def _evaluate(self, name: str, argument: Any, where: str) -> Any:  # noqa: PLR0911
        if name == "Ref":
            return self._ref(str(argument), where)
        if name == "Fn::GetAtt":
            return self._get_att(argument, where)
        if name == "Fn::Sub":
            return self._sub(argument, where)
        if name == "Fn::If":
            if not (isinstance(argument, list) and len(argument) == 3):
                raise TemplateError(f"{where}: Fn::If takes [condition, value_if_true, value_if_false]")
            branch = argument[1] if self.condition(str(argument[0]), where) else argument[2]
            return self._resolve(branch, where)
        if name in {"Fn::Equals", "Fn::And", "Fn::Or", "Fn::Not", "Condition"}:
            return self._truth({name: argument}, where)
        if name == "Fn::Join":
            delimiter, items = argument
            parts = self._resolve(items, where)
            return _to_str(delimiter, where).join(_to_str(part, where) for part in parts)
        if name == "Fn::Select":
            index, items = argument
            chosen = self._resolve(items, where)
            return chosen[int(self._resolve(index, where))]
        if name == "Fn::Split":
            delimiter, text = argument
            return self.resolve_str(text, where).split(_to_str(delimiter, where))
        if name == "Fn::FindInMap":
            map_name, top, second = (self.resolve_str(part, where) for part in argument)
            try:
                return self._resolve(self._mappings[map_name][top][second], where)
            except KeyError as error:
                raise TemplateError(f"{where}: Fn::FindInMap found no {map_name}.{top}.{second}") from error
        if name == "Fn::Base64":
            return base64.b64encode(self.resolve_str(argument, where).encode()).decode()
        raise TemplateError(f"{where}: the local runtime does not support {name}")

    def _truth(self, value: Any, where: str) -> bool:
        name = intrinsic_name(value)
        if name == "Condition":
            return self.condition(str(value["Condition"]), where)
        if name == "Fn::Equals":
            left, right = (self._resolve(item, where) for item in value[name])
            return _to_str(left, where) == _to_str(right, where)
        if name == "Fn::And":
            return all(self._truth(item, where) for item in value[name])
        if name == "Fn::Or":
            return any(self._truth(item, where) for item in value[name])
        if name == "Fn::Not":
            (inner,) = value[name]
            return not self._truth(inner, where)
        resolved = self._resolve(value, where)
        if isinstance(resolved, bool):
            return resolved
        raise TemplateError(f"{where}: {value!r} is not a condition")

    def _ref(self, target: str, where: str) -> Any:
        if target == "AWS::NoValue":
            return _NO_VALUE
        if target in self._pseudo:
            return self._pseudo[target]
        if target in self._parameters:
            return self._parameters[target]
        if target in self._resources:
            value = self._resources[target].ref
            if value is None:
                raise TemplateError(
                    f"{where}: !Ref {target} is not emulated locally (use !GetAtt {target}.Arn)"
                )
            return value
        if target in self._known_resource_ids:
            raise TemplateError(f"{where}: !Ref {target} has no local value (that resource is not emulated)")
        raise TemplateError(f"{where}: !Ref {target} names no parameter or resource")

    def _get_att(self, argument: Any, where: str) -> str:
        if isinstance(argument, str):
            argument = argument.split(".", 1)
        if not (isinstance(argument, list) and len(argument) == 2):
            raise TemplateError(f"{where}: Fn::GetAtt takes [LogicalId, Attribute]")
        logical_id, attribute = str(argument[0]), str(self._resolve(argument[1], where))
        resource = self._resources.get(logical_id)
        if resource is None:
            if logical_id in self._known_resource_ids:
                raise TemplateError(f"{where}: !GetAtt {logical_id}.{attribute} has no local value")
            raise TemplateError(f"{where}: !GetAtt names unknown resource {logical_id!r}")
        if attribute not in resource.attributes:
            raise TemplateError(
                f"{where}: !GetAtt {logical_id}.{attribute} is not available locally "
                f"(known: {', '.join(sorted(resource.attributes)) or 'none'})"
            )
        return resource.attributes[attribute]

    def _sub(self, argument: Any, where: str) -> str:
        if isinstance(argument, list):
            text, variables_raw = argument
            variables = {key: self.resolve_str(item, where) for key, item in variables_raw.items()}
        else:
            text, variables = argument, {}
        if not isinstance(text, str):
            raise TemplateError(f"{where}: Fn::Sub needs a string")

        def replace(match: re.Match[str]) -> str:
            variable = match.group(1)
            if variable.startswith("!"):
                return "${" + variable[1:] + "}"
            if variable in variables:
                return variables[variable]
            if "." in variable and variable.split(".", 1)[0] not in self._parameters:
                return self._get_att(variable.split(".", 1), where)
            return _to_str(self._ref(variable, where), where)

        return _SUB_VARIABLE.sub(replace, text)


def _to_str(value: Any, where: str) -> str:
    """CloudFormation's string conversion of a scalar (environment values, Sub and Join parts)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float | str):
        return str(value)
    raise TemplateError(f"{where}: expected a string, got {value!r}")
