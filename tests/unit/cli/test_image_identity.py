"""An image's tag does not depend on how `cage` was called (`make` sets CAGE_EXTRA_CA_CERTS, a
direct `.venv/bin/cage` call does not), and a build that fails on TLS says which setting to use."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from orchestrator import settings as settings_module
from orchestrator.sandbox.images import tls_hint
from orchestrator.settings import Settings
from tests.subprocess_env import subprocess_env

ROOT = Path(__file__).resolve().parents[3]

PLANNED_TAG = """
from orchestrator.sandbox.images import BaseImage, extra_context_files, plan_build, default_images_dir, runner_image
from orchestrator.settings import Settings
image = runner_image("claude")
base = BaseImage(ref="cage/base:bookworm", id="sha256:" + "1" * 64)
extra = extra_context_files(image, extra_ca_certs=Settings().extra_ca_certs, images_dir=default_images_dir())
print(plan_build(image, base, images_dir=default_images_dir(), extra_files=extra).tag)
"""


def planned_tag(env: dict[str, str]) -> str:
    clean = subprocess_env()
    result = subprocess.run(
        [sys.executable, "-c", PLANNED_TAG], cwd=ROOT, env={**clean, **env}, capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr
    return result.stdout.strip()


def test_the_ca_bundle_defaults_to_the_host_bundle(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    bundle = tmp_path / "ca.pem"
    bundle.write_text("-----BEGIN CERTIFICATE-----\n")
    monkeypatch.delenv("CAGE_EXTRA_CA_CERTS", raising=False)
    monkeypatch.setattr(settings_module, "SYSTEM_CA_BUNDLES", (tmp_path / "missing.pem", bundle))
    assert Settings().extra_ca_certs == bundle
    monkeypatch.setattr(settings_module, "SYSTEM_CA_BUNDLES", (tmp_path / "missing.pem",))
    assert Settings().extra_ca_certs is None


def test_an_empty_setting_installs_no_bundle(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CAGE_EXTRA_CA_CERTS", "")
    assert Settings().extra_ca_certs is None


@pytest.mark.skipif(not settings_module.SYSTEM_CA_BUNDLES[0].is_file(), reason="no Debian CA bundle")
def test_make_and_a_direct_call_plan_the_same_image_tag() -> None:
    direct = planned_tag({})
    via_make = planned_tag({"CAGE_EXTRA_CA_CERTS": str(settings_module.SYSTEM_CA_BUNDLES[0])})
    assert direct == via_make
    assert planned_tag({"CAGE_EXTRA_CA_CERTS": ""}) != direct  # the bundle is part of the identity


NPM_TLS_FAILURE = """\
npm error code UNABLE_TO_GET_ISSUER_CERT_LOCALLY
npm error errno UNABLE_TO_GET_ISSUER_CERT_LOCALLY
npm error request to https://registry.npmjs.org/@anthropic-ai%2fclaude-code failed, reason: unable to get local issuer certificate
The command '/bin/sh -c npm install -g @anthropic-ai/claude-code@2.1.197' returned a non-zero code: 1"""


def test_a_tls_failure_names_the_setting_to_use() -> None:
    hint = tls_hint(NPM_TLS_FAILURE, None)
    assert hint is not None and "CAGE_EXTRA_CA_CERTS" in hint
    with_bundle = tls_hint(
        "pip: SSLError(SSLCertVerificationError('certificate verify failed'))", Path("/x.pem")
    )
    assert with_bundle is not None and "/x.pem" in with_bundle


def test_other_failures_get_no_tls_hint() -> None:
    assert tls_hint("E: Unable to locate package nosuch", None) is None
