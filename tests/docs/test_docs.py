"""Every name of the API reference has a numpydoc docstring with its parameters, what it
returns and an example (the doctests themselves run with the package's modules)."""

import re
from pathlib import Path

import pytest
from numpydoc.validate import validate

API = Path(__file__).resolve().parents[2] / "docs" / "api.rst"
NAMES = [
    line.strip()
    for line in API.read_text().splitlines()
    if re.match(r"^   [A-Za-z_][A-Za-z_.]*$", line)
]
#: numpydoc checks that make a docstring complete: a summary, every parameter documented
#: and none unknown, the return value, an example
REQUIRED = ("GL08", "SS01", "PR01", "PR02", "RT01", "EX01")


def test_the_reference_lists_the_public_api():
    assert len(NAMES) >= 50
    import dualstruct

    for name in dualstruct.__all__:
        if name != "__version__":
            assert name in NAMES, f"{name} is public but not in docs/api.rst"


@pytest.mark.parametrize("name", NAMES)
def test_public_docstring_is_complete(name):
    result = validate(f"dualstruct.{name}")
    missing = [f"{code}: {message}" for code, message in result["errors"] if code in REQUIRED]
    assert not missing, missing
