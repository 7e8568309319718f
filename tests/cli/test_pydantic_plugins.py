"""cli/pydantic_plugins.py: the CLI skips pydantic's entry-point scan only where no pydantic
plugin is installed (issue 32); an installed plugin is still found and used."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile

from gpufabric.cli.pydantic_plugins import no_plugins_installed
from tests.conftest import EXAMPLES, ROOT

LAB = str(EXAMPLES / "lab-2node.yaml")
#: Runs `plan` and reports whether importlib.metadata was loaded, what stands behind
#: pydantic's plugin loader, and the calls a test plugin saw.
PROBE = (
    "import sys; from gpufabric.cli.app import main; rc = main(['plan', {spec!r}, '--format', 'json']);"
    " loader = sys.modules.get('pydantic.plugin._loader');"
    " seen = getattr(sys.modules.get('gfplug'), 'SEEN', None);"
    " print(rc, 'importlib.metadata' in sys.modules, (loader.__doc__ or '').startswith('gpufabric'),"
    " None if seen is None else len(seen) > 0, file=sys.stderr)"
)
PLUGIN = """
SEEN = []


class Plugin:
    def new_schema_validator(self, schema, schema_type, schema_type_path, schema_kind, config, plugin_settings):
        SEEN.append(schema_type_path)
        return None, None, None


plugin = Plugin()
"""


def _run(pythonpath: list[str]) -> list[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), *pythonpath])}
    probe = PROBE.format(spec=LAB)
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, env=env, cwd=ROOT)
    return done.stderr.split()[-4:]


def test_without_plugins_the_scan_and_importlib_metadata_are_skipped():
    import importlib.metadata

    assert not list(importlib.metadata.entry_points(group="pydantic"))  # the premise: pydantic's own answer
    assert _run([]) == ["0", "False", "True", "None"]


def test_an_installed_plugin_is_still_found_and_used(tmp_path):
    (tmp_path / "gfplug.py").write_text(PLUGIN)
    info = tmp_path / "gfplug-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: gfplug\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text("[pydantic]\ngfplug = gfplug:plugin\n")
    assert _run([str(tmp_path)]) == ["0", "True", "False", "True"]


def test_what_the_scan_reads(tmp_path):
    assert no_plugins_installed([str(tmp_path), str(tmp_path / "missing")])
    other = tmp_path / "other-1.0.dist-info"
    other.mkdir()
    (other / "entry_points.txt").write_text("[console_scripts]\nother = other:main\n")
    (tmp_path / "legacy-1.0.egg-info").write_text("Metadata-Version: 1.0\n")  # a file, not a directory
    assert no_plugins_installed([str(tmp_path)])
    egg = tmp_path / "thing.egg" / "EGG-INFO"
    egg.mkdir(parents=True)
    (egg / "entry_points.txt").write_text("[pydantic]\nthing = thing:plugin\n")
    assert no_plugins_installed([str(tmp_path)])  # the egg is not on the path
    assert not no_plugins_installed([str(tmp_path), str(tmp_path / "thing.egg")])
    archive = tmp_path / "bundle.zip"
    with zipfile.ZipFile(archive, "w") as z:
        z.writestr("x.py", "")
    assert not no_plugins_installed([str(archive)])  # inside a zip: left to pydantic
