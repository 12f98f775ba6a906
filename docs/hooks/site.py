"""MkDocs hooks: the API reference is the OpenAPI description the service itself serves, and the
README is the site's home page.

The description is asked of the API function's own resolver (GET /openapi.json, as a caller
would) so the rendered reference cannot drift from what a deployment answers.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.structure.files import File, Files
from mkdocs.structure.pages import Page

from hybrid_counter.api.access import AccessPolicy
from hybrid_counter.api.app import build_app

ROOT = Path(__file__).resolve().parents[2]
# neoteroi's [OAD(...)] reads a path relative to the project; the build keeps it out of git.
OPENAPI = ROOT / "build" / "docs" / "openapi.json"


def served_openapi() -> dict[str, Any]:
    def no_service() -> Any:
        raise RuntimeError("the OpenAPI route needs no service")

    event = {
        "version": "2.0",
        "routeKey": "GET /openapi.json",
        "rawPath": "/openapi.json",
        "rawQueryString": "",
        "headers": {"accept": "application/json"},
        "requestContext": {
            "http": {"method": "GET", "path": "/openapi.json", "sourceIp": "127.0.0.1"},
            "requestId": "docs",
            "stage": "$default",
        },
        "isBase64Encoded": False,
    }
    answer = build_app(no_service, AccessPolicy()).resolve(event, None)  # type: ignore[arg-type]
    if answer["statusCode"] != 200:
        raise RuntimeError(f"GET /openapi.json answered {answer['statusCode']}: {answer['body']}")
    return dict(json.loads(answer["body"]))


def on_pre_build(config: MkDocsConfig) -> None:
    OPENAPI.parent.mkdir(parents=True, exist_ok=True)
    OPENAPI.write_text(json.dumps(served_openapi(), indent=2) + "\n")


def on_files(files: Files, config: MkDocsConfig) -> Files:
    files.append(File.generated(config, "index.md", abs_src_path=str(ROOT / "README.md")))
    files.append(File.generated(config, "api/openapi.json", content=OPENAPI.read_text()))
    return files


# README links point into docs/ (as GitHub shows them); on the site they are siblings.
_DOCS_LINK = re.compile(r"\]\((?:\./)?docs/")


def on_page_markdown(markdown: str, page: Page, config: MkDocsConfig, files: Files) -> str:
    if page.file.src_uri == "index.md":
        return _DOCS_LINK.sub("](", markdown)
    return markdown
