"""HTTP API route matching: the template's `Method` + `Path` (with `{param}` and `{proxy+}`).

Like API Gateway HTTP APIs, the most specific route wins: more literal path segments
first, then routes without a greedy `{name+}` variable, then an exact method before
`ANY`; `$default` (an HttpApi event without a Path) catches everything else.

A path with an empty segment (`//`, a trailing `/`) or a `.` or `..` segment, percent-encoded
or not, matches no route, not even `$default`. AWS documents no path normalisation for HTTP
APIs; matching such a path to the route it would name once normalised could let a request reach
a route its literal path does not name, so it is refused instead (404).
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import unquote

from localrun.errors import TemplateError

UNROUTABLE_SEGMENTS = frozenset({"", ".", ".."})


@dataclass(frozen=True)
class Route:
    method: str  # upper case, or "ANY"
    path: str | None  # None = $default
    function: str  # logical id

    @property
    def route_key(self) -> str:
        return "$default" if self.path is None else f"{self.method} {self.path}"

    @property
    def segments(self) -> list[str]:
        if self.path is None or self.path == "/":
            return []
        return self.path[1:].split("/")


@dataclass(frozen=True)
class RouteMatch:
    route: Route
    path_parameters: dict[str, str]


def _match_segments(pattern: list[str], actual: list[str]) -> dict[str, str] | None:
    parameters: dict[str, str] = {}
    for index, part in enumerate(pattern):
        if part.startswith("{") and part.endswith("+}"):
            rest = actual[index:]
            if not rest:
                return None
            parameters[part[1:-2]] = unquote("/".join(rest))
            return parameters
        if index >= len(actual):
            return None
        if part.startswith("{") and part.endswith("}"):
            if actual[index] == "":
                return None
            parameters[part[1:-1]] = unquote(actual[index])
        elif part != actual[index]:
            return None
    return parameters if len(pattern) == len(actual) else None


class RouteTable:
    def __init__(self, routes: list[Route]) -> None:
        seen: dict[str, Route] = {}
        for route in routes:
            if route.route_key in seen:
                raise TemplateError(
                    f"route {route.route_key} is defined by both {seen[route.route_key].function} "
                    f"and {route.function}"
                )
            seen[route.route_key] = route
        self.routes = list(routes)

    def match(self, method: str, raw_path: str) -> RouteMatch | None:
        actual = [] if raw_path in {"", "/"} else raw_path[1:].split("/")
        if any(unquote(segment) in UNROUTABLE_SEGMENTS for segment in actual):
            return None
        best: tuple[tuple[int, int, int], RouteMatch] | None = None
        default: Route | None = None
        for route in self.routes:
            if route.path is None:
                default = route
                continue
            if route.method not in {method, "ANY"}:
                continue
            parameters = _match_segments(route.segments, actual)
            if parameters is None:
                continue
            literal = sum(1 for part in route.segments if not part.startswith("{"))
            greedy = any(part.endswith("+}") for part in route.segments)
            score = (literal, 0 if greedy else 1, 1 if route.method == method else 0)
            if best is None or score > best[0]:
                best = (score, RouteMatch(route, parameters))
        if best is not None:
            return best[1]
        if default is not None:
            return RouteMatch(default, {})
        return None
