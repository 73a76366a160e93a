"""A first-order thermal model of the board, learnt online from temperature and power readings.

The die temperature ``T`` follows ``tau dT/dt = T_amb + R P - T``: it relaxes with time
constant ``tau`` towards the ambient plus ``R`` kelvin per watt of power ``P``. The model:

* tracks ``T`` and the ambient with a two-state Kalman filter (the ambient drifts as a
  random walk, so a room warming up or a fan stopping shows up as a rising ambient);
* refits ``R`` and ``tau`` by least squares over a sliding window of block means
  (``block_s`` seconds each), which averages away sensor quantisation (1 °C steps) and
  noise. A fit is accepted only when the window holds enough variation of both power and
  temperature to tell them apart, and only within physical bounds; otherwise the previous
  estimate stays;
* turns a temperature limit into the most power that keeps the predicted temperature
  under it over a horizon (`max_power_w`). At steady state this is exact whatever the
  error in ``R``: the ambient estimate absorbs it, since it is what makes the model
  agree with the readings at the present power.

Throttling seen on the board (`saw_throttling`) is evidence that the die is at least at
the trip point; the model's temperature and ambient are raised to match at once.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass

DEFAULT_TRIP_C = 80.0  # the Raspberry Pi firmware's throttle point; boards with a passive trip use theirs
DEFAULT_MARGIN_C = 3.0


@dataclass(frozen=True)
class ThermalParams:
    """The plant as the model sees it: ``r_k_per_w`` kelvin per watt, ``tau_s`` seconds, ``ambient_c``."""

    r_k_per_w: float
    tau_s: float
    ambient_c: float


class ThermalModel:
    """Learns ``tau dT/dt = T_amb + R P - T`` from readings and predicts the temperature.

    Args:
        r_k_per_w: the prior thermal resistance (pessimistic: high), used until a fit is accepted.
        tau_s: the prior time constant (pessimistic: short).
        block_s: the span of one block mean in the least-squares fit.
        window_s: how much history the fit uses; older blocks are forgotten (a fan switching
            on changes ``R`` and ``tau``).
        reading_step_c: the sensor's quantisation step (1 °C on many boards).
        reading_noise_c: the sensor's noise (standard deviation).
        ambient_drift_c: how fast the ambient may wander, as the standard deviation per
            square root of a second of its random walk.
        model_error_c: how far the model's temperature may stray from the truth, per square root
            of a second (larger trusts the readings more).
        min_power_spread_w: the power must vary at least this much (std) within the window
            for a fit, else ``R`` and the ambient cannot be told apart.
        min_temp_spread_c: likewise for the temperature (a few quantisation steps).

    >>> model = ThermalModel()
    >>> for t in range(600):
    ...     model.observe(t * 0.5, 40.0, 2.0)
    >>> round(model.temp_c)
    40
    """

    def __init__(
        self,
        *,
        r_k_per_w: float = 10.0,
        tau_s: float = 30.0,
        block_s: float = 5.0,
        window_s: float = 600.0,
        reading_step_c: float = 1.0,
        reading_noise_c: float = 0.1,
        ambient_drift_c: float = 0.3,
        model_error_c: float = 0.01,
        min_power_spread_w: float = 0.15,
        min_temp_spread_c: float = 3.0,
    ):
        if not (r_k_per_w > 0 and tau_s > 0 and block_s > 0 and window_s >= 10 * block_s):
            raise ValueError(
                f"need r_k_per_w > 0, tau_s > 0, block_s > 0 and window_s >= 10 blocks;"
                f" got {r_k_per_w}, {tau_s}, {block_s}, {window_s}"
            )
        self.r_k_per_w = float(r_k_per_w)
        self.tau_s = float(tau_s)
        self.block_s = float(block_s)
        self.min_power_spread_w = min_power_spread_w
        self.min_temp_spread_c = min_temp_spread_c
        self.fits = 0  # accepted least-squares fits
        self._reading_var = reading_step_c**2 / 12.0 + reading_noise_c**2
        self._ambient_var_rate = ambient_drift_c**2
        self._temp_var_rate = model_error_c**2
        self._state: list[float] = []  # [T, T_amb] once a reading came
        self._cov = [[0.0, 0.0], [0.0, 0.0]]
        self._t = 0.0
        self._blocks: deque[tuple[float, float]] = deque(maxlen=max(10, int(window_s / block_s)))
        self._block = [0.0, 0.0, 0.0, 0.0]  # start time, time, sum of T readings x dt, sum of P x dt
        self._block_readings = 0

    # ------------------------------------------------------------------ estimates

    @property
    def ready(self) -> bool:
        """True once the model has seen a reading."""
        return bool(self._state)

    @property
    def temp_c(self) -> float:
        """The filtered die temperature now."""
        return self._state[0] if self._state else math.nan

    @property
    def ambient_c(self) -> float:
        return self._state[1] if self._state else math.nan

    @property
    def params(self) -> ThermalParams:
        return ThermalParams(self.r_k_per_w, self.tau_s, self.ambient_c)

    def steady_c(self, power_w: float) -> float:
        """The temperature the board settles at under a constant ``power_w``."""
        return self.ambient_c + self.r_k_per_w * power_w

    def predict_c(self, power_w: float, horizon_s: float) -> float:
        """The temperature ``horizon_s`` from now under a constant ``power_w`` (the peak when heating)."""
        decay = math.exp(-horizon_s / self.tau_s)
        return decay * self.temp_c + (1.0 - decay) * self.steady_c(power_w)

    def max_power_w(self, limit_c: float, horizon_s: float) -> float:
        """The most constant power whose predicted temperature stays at or under ``limit_c``.

        Over ``horizon_s`` the board may use the headroom left below the limit (more than the
        steady-state power while cool, less while above the limit); replanning every control
        period makes this a smooth approach to the limit rather than a bang at it.
        """
        if not self.ready:
            return math.inf
        reach = 1.0 - math.exp(-horizon_s / self.tau_s)
        power = (self.temp_c + (limit_c - self.temp_c) / reach - self.ambient_c) / self.r_k_per_w
        return max(0.0, power)

    # ------------------------------------------------------------------ learning

    def observe(self, t_s: float, temp_c: float, power_w: float) -> None:
        """One reading: ``temp_c`` at ``t_s``, after a period whose mean power was ``power_w``."""
        if not (math.isfinite(temp_c) and math.isfinite(power_w)):
            raise ValueError(f"thermal model needs finite readings, got {temp_c!r} °C and {power_w!r} W")
        if not self._state:
            self._state = [temp_c, temp_c]  # a board first seen is taken to be at ambient
            self._cov = [[self._reading_var, 0.0], [0.0, 25.0]]
            self._t = t_s
            self._block = [t_s, 0.0, 0.0, 0.0]
            return
        dt = t_s - self._t
        if dt <= 0:
            return
        self._t = t_s
        self._predict(dt, power_w)
        self._correct(temp_c)
        self._add_to_block(t_s, dt, temp_c, power_w)

    def saw_throttling(self, trip_c: float) -> None:
        """The board throttles: the die is at least at ``trip_c``. Raise the estimate (and the
        ambient, which is what the model got wrong) to match, at once."""
        if not self._state or self._state[0] >= trip_c:
            return
        shortfall = trip_c - self._state[0]
        self._state[0] = trip_c
        self._state[1] += shortfall

    def _predict(self, dt: float, power_w: float) -> None:
        a = 1.0 - math.exp(-dt / self.tau_s)
        temp, ambient = self._state
        self._state = [temp + a * (ambient + self.r_k_per_w * power_w - temp), ambient]
        (p00, p01), (p10, p11) = self._cov
        # F = [[1 - a, a], [0, 1]]: P <- F P F^T + Q
        f00, f01 = 1.0 - a, a
        n00 = f00 * (f00 * p00 + f01 * p10) + f01 * (f00 * p01 + f01 * p11)
        n01 = f00 * p01 + f01 * p11
        n11 = p11
        self._cov = [[n00 + self._temp_var_rate * dt, n01], [n01, n11 + self._ambient_var_rate * dt]]

    def _correct(self, temp_c: float) -> None:
        (p00, p01), (p10, p11) = self._cov
        s = p00 + self._reading_var
        k0, k1 = p00 / s, p10 / s
        innovation = temp_c - self._state[0]
        self._state[0] += k0 * innovation
        self._state[1] += k1 * innovation
        self._cov = [[(1 - k0) * p00, (1 - k0) * p01], [p10 - k1 * p00, p11 - k1 * p01]]

    def _add_to_block(self, t_s: float, dt: float, temp_c: float, power_w: float) -> None:
        block = self._block
        block[1] += dt
        block[2] += temp_c * dt
        block[3] += power_w * dt
        if t_s - block[0] >= self.block_s - 1e-9:
            self._blocks.append((block[2] / block[1], block[3] / block[1]))
            self._block = [t_s, 0.0, 0.0, 0.0]
            if len(self._blocks) >= 20:
                self._fit()

    def _fit(self) -> None:
        """Least squares of T[j+1] = alpha T[j] + beta (P[j] + P[j+1]) / 2 + gamma over the window's
        block means (from one block's centre to the next, half of each block's power heats)."""
        blocks = list(self._blocks)
        xs_t = [b[0] for b in blocks[:-1]]
        xs_p = [0.5 * (a[1] + b[1]) for a, b in zip(blocks, blocks[1:])]
        ys = [b[0] for b in blocks[1:]]
        n = len(ys)
        mean_t, mean_p, mean_y = sum(xs_t) / n, sum(xs_p) / n, sum(ys) / n
        stt = sum((x - mean_t) ** 2 for x in xs_t) / n
        spp = sum((x - mean_p) ** 2 for x in xs_p) / n
        if stt < self.min_temp_spread_c**2 or spp < self.min_power_spread_w**2:
            return  # not enough excitation to separate R from the ambient
        stp = sum((a - mean_t) * (b - mean_p) for a, b in zip(xs_t, xs_p)) / n
        sty = sum((a - mean_t) * (y - mean_y) for a, y in zip(xs_t, ys)) / n
        spy = sum((b - mean_p) * (y - mean_y) for b, y in zip(xs_p, ys)) / n
        det = stt * spp - stp * stp
        if det <= 1e-6 * stt * spp:
            return  # power and temperature moved together: collinear
        alpha = (sty * spp - spy * stp) / det
        beta = (spy * stt - sty * stp) / det
        gamma = mean_y - alpha * mean_t - beta * mean_p
        if not 0.0 < alpha < 0.999 or beta <= 0:
            return
        tau = -self.block_s / math.log(alpha)
        r = beta / (1.0 - alpha)
        if not (1.0 <= tau <= 3600.0 and 0.2 <= r <= 60.0):
            return
        self.tau_s, self.r_k_per_w = tau, r
        # The ambient the filter tracked was the one that made the old R and tau fit the
        # readings; the fit's own ambient is the one consistent with the new ones.
        self._state[1] = gamma / (1.0 - alpha)
        self.fits += 1
