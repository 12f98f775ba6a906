"""API Gateway limits read from the template: which throttle and timeout each route gets, and the bucket."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from localrun.errors import TemplateError
from localrun.gateway.limits import ACCOUNT_THROTTLE, HttpLimits, RouteLimit, TokenBucket, route_limit
from localrun.stack.template import HttpApiEvent, Throttle, load_template

pytestmark = pytest.mark.integration

TEMPLATE = """\
Transform: AWS::Serverless-2016-10-31
Parameters:
  Burst:
    Type: Number
    Default: 40
Resources:
  Api:
    Type: AWS::Serverless::HttpApi
    Properties:
      DefaultRouteSettings: {ThrottlingBurstLimit: !Ref Burst, ThrottlingRateLimit: 20, DetailedMetricsEnabled: true}
      RouteSettings:
        "GET /per-api": {ThrottlingRateLimit: 5}
  Fn:
    Type: AWS::Serverless::Function
    Properties:
      CodeUri: code/
      Handler: app.handler
      Runtime: python3.12
      Events:
        Plain:
          Type: HttpApi
          Properties: {ApiId: !Ref Api, Method: GET, Path: /plain}
        PerApi:
          Type: HttpApi
          Properties: {ApiId: !Ref Api, Method: GET, Path: /per-api}
        PerEvent:
          Type: HttpApi
          Properties:
            ApiId: !Ref Api
            Method: GET
            Path: /per-event
            TimeoutInMillis: 5000
            RouteSettings: {ThrottlingBurstLimit: 1}
        Implicit:
          Type: HttpApi
          Properties: {Method: GET, Path: /implicit}
"""


def routes(tmp_path: Path, text: str = TEMPLATE) -> dict[str, RouteLimit]:
    (tmp_path / "template.yaml").write_text(text)
    overrides = {"Burst": "30"} if "Burst" in text else {}
    template = load_template(tmp_path / "template.yaml", parameter_overrides=overrides)
    events = template.functions["Fn"].events_of(HttpApiEvent)
    return {event.path or "": route_limit(template, event) for event in events}


def test_each_route_gets_its_settings_field_by_field(tmp_path: Path) -> None:
    limits = routes(tmp_path)
    assert limits["/plain"] == RouteLimit("GET /plain", Throttle(30, 20.0), 30_000)
    assert limits["/per-api"] == RouteLimit("GET /per-api", Throttle(30, 5.0), 30_000)
    assert limits["/per-event"] == RouteLimit("GET /per-event", Throttle(1, 20.0), 5_000)
    assert limits["/implicit"] == RouteLimit("GET /implicit", None, 30_000)  # the account's limits only


def test_an_integration_timeout_above_30_seconds_is_rejected(tmp_path: Path) -> None:
    with pytest.raises(TemplateError, match="TimeoutInMillis must be between 50 and 30000"):
        routes(tmp_path, TEMPLATE.replace("TimeoutInMillis: 5000", "TimeoutInMillis: 31000"))


def test_the_token_bucket_allows_a_burst_then_its_rate() -> None:
    now = [0.0]
    bucket = TokenBucket(burst=3, rate=2.0, clock=lambda: now[0])
    assert [bucket.take() for _ in range(4)] == [True, True, True, False]
    now[0] = 0.4  # 0.8 of a token
    assert bucket.take() is False
    now[0] = 0.5  # the 0.2 s since add 0.4: 1.2 tokens
    assert [bucket.take(), bucket.take()] == [True, False]
    now[0] = 100.0  # never more than the burst
    assert [bucket.take() for _ in range(4)] == [True, True, True, False]


def test_a_zero_burst_blocks_the_route_and_routes_share_the_account_bucket() -> None:
    now = [0.0]
    limits = HttpLimits(
        [RouteLimit("GET /closed", Throttle(0, 100.0)), RouteLimit("GET /open", None)], clock=lambda: now[0]
    )
    try:
        assert limits.admit("GET /closed") is False
        admitted = sum(limits.admit("GET /open") for _ in range(ACCOUNT_THROTTLE.burst_limit or 0))
        assert admitted == ACCOUNT_THROTTLE.burst_limit
        assert limits.admit("GET /open") is False  # the account's burst is spent
    finally:
        limits.close()


def test_a_template_without_route_settings_still_loads(tmp_path: Path) -> None:
    text = textwrap.dedent(
        """\
        Transform: AWS::Serverless-2016-10-31
        Resources:
          Api:
            Type: AWS::Serverless::HttpApi
          Fn:
            Type: AWS::Serverless::Function
            Properties:
              CodeUri: code/
              Handler: app.handler
              Runtime: python3.12
              Events:
                Get: {Type: HttpApi, Properties: {ApiId: !Ref Api, Method: GET, Path: /x}}
        """
    )
    assert routes(tmp_path, text) == {"/x": RouteLimit("GET /x", None, 30_000)}
