"""The installed distribution puts everything under the jmspy namespace."""

from __future__ import annotations

import importlib.metadata
from pathlib import PurePosixPath


def test_installed_files_live_only_under_the_jmspy_namespace():
    dist = importlib.metadata.distribution("jmspy")
    stray = set()
    for entry in dist.files or []:
        path = PurePosixPath(str(entry))
        if path.parts[0] == "..":  # console scripts in the environment's bin/
            continue
        if path.parts[0] == "jmspy" or path.parts[0].endswith(".dist-info"):
            continue
        if path.name.startswith("__editable__"):  # an editable install's path hook
            continue
        stray.add(path.parts[0])
    assert stray == set(), f"generic top-level names installed: {sorted(stray)}"


def test_transports_and_broker_are_subpackages_of_jmspy():
    import jmspy.broker_ref.core
    import jmspy.transports.vm

    assert jmspy.transports.vm.__name__ == "jmspy.transports.vm"
    assert jmspy.broker_ref.core.__name__ == "jmspy.broker_ref.core"


def test_the_vm_transport_is_registered_as_an_entry_point():
    eps = importlib.metadata.entry_points(group="jmspy.transports")
    assert "vm" in {ep.name for ep in eps}


def test_the_distribution_names_its_license_and_where_the_project_lives():
    """A reader of the package index (or ``pip show``) finds the license, the source,
    the issues and the changelog."""
    from importlib.metadata import metadata

    meta = metadata("jmspy")
    assert meta["License-Expression"] == "Apache-2.0"
    urls = dict(entry.split(", ", 1) for entry in meta.get_all("Project-URL") or [])
    assert {"Homepage", "Source", "Issues", "Changelog", "Documentation"} <= set(urls)
    assert all(url.startswith("https://") for url in urls.values())
