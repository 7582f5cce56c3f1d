"""The installation's surroundings: numba's kernel cache when the package and the home folder
are read-only."""

import subprocess
import sys
import textwrap
from pathlib import Path

from dualstruct._numba_cache import choose_cache_dir


def test_cache_falls_back_to_the_temporary_folder(tmp_path):
    pkg, user, temp = tmp_path / "pkg", tmp_path / "user", tmp_path / "tmp"
    assert choose_cache_dir(pkg, user, temp) is None  # numba's own places work
    only_temp = choose_cache_dir(pkg, user, temp, writable=lambda p: p == temp)
    assert only_temp == str(temp)
    assert choose_cache_dir(pkg, user, temp, writable=lambda p: False) == ""


def test_kernels_compile_and_cache_when_install_and_home_are_read_only(tmp_path):
    """A process where neither the package's __pycache__ nor the user cache can be written:
    one RuntimeWarning, and a cached kernel compiles into the temporary folder."""
    kernel = tmp_path / "kernel_mod.py"
    kernel.write_text(
        "from numba import njit\n\n@njit(cache=True)\ndef twice(x):\n    return 2 * x\n"
    )
    script = textwrap.dedent(f"""
        import os, sys, tempfile, warnings
        from pathlib import Path
        os.environ.pop("NUMBA_CACHE_DIR", None)
        tempfile.tempdir = {str(tmp_path / "tmp")!r}
        os.makedirs(tempfile.tempdir)
        import dualstruct._numba_cache as cache
        real = cache._writable
        cache._writable = lambda p: str(p).startswith(tempfile.tempdir) and real(p)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            cache.configure_numba_cache()
        assert len(caught) == 1 and "cached in" in str(caught[0].message), caught
        sys.path.insert(0, {str(tmp_path)!r})
        import kernel_mod
        assert kernel_mod.twice(21) == 42
        found = [p for p in Path(tempfile.tempdir).rglob("*.nbi")]
        assert found, "no cache index written"
        print("ok")
    """)
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, cwd=Path(__file__).parent
    )
    assert done.returncode == 0 and "ok" in done.stdout, done.stderr
