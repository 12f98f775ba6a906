"""MkDocs hooks: the API reference is the OpenAPI description the service itself serves, rendered
by Swagger UI, and the README is the site's home page.

The description is asked of the API function's own resolver (GET /openapi.json, as a caller
would) so the rendered reference cannot drift from what a deployment answers. Swagger UI comes
from node_modules (swagger-ui-dist, pinned in package.json; `make deps`) and is copied into the
site beside the page that shows it, so the site needs no CDN and works offline.
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
SWAGGER_UI = ROOT / "node_modules" / "swagger-ui-dist"
# What of swagger-ui-dist the page needs, and its licence (Apache-2.0: LICENSE and NOTICE go along).
SWAGGER_UI_FILES = ("swagger-ui-bundle.js", "swagger-ui.css", "LICENSE", "NOTICE")
REFERENCE_PAGE = Path(__file__).with_name("api_reference.html")


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


def reference_page(openapi: dict[str, Any]) -> str:
    """The Swagger UI page with the description inline (no fetch: it opens from a file too). In a
    script element nothing may read as markup, so every < is a JSON escape."""
    inline = json.dumps(openapi, separators=(",", ":")).replace("<", "\\u003c")
    return REFERENCE_PAGE.read_text().replace("__OPENAPI__", inline)


def on_files(files: Files, config: MkDocsConfig) -> Files:
    missing = [name for name in SWAGGER_UI_FILES if not (SWAGGER_UI / name).is_file()]
    if missing:
        raise RuntimeError(f"{SWAGGER_UI} lacks {', '.join(missing)}: run `make deps` (npm ci)")
    openapi = served_openapi()
    files.append(File.generated(config, "index.md", abs_src_path=str(ROOT / "README.md")))
    files.append(File.generated(config, "api/openapi.json", content=json.dumps(openapi, indent=2) + "\n"))
    files.append(File.generated(config, "api/reference/index.html", content=reference_page(openapi)))
    for name in SWAGGER_UI_FILES:
        files.append(File.generated(config, f"api/reference/{name}", abs_src_path=str(SWAGGER_UI / name)))
    return files


# README links point into docs/ (as GitHub shows them); on the site they are siblings.
_DOCS_LINK = re.compile(r"\]\((?:\./)?docs/")


def on_page_markdown(markdown: str, page: Page, config: MkDocsConfig, files: Files) -> str:
    if page.file.src_uri == "index.md":
        return _DOCS_LINK.sub("](", markdown)
    return markdown
