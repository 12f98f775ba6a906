"""The stack as `template.yaml` describes it: the template (CloudFormation YAML, intrinsic
functions, the typed description), the local endpoints (DynamoDB Local, moto) and their clients,
provisioning, and the functions' IAM policies as the template grants them.
"""
