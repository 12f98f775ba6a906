"""Print the CloudFormation the SAM transform makes of template.yaml, as JSON.

Runs on SAM CLI's own interpreter (`.tools/bin/python`), not the project's: aws-sam-cli pins
its own boto3. AWS::LanguageExtensions is expanded first with SAM CLI's implementation, as
CloudFormation does before the SAM transform. Usage: sam_transform.py TEMPLATE [Key=Value ...]
"""

from __future__ import annotations

import importlib
import json
import os
import sys
from typing import Any


def main(argv: list[str]) -> int:
    os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")
    yaml_parse = importlib.import_module("samcli.yamlhelper").yaml_parse
    extensions = importlib.import_module("samcli.lib.cfn_language_extensions.sam_integration")
    transform = importlib.import_module("samtranslator.translator.transform").transform
    path, *overrides = argv
    with open(path, encoding="utf-8") as source:
        template: dict[str, Any] = yaml_parse(source.read())
    parameters = {name: spec.get("Default") for name, spec in template.get("Parameters", {}).items()}
    parameters.update(dict(item.split("=", 1) for item in overrides))
    expanded = extensions.process_template_for_sam_cli(template, parameter_values=parameters)
    expanded["Transform"] = "AWS::Serverless-2016-10-31"
    for resource in expanded["Resources"].values():  # packaged locations, as `sam deploy` uploads them
        properties = resource.get("Properties", {})
        for key in ("CodeUri", "ContentUri"):
            if key in properties:
                properties[key] = "s3://bucket/key.zip"

    class ManagedPolicies:
        def load(self) -> dict[str, str]:
            names = ("AWSXrayWriteOnlyAccess", "AWSLambdaBasicExecutionRole")
            return {name: f"arn:aws:iam::aws:policy/{name}" for name in names}

    json.dump(transform(expanded, parameters, ManagedPolicies()), sys.stdout, default=str)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
