"""The service's config and its lazy imports: no web framework needed for these."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from edgeinf import InputError
from edgeinf.serve import load_config
from edgeinf.serve.limits import RateLimiter

REPO = Path(__file__).resolve().parents[2]


def face_config(**overrides) -> dict:
    model = {"path": "face_detection_short_range"}
    model.update(overrides.pop("model", {}))
    return {"models": {"face": model}, **overrides}


def test_importing_edgeinf_and_its_serve_package_imports_no_web_framework():
    code = (
        "import sys, edgeinf, edgeinf.serve, edgeinf.serve.config\n"
        "loaded = [m for m in sys.modules if m.split('.')[0] in ('starlette', 'uvicorn', 'httpx')]\n"
        "assert not loaded, loaded\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=REPO, env={"PYTHONPATH": str(REPO)})


def test_token_bucket_allows_the_burst_then_the_rate():
    now = [0.0]
    limiter = RateLimiter(rate_per_s=2.0, burst=3, clock=lambda: now[0])
    assert [limiter.retry_after("a") for _ in range(4)] == [0, 0, 0, 1]
    now[0] += 0.5  # one token back
    assert limiter.retry_after("a") == 0 and limiter.retry_after("a") == 1
    assert limiter.retry_after("b") == 0  # another key, its own bucket
    assert RateLimiter(0.0, 1).retry_after("a") == 0  # off


def test_variants_and_weights_from_the_config():
    config = load_config(
        face_config(model={"weight": 3.0, "variants": {"canary": {"path": "m.tflite", "weight": 1, "compare": 0.2}}})
    )
    face = config.models["face"]
    assert [(v.name, v.weight, v.compare) for v in face.variants] == [("default", 3.0, 0.0), ("canary", 1.0, 0.2)]
    assert config.host == "127.0.0.1" and config.port == 8080 and not config.auth_enabled


def test_config_errors_name_the_key():
    with pytest.raises(InputError, match=r"unknown key\(s\) \['qeue'\]"):
        load_config(face_config(limits={"qeue": 3}))
    with pytest.raises(InputError, match="at least 16 characters"):
        load_config(face_config(auth={"keys": ["short"]}))
    with pytest.raises(InputError, match="no \\[models"):
        load_config({"models": {}})
    with pytest.raises(InputError, match="sha256 must be 64 hex"):
        load_config(face_config(model={"sha256": "abc"}))
    with pytest.raises(InputError, match="at least one variant needs a weight"):
        load_config(face_config(model={"weight": 0.0}))
    with pytest.raises(InputError, match="must be an integer from 0 to 65535"):
        load_config(face_config(server={"port": 70000}))
    with pytest.raises(InputError, match="only one variant may set compare"):
        variants = {"a": {"path": "a.tflite", "compare": 0.1}, "b": {"path": "b.tflite", "compare": 0.1}}
        load_config(face_config(model={"variants": variants}))
    with pytest.raises(InputError, match="not to the primary"):
        load_config(face_config(model={"compare": 0.1}))
