"""The gallery pages show the examples' warnings without the build machine's paths."""

import subprocess
import sys
import textwrap
from pathlib import Path

CONF = Path(__file__).resolve().parents[2] / "docs" / "conf.py"


def test_warnings_in_gallery_output_carry_no_file_path(tmp_path):
    """sphinx-gallery writes a warning through ``warnings.formatwarning``: once the docs'
    configuration is loaded, that shows the category and message only."""
    module = tmp_path / "deep" / "inside" / "warner.py"
    module.parent.mkdir(parents=True)
    module.write_text(
        "import warnings\n\ndef warn():\n    warnings.warn('stopped early', RuntimeWarning)\n"
    )
    script = textwrap.dedent(
        f"""
        import runpy, sys, warnings
        runpy.run_path({str(CONF)!r})
        sys.path.insert(0, {str(module.parent)!r})
        import warner
        warnings.simplefilter("always")
        warner.warn()
        print(warnings.formatwarning("m", UserWarning, {str(module)!r}, 4, "line"), end="")
        """
    )
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    assert "RuntimeWarning: stopped early" in result.stderr
    assert result.stdout == "UserWarning: m\n"
    for text in (result.stdout, result.stderr):
        assert str(tmp_path) not in text and "warner.py" not in text, text
