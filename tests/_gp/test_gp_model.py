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


def test_one_slow_run_does_not_drag_a_configuration_below_a_steadily_weaker_one():
    # six configurations, four steady runs each; the best (a = 4) also has one run at a third of its speed
    enc = Encoding({"a": (1, 2, 4, 8, 16, 32)})
    level = {0: -0.5, 1: 0.2, 2: 1.0, 3: 0.8, 4: 0.3, 5: -0.4}
    rng = np.random.default_rng(3)
    rows = [(k,) for k in level for _ in range(4)] + [(2,)]
    y = np.array([level[k] + 0.03 * rng.standard_normal() for k, in rows[:-1]] + [1.0 - np.log(3.0)])
    x = enc.slots(np.array(rows)).astype(float)
    post = model.fit(x, y, enc.distance_tables())
    # the same hyperparameters with every run at the fitted noise: the plain Gaussian posterior
    gaussian = model.Posterior(post.kernel, post.mean, post.x, post.y, torch.full_like(post.y, post.noise_variance),
                               post.theta, post.noise_variance)
    at = enc.slots(np.array([(2,), (3,)])).astype(float)
    assert np.diff(gaussian.predict(at)[0])[0] > 0  # the mean of logs ranks a = 8 first
    mean, _ = post.predict(at)
    assert mean[0] > mean[1]  # the reweighted posterior ranks a = 4 first, by the bulk of its runs
    assert float(post.noise[-1]) > 2 * post.noise_variance  # the slow run carries a larger noise variance
    assert post.with_fantasies(at[:1]).noise_variance == post.noise_variance  # one run's noise, fantasies aside
