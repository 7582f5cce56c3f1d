"""Training curves: plot_history, History.plot and ``dualstruct info --plot``."""

import io

import matplotlib
import numpy as np
import pytest

import dualstruct
from dualstruct.cli import main
from dualstruct.datasets import make_chain

matplotlib.use("Agg")


@pytest.fixture(scope="module")
def fitted():
    X, y = make_chain(30, 5, 4, 12, random_state=0)
    return dualstruct.StructuredSVM(max_iter=12, check_every=3, tol=0, random_state=0).fit(
        X[:20], y[:20], validation_data=(X[20:], y[20:])
    )


def test_plot_history_draws_objective_gap_and_score(fitted):
    import matplotlib.pyplot as plt

    axes = dualstruct.plot_history(fitted, x="passes", label="bcfw")
    assert len(axes) == 3  # a held-out score adds the third panel
    primal, dual = axes[0].get_lines()[:2]
    checked = [r for r in fitted.history_ if not np.isnan(r.primal)]
    np.testing.assert_allclose(primal.get_xdata(), [r.passes for r in checked])
    np.testing.assert_allclose(primal.get_ydata(), [r.primal for r in checked])
    np.testing.assert_allclose(dual.get_ydata(), [r.dual for r in checked])
    assert axes[1].get_yscale() == "log"
    # a second history into the same axes
    again = fitted.history_.plot(x="time", ax=axes, label="again")
    assert again is axes and len(axes[0].get_lines()) == 4
    plt.close("all")
    with pytest.raises(ValueError, match="x must be"):
        dualstruct.plot_history(fitted, x="rounds")


def test_info_plot_writes_the_curves(fitted, tmp_path):
    model = tmp_path / "m.npz"
    fitted.save(model)
    out = io.StringIO()
    assert main(["info", str(model), "--plot", str(tmp_path / "curves.png")], out=out) == 0
    assert (tmp_path / "curves.png").stat().st_size > 1000
    assert "curves.png" in out.getvalue()
    err = io.StringIO()
    assert (
        main(["info", str(model), "--plot", str(tmp_path / "no" / "dir" / "c.png")], out=err) == 2
    )
