"""The surrogate: a GPyTorch exact GP over the encoded space, and its fit.

Model of standardised ``log(objective)`` over slot rows (choice indices,
plus the ``log2`` ratios of paired size parameters), with distances taken
from the unit-cube encoding (:mod:`iobo._gp.encoding`):

- kernel: :class:`AdditiveJointMatern52`, a Matérn-5/2 with one lengthscale
  per input (parameter or ratio) plus an additive (first-order) Matérn-5/2
  sharing them;
- priors that keep the fit sane on 5-50 points: lengthscales
  ``LogNormal(0.5, 1)`` (median 1.6 unit-cube widths, 2.5% below 0.23:
  neighbouring powers of two are expected to be alike, so few points are
  read as noise rather than as wiggles; scaled by ``sqrt(p)`` in the joint
  term),
  each kernel scale ``LogNormal(log 0.5, 1)``, noise variance
  ``LogNormal(log 0.1, 1)`` bounded below by 1e-4 (observations are
  standardised, so 0.1 is 10% of their variance);
- hyperparameters: maximum a posteriori by L-BFGS-B (:func:`neg_log_posterior`),
  warm-started from the previous fit when the encoding is unchanged.

:class:`Posterior` then does the exact GP algebra itself (one Cholesky
factor), so that pending points can be added as noise-free fantasies and
thousands of candidates scored in one batch.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch
import gpytorch
from gpytorch.constraints import GreaterThan, Positive
from gpytorch.priors import LogNormalPrior

NOISE_FLOOR = 1e-4  # standardised noise variance
FANTASY_NOISE = 1e-6  # noise variance given to pending points


def matern52(r2: torch.Tensor) -> torch.Tensor:
    """Matérn-5/2 correlation of squared scaled distances ``r2`` (any shape)."""
    s = math.sqrt(5.0) * r2.clamp_min(1e-12).sqrt()
    return (1.0 + s + s.square() / 3.0) * torch.exp(-s)


class AdditiveJointMatern52(gpytorch.kernels.Kernel):
    """``additive_scale * mean_j M52(r_j) + joint_scale * M52(sqrt(mean_j r_j^2))``.

    ``r_j`` is the unit-cube distance in parameter ``j``'s columns divided by
    its lengthscale ``l_j`` (one per parameter; a nominal parameter's one-hot
    columns share theirs).  The joint term is a Matérn-5/2 with one
    lengthscale per input (``l_j sqrt(p)``, the dimension-scaled lengthscales
    of Hvarfner et al. 2024) and models interactions; the additive term
    carries what one parameter does whatever the others are: I/O bandwidth is
    close to a product of per-layer factors, so its log is close to a sum,
    and an effect seen in one region is expected elsewhere.

    Inputs are *slot* rows (``n x p``, float-typed slot indices, see
    :meth:`Encoding.slots`); tables: squared unit-cube distances between
    one input's slots (``p`` tables, ``w_j x w_j``,
    :meth:`Encoding.distance_tables`).  Working on slots, each input's
    Matérn values form a tiny table, computed once per hyperparameter
    setting: the table columns that a set of slot rows selects, stacked
    (``W x n``, ``W = sum w_j``, :meth:`left`), are then gathered at another
    set's slots and summed over inputs (:meth:`combine`) instead of
    computing ``n x m x p`` exponentials.
    """

    def __init__(self, tables):
        super().__init__()
        widths = [len(t) for t in tables]
        self.tables = [torch.as_tensor(t, dtype=torch.float64) for t in tables]
        self.register_buffer("offsets", torch.as_tensor(np.concatenate([[0], np.cumsum(widths)[:-1]]), dtype=torch.long))
        for name, count, prior in (
            ("lengthscale", len(widths), LogNormalPrior(0.5, 1.0)),
            ("additive_scale", 1, LogNormalPrior(math.log(0.5), 1.0)),
            ("joint_scale", 1, LogNormalPrior(math.log(0.5), 1.0)),
        ):
            self.register_parameter(f"raw_{name}", torch.nn.Parameter(torch.zeros(count, dtype=torch.float64)))
            self.register_constraint(f"raw_{name}", Positive())
            self.register_prior(f"{name}_prior", prior, lambda m, n=name: m.value(n), lambda m, v, n=name: m.set(n, v))

    def value(self, name: str) -> torch.Tensor:
        """A hyperparameter (``lengthscale``: ``p``; the scales: ``1``), constrained positive."""
        return getattr(self, f"raw_{name}_constraint").transform(getattr(self, f"raw_{name}"))

    def set(self, name: str, value) -> None:
        raw = getattr(self, f"raw_{name}")
        value = torch.as_tensor(value, dtype=raw.dtype).expand_as(raw)
        self.initialize(**{f"raw_{name}": getattr(self, f"raw_{name}_constraint").inverse_transform(value)})

    @property
    def variance(self) -> float:
        """Prior variance ``k(x, x)``."""
        return float(self.value("additive_scale") + self.value("joint_scale"))

    def prepare(self, x1: torch.Tensor, x2: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """What :meth:`covariance` needs of two slot-row sets, fixed by the inputs alone:
        ``x1`` as integer slots (``n x p``) and ``x2`` as columns of :meth:`left` (``m x p``)."""
        return x1.long(), self.columns(x2)

    def columns(self, x: torch.Tensor) -> torch.Tensor:
        """Slot rows ``x`` (``m x p``) as column indices into :meth:`left`'s output (``m x p``)."""
        return x.long() + self.offsets

    def left(self, slots: torch.Tensor) -> torch.Tensor:
        """The table columns that integer slot rows ``slots`` (``n x p``) select, stacked, at the current
        hyperparameters: Matérn values beside squared scaled distances (``W x 2n``)."""
        inverse_sq = self.value("lengthscale").square().reciprocal()
        parts = []
        for j, table in enumerate(self.tables):
            s = table * inverse_sq[j]  # w_j x w_j, symmetric: column k is row k
            parts.append(torch.cat([matern52(s), s], 1).index_select(1, torch.cat([slots[:, j], slots[:, j] + len(s)])))
        return torch.cat(parts, 0)

    def combine(self, left: torch.Tensor, columns: torch.Tensor) -> torch.Tensor:
        """Covariance (``n x m``) of the rows behind ``left`` (:meth:`left`) and the slot rows behind
        ``columns`` (:meth:`columns`): one entry per input gathered and summed."""
        n_params = self.offsets.shape[0]
        total = left.index_select(0, columns[:, 0])  # m x 2n
        for j in range(1, n_params):  # row gathers: cheap whatever the tables' widths
            total += left.index_select(0, columns[:, j])
        n = left.shape[1] // 2
        return (self.value("additive_scale") / n_params * total[:, :n]
                + self.value("joint_scale") * matern52(total[:, n:] / n_params)).T

    def covariance(self, prepared: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
        """Covariance (``n x m``) of inputs :meth:`prepare` d."""
        slots, columns = prepared
        return self.combine(self.left(slots), columns)

    def forward(self, x1: torch.Tensor, x2: torch.Tensor, diag: bool = False, **params) -> torch.Tensor:
        """Covariance ``n x m`` of slot rows ``x1`` (``n x p``) and ``x2`` (``m x p``); ``n`` with ``diag``."""
        if diag:
            return torch.stack([self.covariance(self.prepare(a[None], b[None]))[0, 0] for a, b in zip(x1, x2)])
        return self.covariance(self.prepare(x1, x2))


class ExactGP(gpytorch.models.ExactGP):
    """Constant mean, additive-plus-joint Matérn-5/2, Gaussian noise (all learned)."""

    def __init__(self, x: torch.Tensor, y: torch.Tensor, tables):
        likelihood = gpytorch.likelihoods.GaussianLikelihood(
            noise_prior=LogNormalPrior(math.log(0.1), 1.0), noise_constraint=GreaterThan(NOISE_FLOOR)
        )
        super().__init__(x, y, likelihood)
        self.mean_module = gpytorch.means.ConstantMean()
        self.covar_module = AdditiveJointMatern52(tables)
        self.double()
        self.likelihood.noise = 0.1
        self.covar_module.set("lengthscale", 1.0)
        self.covar_module.set("additive_scale", 0.5)
        self.covar_module.set("joint_scale", 0.5)

    def forward(self, x: torch.Tensor) -> gpytorch.distributions.MultivariateNormal:
        return gpytorch.distributions.MultivariateNormal(self.mean_module(x), self.covar_module(x))


def _flat(model: torch.nn.Module) -> np.ndarray:
    return torch.cat([p.detach().reshape(-1) for p in model.parameters()]).numpy().copy()


def _assign(model: torch.nn.Module, theta: np.ndarray) -> None:
    offset = 0
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.as_tensor(theta[offset : offset + p.numel()]).reshape(p.shape))
            offset += p.numel()


def _log_prior(model: ExactGP) -> torch.Tensor:
    """Sum of the registered log-normal priors' log densities at the current hyperparameters.

    Written out instead of calling ``prior.log_prob`` (a transformed
    distribution, ~10x slower); equal to it (see the tests).
    """
    total = torch.zeros((), dtype=torch.float64)
    for _, module, prior, closure, _ in model.named_priors():
        value = closure(module)
        z = (value.log() - prior.loc) / prior.scale
        total = total - (value.log() + prior.scale.log() + 0.5 * math.log(2.0 * math.pi) + 0.5 * z.square()).sum()
    return total


def neg_log_posterior(model: ExactGP, x: torch.Tensor, y: torch.Tensor, prepared=None) -> torch.Tensor:
    """``-(log N(y | m, K + noise I) + log prior) / n``: what the fit minimises.

    The same number as GPyTorch's ``-ExactMarginalLogLikelihood``, computed
    with one dense Cholesky factor (no lazy tensors): several times faster.
    prepared: ``covar_module.prepare(x, x)``, which no hyperparameter changes.
    """
    n = y.shape[0]
    prepared = model.covar_module.prepare(x, x) if prepared is None else prepared
    k = model.covar_module.covariance(prepared) + model.likelihood.noise * torch.eye(n, dtype=torch.float64)
    chol = torch.linalg.cholesky(k)
    r = (y - model.mean_module.constant).unsqueeze(-1)
    a = torch.cholesky_solve(r, chol)
    log_lik = -0.5 * (r * a).sum() - chol.diagonal().log().sum() - 0.5 * n * math.log(2.0 * math.pi)
    return -(log_lik + _log_prior(model)) / n


def fit(x: np.ndarray, y: np.ndarray, tables, warm: np.ndarray | None = None, maxiter: int = 200) -> "Posterior":
    """MAP fit of the GP to slot rows ``x`` (``n x p``) and ``y`` (``n``, standardised).

    tables: the encoding's squared distances between slots (one ``w_j x w_j`` per input);
    warm: raw hyperparameters of an earlier fit of the same encoding (from
    :attr:`Posterior.theta`), the starting point when given; maxiter: L-BFGS-B
    iterations at most (0: keep ``warm`` as it is, only condition on the data).
    """
    tx = torch.as_tensor(x, dtype=torch.float64)
    ty = torch.as_tensor(y, dtype=torch.float64)
    model = ExactGP(tx, ty, tables)
    if warm is not None and warm.size == _flat(model).size:
        _assign(model, warm)

    prepared = model.covar_module.prepare(tx, tx)

    def loss_and_grad(theta: np.ndarray) -> tuple[float, np.ndarray]:
        _assign(model, theta)
        model.zero_grad()
        try:
            loss = neg_log_posterior(model, tx, ty, prepared)
        except torch.linalg.LinAlgError:  # not positive definite: steer away
            return math.inf, np.zeros_like(theta)
        loss.backward()
        grad = torch.cat([p.grad.reshape(-1) for p in model.parameters()])
        return float(loss.detach()), grad.numpy().copy()

    theta = theta0 = _flat(model)
    if maxiter > 0:
        import scipy.optimize  # here: conditioning on kept hyperparameters (maxiter 0) does without its import

        result = scipy.optimize.minimize(loss_and_grad, theta0, jac=True, method="L-BFGS-B", options={"maxiter": maxiter})
        theta = result.x if np.isfinite(result.fun) else theta0
    _assign(model, theta)
    with torch.no_grad():
        noise = float(model.likelihood.noise)
        return Posterior(model.covar_module, float(model.mean_module.constant), tx, ty, torch.full_like(ty, noise), theta)


@dataclass
class Posterior:
    """Exact GP posterior of the latent function (not of a new noisy run).

    kernel: the fitted covariance; mean: the constant prior mean; x (``n x p``, slot rows),
    y (``n``): conditioning points and values; noise (``n``): their noise
    variances; theta: the raw hyperparameters, for warm starts.
    """

    kernel: gpytorch.kernels.Kernel
    mean: float
    x: torch.Tensor
    y: torch.Tensor
    noise: torch.Tensor
    theta: np.ndarray

    def __post_init__(self) -> None:
        with torch.no_grad():
            self._left = self.kernel.left(self.x.long())  # fixed per posterior
            k = self.kernel.combine(self._left, self.kernel.columns(self.x)) + torch.diag(self.noise)
            self._chol = torch.linalg.cholesky(k)
            self._alpha = torch.cholesky_solve((self.y - self.mean).unsqueeze(-1), self._chol).squeeze(-1)
            self._prior_var = self.kernel.variance

    @property
    def noise_variance(self) -> float:
        """Learned noise variance of one run (standardised units)."""
        return float(self.noise[0])

    def predict(self, xc: np.ndarray | torch.Tensor, batch: int = 1024) -> tuple[np.ndarray, np.ndarray]:
        """Posterior mean and variance (each ``m``) at slot rows ``xc`` (``m x p``)."""
        xc = torch.as_tensor(xc, dtype=torch.float64)
        means, variances = [], []
        with torch.no_grad():
            for start in range(0, xc.shape[0], batch):
                part = xc[start : start + batch]
                kxc = self.kernel.combine(self._left, self.kernel.columns(part))
                means.append(self.mean + kxc.T @ self._alpha)
                v = torch.linalg.solve_triangular(self._chol, kxc, upper=False)
                variances.append((self._prior_var - v.square().sum(0)).clamp_min(1e-12))
        if not means:
            return np.zeros(0), np.zeros(0)
        return torch.cat(means).numpy(), torch.cat(variances).numpy()

    def joint_draws(self, xc: np.ndarray | torch.Tensor, draws: int, seed: int = 0) -> np.ndarray:
        """``draws`` joint samples (``draws x m``) of the latent function at slot rows ``xc`` (``m x p``), in
        standardised units: draws, not marginals, because the configurations' values are correlated."""
        xc = torch.as_tensor(xc, dtype=torch.float64)
        with torch.no_grad():
            kxc = self.kernel.combine(self._left, self.kernel.columns(xc))
            mean = (self.mean + kxc.T @ self._alpha).numpy()
            v = torch.linalg.solve_triangular(self._chol, kxc, upper=False)
            cov = (self.kernel.covariance(self.kernel.prepare(xc, xc)) - v.T @ v).numpy()
        values, vectors = np.linalg.eigh((cov + cov.T) / 2)
        return mean + np.random.default_rng(seed).standard_normal((draws, len(mean))) @ (
            vectors * np.sqrt(values.clip(0))).T

    def with_fantasies(self, xp: np.ndarray) -> "Posterior":
        """This posterior also conditioned on pending slot rows ``xp`` (``k x p``).

        Each pending point is given its current posterior mean as a noise-free
        observation ("kriging believer"): the mean is unchanged there while
        the variance at and near it collapses, so acquisition turns elsewhere.
        """
        if len(xp) == 0:
            return self
        mean, _ = self.predict(xp)
        xp = torch.as_tensor(xp, dtype=torch.float64)
        return Posterior(
            self.kernel,
            self.mean,
            torch.cat([self.x, xp]),
            torch.cat([self.y, torch.as_tensor(mean)]),
            torch.cat([self.noise, torch.full((len(xp),), FANTASY_NOISE, dtype=torch.float64)]),
            self.theta,
        )
