"""Sphinx configuration of the dualstruct documentation (``make -C docs html``)."""

import os
import sys
import warnings
from pathlib import Path

import dualstruct

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

project = "dualstruct"
author = "the dualstruct developers"
copyright = "the dualstruct developers"
release = dualstruct.__version__
version = release

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.mathjax",
    "sphinx.ext.viewcode",
    "numpydoc",
    "sphinx_gallery.gen_gallery",
    "sphinxarg.ext",
]

autosummary_generate = True
autodoc_default_options = {"members": True, "inherited-members": False}
autodoc_typehints = "none"
numpydoc_show_class_members = False
numpydoc_class_members_toctree = False
numpydoc_xref_param_type = False

sphinx_gallery_conf = {
    "examples_dirs": str(ROOT / "examples"),
    "gallery_dirs": "auto_examples",
    # the sub-sections of the gallery (each a folder of examples/ with a README)
    "subsection_order": ["../examples/pystruct", "*"],
    "filename_pattern": r"/plot_",
    "download_all_examples": False,
    "remove_config_comments": True,
    "abort_on_example_error": True,
    "min_reported_time": 1,
}

html_theme = "pydata_sphinx_theme"
html_title = f"dualstruct {release}"
html_static_path = []
html_theme_options = {"navigation_depth": 2, "show_toc_level": 2}
templates_path = ["_templates"]
exclude_patterns = ["_build"]
nitpicky = False

os.environ.setdefault("MPLBACKEND", "Agg")


def _warning_without_path(message, category, filename, lineno, line=None):
    """A warning as the gallery pages show it: its category and message, without the file
    path and source line that Python prints (the build machine's paths)."""
    return f"{category.__name__}: {message}\n"


# sphinx-gallery writes the warnings of the examples into their pages through
# warnings.formatwarning
warnings.formatwarning = _warning_without_path
