"""Shared pytest configuration.

Twin check (see jmspy/_speedups.py): unless JMSPY_PUREPYTHON is set, every module built
from cython_ext/*.pyx must load as the compiled extension; with JMSPY_PUREPYTHON=1 the
pure twins must be the ones in use. An extension left beside a .py of the packages (by
an older build that compiled modules from their own source) would be imported instead of
that .py in both modes, so it fails the check too. Anything else ends the session at once
instead of letting the suite pass against the wrong twin.
"""

from __future__ import annotations

import importlib
import importlib.machinery
from pathlib import Path

import pytest

from jmspy import _speedups

_ROOT = Path(__file__).resolve().parent.parent
#: Every module that has a compiled twin (and so a pure one).
TWINS: tuple[str, ...] = tuple(sorted(p.stem for p in (_ROOT / "cython_ext").glob("*.pyx")))


def _twin_problems() -> list[str]:
    problems: list[str] = []
    for name in TWINS:
        want = _speedups.pure_module(name) if _speedups.PURE_PYTHON else f"jmspy._cext.{name}"
        try:
            module = _speedups.load(name)
        except ImportError as exc:
            problems.append(f"{name}: {exc}")
            continue
        path = getattr(module, "__file__", None) or ""
        if module.__name__ != want or _speedups.is_extension(module) == _speedups.PURE_PYTHON:
            problems.append(f"{name}: expected {want}, got {module.__name__} ({path})")
    return problems


def _stale_builds() -> list[str]:
    """Extensions beside a ``.py`` of jmspy's packages (outside ``jmspy._cext``): left by
    an older in-place build that compiled modules from their own source."""
    import jmspy.broker_ref
    import jmspy.transports

    found: set[str] = set()
    for package in (jmspy, jmspy.transports, jmspy.broker_ref):
        for folder in map(Path, package.__path__):
            for suffix in importlib.machinery.EXTENSION_SUFFIXES:
                for ext_file in folder.rglob(f"*{suffix}"):
                    stem = ext_file.name[: -len(suffix)]
                    parts = (*ext_file.parent.relative_to(folder).parts, stem)
                    name = ".".join((package.__name__, *parts))
                    if ext_file.with_name(stem + ".py").is_file() and "_cext" not in parts:
                        found.add(f"{name}: stale build {ext_file} (delete it, or rebuild "
                                  "in place, which removes it)")
    return sorted(found)


def pytest_report_header(config: pytest.Config) -> str:
    mode = "pure (JMSPY_PUREPYTHON set)" if _speedups.PURE_PYTHON else "compiled"
    return f"jmspy twins: {mode}: {', '.join(TWINS) or 'none'}"


def pytest_sessionstart(session: pytest.Session) -> None:
    problems = _twin_problems() + _stale_builds()
    if problems:
        hint = (
            ""
            if _speedups.PURE_PYTHON
            else " Rebuild with `pip install -e . --no-build-isolation`, or set "
            "JMSPY_PUREPYTHON=1 to test the pure twins on purpose."
        )
        pytest.exit(
            "jmspy twin check failed:\n  " + "\n  ".join(problems) + "\n" + hint,
            returncode=pytest.ExitCode.USAGE_ERROR,
        )


# -- in-process broker fixtures ---------------------------------------------------------
import uuid  # noqa: E402
from collections.abc import Callable, Iterator  # noqa: E402
from typing import Any  # noqa: E402


@pytest.fixture
def vm_broker_factory() -> Iterator[Callable[..., Any]]:
    """Start fresh named in-process brokers (with core options); stopped after the test.

    Returns ``(host, ConnectionFactory)`` pairs so each test gets its own broker.
    """
    from jmspy import ConnectionFactory
    from jmspy.transports import vm

    names: list[str] = []

    def start(**broker_options: Any) -> tuple[Any, Any]:
        name = f"test-{uuid.uuid4().hex[:12]}"
        host = vm.start_broker(name, **broker_options)
        names.append(name)
        return host, ConnectionFactory(f"vm://{name}")

    yield start
    for name in names:
        vm.stop_broker(name)


@pytest.fixture
def vm_broker(vm_broker_factory: Callable[..., Any]) -> Any:
    """A fresh in-process broker host for this test."""
    host, _ = vm_broker_factory()
    return host


@pytest.fixture
def vm_factory(vm_broker: Any) -> Any:
    """A ConnectionFactory for this test's fresh in-process broker."""
    from jmspy import ConnectionFactory

    return ConnectionFactory(f"vm://{vm_broker.name}")


@pytest.fixture(scope="session")
def tls_ca(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """The session's throwaway CA and certificates (tests/tls_ca.py)."""
    from tls_ca import make_ca

    return make_ca(tmp_path_factory.mktemp("tls"))


@pytest.fixture
def spans() -> Iterator[Any]:
    """An in-memory span exporter that jmspy's telemetry reports to for this test
    (``jmspy.telemetry.instrument``), undone afterwards. OpenTelemetry's SDK is imported
    here, not at the top: the rest of the suite runs without it loaded."""
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    import jmspy.telemetry as telemetry

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    telemetry.instrument(tracer_provider=provider)
    yield exporter
    telemetry.uninstrument()
    provider.shutdown()
