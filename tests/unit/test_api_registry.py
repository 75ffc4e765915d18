"""The API registry: one module per API, and ApiVersions advertises exactly what it holds."""

from __future__ import annotations

import importlib
import re
import struct
from pathlib import Path

import pytest
from kio.index import load_request_schema
from kio.schema.api_versions.v3.request import ApiVersionsRequest
from kio.schema.api_versions.v3.response import ApiVersionsResponse
from kio.schema.errors import ErrorCode
from kio.serial import entity_reader

from oncelog.broker.apis.api_versions import api_versions, unsupported_version_response
from oncelog.broker.apis.registry import API_SPECS, build_registry
from oncelog.broker.broker import Broker
from oncelog.broker.config import BrokerConfig
from oncelog.broker.request import RequestContext
from oncelog.protocol.api_keys import ApiKey
from oncelog.protocol.messages import RequestHeader, encode_response


def snake(name: str) -> str:
    return name.lower()


def decode_api_versions(frame: bytes, version: int) -> ApiVersionsResponse:
    schema = importlib.import_module(f"kio.schema.api_versions.v{version}.response")
    resp_cls = schema.ApiVersionsResponse
    assert struct.unpack_from(">i", frame)[0] == len(frame) - 4
    payload = memoryview(frame)[4:]
    _, pos = entity_reader(resp_cls.__header_schema__)(payload, 0)
    body, _ = entity_reader(resp_cls)(payload, pos)
    return body


def test_every_advertised_api_has_its_own_module() -> None:
    registry = build_registry()
    assert set(registry) == {int(k) for k in ApiKey}  # the enum names exactly the served APIs
    for spec in API_SPECS:
        module = importlib.import_module(f"oncelog.broker.apis.{snake(spec.key.name)}")
        assert module.API is spec
        assert spec.handler.__module__ == module.__name__


def test_every_advertised_version_has_a_kio_schema() -> None:
    for spec in API_SPECS:
        for version in range(spec.min_version, spec.max_version + 1):
            assert load_request_schema(spec.key, version).__api_key__ == spec.key


def test_a_key_declared_twice_is_refused() -> None:
    with pytest.raises(ValueError, match="PRODUCE is declared twice"):
        build_registry((API_SPECS[0], API_SPECS[0]))


def test_api_versions_lists_exactly_the_registry(tmp_path: Path) -> None:
    broker = Broker(
        BrokerConfig.build(overrides={"log.dirs": str(tmp_path)}), listen=("127.0.0.1", 0)
    )
    header = RequestHeader(int(ApiKey.API_VERSIONS), 3, 7, "test")
    req = ApiVersionsRequest(client_software_name="t", client_software_version="1")
    resp = api_versions(RequestContext(broker, header, 1, "127.0.0.1:1"), req)
    decoded = decode_api_versions(encode_response(ApiKey.API_VERSIONS, 3, 7, resp), 3)
    assert decoded.error_code == ErrorCode.none
    advertised = [(k.api_key, k.min_version, k.max_version) for k in decoded.api_keys]
    expected = sorted((int(s.key), s.min_version, s.max_version) for s in API_SPECS)
    assert advertised == expected
    assert len(advertised) == len(ApiKey)
    assert (int(ApiKey.PRODUCE), 3, 12) in advertised and (int(ApiKey.END_TXN), 0, 5) in advertised
    # Group version 1 and transaction version 2 are finalized (KIP-584 features; the 0
    # minimum shows from v4 on).
    assert [(f.name, f.max_version_level) for f in decoded.finalized_features] == [
        ("group.version", 1),
        ("transaction.version", 2),
    ]


@pytest.mark.parametrize("version", [0, 1, 2, 3, 4])
def test_features_by_api_versions_version(tmp_path: Path, version: int) -> None:
    """Features exist from v3 (tagged fields); a 0 minimum is listed from v4 (KAFKA-17011)."""
    broker = Broker(
        BrokerConfig.build(overrides={"log.dirs": str(tmp_path)}), listen=("127.0.0.1", 0)
    )
    header = RequestHeader(int(ApiKey.API_VERSIONS), version, 7, "test")
    req = load_request_schema(int(ApiKey.API_VERSIONS), version)(
        **({"client_software_name": "t", "client_software_version": "1"} if version >= 3 else {})
    )
    resp = api_versions(RequestContext(broker, header, 1, "127.0.0.1:1"), req)
    decoded = decode_api_versions(encode_response(ApiKey.API_VERSIONS, version, 7, resp), version)
    assert decoded.error_code == ErrorCode.none
    assert len(decoded.api_keys) == len(ApiKey)
    supported = [
        (f.name, f.min_version, f.max_version) for f in getattr(decoded, "supported_features", ())
    ]
    finalized = [(f.name, f.max_version_level) for f in getattr(decoded, "finalized_features", ())]
    assert supported == (
        [("group.version", 0, 1), ("transaction.version", 0, 2)] if version >= 4 else []
    )
    assert finalized == ([("group.version", 1), ("transaction.version", 2)] if version >= 3 else [])


def test_unsupported_api_versions_version_answers_v0_with_the_registry() -> None:
    registry = build_registry()
    decoded = decode_api_versions(unsupported_version_response(registry, 9), 0)
    assert decoded.error_code == ErrorCode.unsupported_version
    assert [(k.api_key, k.min_version, k.max_version) for k in decoded.api_keys] == sorted(
        (int(s.key), s.min_version, s.max_version) for s in API_SPECS
    )


def test_module_names_follow_the_api_names() -> None:
    apis = Path(importlib.import_module("oncelog.broker.apis").__file__ or "").parent
    api_modules = {
        p.stem for p in apis.glob("*.py") if re.search(r"^API = ApiSpec\(", p.read_text(), re.M)
    }
    assert api_modules == {snake(k.name) for k in ApiKey}
