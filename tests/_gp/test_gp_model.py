"""The GPyTorch model, its MAP fit and the posterior algebra."""

import numpy as np
import pytest
import torch
import gpytorch

from iobo._gp import model
from iobo._gp.encoding import Encoding


def _data(n=12, seed=0):
    enc = Encoding({"a": (1, 2, 4, 8, 16, 32), "b": (1, 2, 4, 8), "mode": ("x", "y", "z")})
    rng = np.random.default_rng(seed)
    rows = enc.random(n, rng)
    u = enc.encode(rows)  # unit cube, to define a smooth truth
    y = np.sin(6 * u[:, 0]) + u[:, 1] + 0.5 * u[:, 2] + 0.05 * rng.standard_normal(n)
    return enc, enc.slots(rows).astype(float), (y - y.mean()) / y.std()


def test_fast_objective_equals_gpytorch_marginal_likelihood_with_priors():
    enc, x, y = _data()
    tx, ty = torch.as_tensor(x), torch.as_tensor(y)
    gp = model.ExactGP(tx, ty, enc.distance_tables())
    gp.covar_module.set("lengthscale", torch.tensor([0.3, 0.7, 1.5], dtype=torch.float64))
    gp.covar_module.set("additive_scale", 0.3)
    gp.likelihood.noise = 0.05
    gp.train()
    mll = gpytorch.mlls.ExactMarginalLogLikelihood(gp.likelihood, gp)
    with gpytorch.settings.max_cholesky_size(10_000):
        expected = -mll(gp(tx), ty)
    assert float(model.neg_log_posterior(gp, tx, ty).detach()) == pytest.approx(float(expected.detach()), rel=1e-8)


def test_fit_predicts_held_out_points_and_learns_small_noise():
    enc, x, y = _data(n=40)
    post = model.fit(x[:30], y[:30], enc.distance_tables())
    mean, var = post.predict(x[30:])
    assert np.corrcoef(mean, y[30:])[0, 1] > 0.8
    assert (var > 0).all()
    assert model.NOISE_FLOOR <= post.noise_variance < 0.2


def test_noise_prior_keeps_five_points_sane():
    enc, x, y = _data(n=5)
    post = model.fit(x, y, enc.distance_tables())
    assert model.NOISE_FLOOR <= post.noise_variance < 1.0
    lengthscale = post.kernel.value("lengthscale").detach().numpy()
    assert np.isfinite(lengthscale).all() and (lengthscale > 1e-3).all()


def test_warm_start_from_the_optimum_stays_there():
    enc, x, y = _data()
    cold = model.fit(x, y, enc.distance_tables())
    warm = model.fit(x, y, enc.distance_tables(), warm=cold.theta, maxiter=5)
    assert warm.theta == pytest.approx(cold.theta, abs=1e-3)


def test_fantasies_keep_the_mean_and_remove_the_variance_at_pending_points():
    enc, x, y = _data()
    post = model.fit(x[:8], y[:8], enc.distance_tables())
    pending = x[8:10]
    before_mean, before_var = post.predict(pending)
    after_mean, after_var = post.with_fantasies(pending).predict(pending)
    assert after_mean == pytest.approx(before_mean, abs=1e-4)
    assert (after_var < 1e-4 * before_var + 1e-5).all()


def test_table_lookup_kernel_equals_the_formula_on_the_unit_cube():
    enc, x, _ = _data(n=6)
    gp = model.ExactGP(torch.as_tensor(x), torch.zeros(6, dtype=torch.float64), enc.distance_tables())
    kernel = gp.covar_module
    lengthscale = torch.tensor([0.3, 0.7, 1.5], dtype=torch.float64)
    kernel.set("lengthscale", lengthscale)
    kernel.set("additive_scale", 0.3)
    kernel.set("joint_scale", 0.6)
    u = torch.as_tensor(enc.encode(x.astype(int)))
    groups = torch.as_tensor(enc.groups)
    r2 = torch.stack([((u[:, None, groups == j] - u[None, :, groups == j]) ** 2).sum(-1) for j in range(3)], -1)
    r2 = r2 / lengthscale.square()
    expected = 0.3 * model.matern52(r2).mean(-1) + 0.6 * model.matern52(r2.mean(-1))
    with torch.no_grad():
        assert kernel(torch.as_tensor(x), torch.as_tensor(x)).to_dense() == pytest.approx(expected, abs=1e-12)
        assert kernel(torch.as_tensor(x), torch.as_tensor(x), diag=True) == pytest.approx(expected.diagonal(), abs=1e-12)
