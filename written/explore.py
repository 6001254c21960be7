"""The written part, executed: every claim of the attention exploration checked with numbers.

Run from the repository root with ``python written/explore.py`` (``./run.sh explore``).
Each ``part_*`` function builds the construction of one written question, measures the
attention outputs, and returns a :class:`Section` holding

* ``rows``   - (quantity, measured, predicted, verdict) lines that ``main`` prints, and
* ``values`` - the measured numbers by name, for ``tests/test_explore.py``.

A row's verdict is PASS when the measurement agrees with what the written answer
predicts (for a deliberately wrong construction the prediction is that it fails, so a
large error is a PASS there), FAIL when it does not, and ``-`` for purely informative
rows. ``main`` returns 1 if any row FAILs.

Notation: for one query q, keys k_i and values v_i (rows of K and V),
alpha = softmax(K q) and c = sum_i alpha_i v_i. Everything is float64 numpy, seeded;
the whole run takes a few seconds on a laptop CPU.
"""

from __future__ import annotations

import math
import sys
import time
from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np

SEED = 20251020

# --------------------------------------------------------------------------- reporting


@dataclass
class Row:
    quantity: str
    measured: object  # a number or a short string
    predicted: str
    ok: bool | None = None  # None: informative only

    @property
    def verdict(self) -> str:
        return "-" if self.ok is None else ("PASS" if self.ok else "FAIL")


@dataclass
class Section:
    key: str
    title: str
    rows: list = field(default_factory=list)
    values: dict = field(default_factory=dict)

    def add(self, quantity, measured, predicted, ok=None):
        self.rows.append(Row(quantity, measured, predicted, None if ok is None else bool(ok)))

    @property
    def failures(self):
        return [r for r in self.rows if r.ok is False]


def _fmt(x) -> str:
    if isinstance(x, str):
        return x
    if isinstance(x, (bool, np.bool_)):
        return str(bool(x))
    if isinstance(x, (int, np.integer)):
        return str(int(x))
    x = float(x)
    if x == 0.0:
        return "0"
    if abs(x) < 1e-3 or abs(x) >= 1e5:
        return f"{x:.3e}"
    return f"{x:.4f}"


def render(section: Section) -> str:
    w_q = max(44, *(len(r.quantity) for r in section.rows))
    w_m = max(12, *(len(_fmt(r.measured)) for r in section.rows))
    w_p = max(20, *(len(r.predicted) for r in section.rows))
    head = f"== [{section.key}] {section.title}"
    lines = [head, f"{'quantity':<{w_q}}  {'measured':>{w_m}}  {'predicted by the answer':<{w_p}}  verdict"]
    lines.append("-" * (w_q + w_m + w_p + 13))
    for r in section.rows:
        lines.append(f"{r.quantity:<{w_q}}  {_fmt(r.measured):>{w_m}}  {r.predicted:<{w_p}}  {r.verdict}")
    return "\n".join(lines)


# --------------------------------------------------------------------------- attention


def softmax(scores, axis=-1):
    """Numerically stable softmax (scores of size 1e4 and more appear in part e)."""
    z = scores - np.max(scores, axis=axis, keepdims=True)
    e = np.exp(z)
    return e / e.sum(axis=axis, keepdims=True)


def attend(q, keys, values):
    """Single-head attention. q: (..., d); keys: (..., n, d); values: (n, d) or (..., n, d).

    Returns the weights alpha (..., n) and the output c (..., d_v)."""
    alpha = softmax(np.einsum("...nd,...d->...n", keys, q))
    if values.ndim == 2:
        return alpha, alpha @ values
    return alpha, np.einsum("...n,...nd->...d", alpha, values)


def orthonormal_rows(rng, n, d):
    """n orthonormal vectors of R^d (a random orthonormal frame), as the rows of an (n, d) array."""
    q, r = np.linalg.qr(rng.normal(size=(d, n)))
    return (q * np.sign(np.diag(r))).T


def rel_err(x, target):
    return float(np.linalg.norm(np.asarray(x) - target) / np.linalg.norm(target))


def total_variance(samples):
    """Trace of the sample covariance of a set of vectors (rows)."""
    return float(np.var(samples, axis=0).sum())


def phi(x):
    """Standard normal CDF."""
    return 0.5 * math.erfc(-x / math.sqrt(2.0))


# --------------------------------------------------------------------------- (a)


def part_a_copy(n=8, d=32, seed=SEED) -> Section:
    """(a) alpha is a distribution; one dominant dot product copies its value."""
    rng = np.random.default_rng(seed)
    s = Section("A-copy", "(a) softmax weights, and copying one value when one dot product dominates")

    # (i) the weights are a categorical distribution, whatever q and the keys are
    qs = 3 * rng.normal(size=(2000, d))
    ks = 3 * rng.normal(size=(2000, n, d))
    w = softmax(np.einsum("snd,sd->sn", ks, qs))
    s.values["min_weight"] = float(w.min())
    s.values["sum_err"] = float(np.abs(w.sum(-1) - 1).max())
    s.add("(i) min alpha_i, 2000 random (q, keys)", w.min(), ">= 0", w.min() >= 0)
    s.add("(i) max |sum_i alpha_i - 1|", s.values["sum_err"], "0 (< 1e-12)", s.values["sum_err"] < 1e-12)

    # (ii)/(iii) orthonormal keys, q = g k_j: score gap g between k_j and every other key
    keys = orthonormal_rows(rng, n, d)
    values = rng.normal(size=(n, d))
    j = 3
    gaps = [0.0, 1.0, 2.0, 4.0, 8.0, 16.0, 32.0]
    alphas, errs = [], []
    for g in gaps:
        a, c = attend(g * keys[j], keys, values)
        pred = math.exp(g) / (math.exp(g) + n - 1)
        alphas.append(float(a[j]))
        errs.append(rel_err(c, values[j]))
        s.add(f"(ii) gap {g:g}: alpha_j", a[j], f"e^g/(e^g+n-1) = {pred:.6g}", abs(a[j] - pred) < 1e-12)
    s.values.update(gaps=gaps, alpha_j=alphas, copy_err=errs)
    s.add("(ii) alpha_j increasing in the gap", all(np.diff(alphas) > 0), "True", all(np.diff(alphas) > 0))
    for g, e in zip(gaps, errs):
        if g in (4.0, 16.0, 32.0):
            s.add(f"(iii) gap {g:g}: ||c - v_j|| / ||v_j||", e, "-> 0" if g < 32 else "-> 0 (< 1e-10)",
                  None if g < 32 else e < 1e-10)

    # caveats: what is NOT enough, and what else is needed
    a, _ = attend(0.1 * keys[j], keys, values)
    s.values["short_aligned_alpha"] = float(a[j])
    pred = math.exp(0.1) / (math.exp(0.1) + n - 1)
    s.add("caveat: q = 0.1 k_j (cos = 1): alpha_j", a[j], f"{pred:.4f}, no copy", abs(a[j] - pred) < 1e-12 and a[j] < 0.5)

    keys2 = keys.copy()
    keys2[0] = 3 * (0.6 * keys[j] + 0.8 * keys[1])  # longer key, 53 degrees away from q
    a, _ = attend(10 * keys[j], keys2, values)
    s.values["longer_key_alpha"] = float(a[j])
    s.add("caveat: q = 10 k_j, a 3x longer key at 53 deg: alpha_j", a[j], "~e^-8: the other key wins", a[j] < 1e-3)

    e = keys[j]  # handout criterion "k_j.q >> sum of the other k_i.q"
    keys3 = np.stack([e, e + keys[1]] + [-10 * e] * (n - 2))
    a, _ = attend(10 * e, keys3, values)
    sum_other = float((keys3[1:] @ (10 * e)).sum())
    s.values["sum_criterion_alpha"] = float(a[0])
    s.add(f"caveat: score 10 vs sum of others {sum_other:g}: alpha_j", a[0], "0.5: met, yet no copy", abs(a[0] - 0.5) < 1e-12)
    keys4 = np.stack([1.5 * e] + [0.1 * e] * 1000)
    a, _ = attend(10 * e, keys4, rng.normal(size=(1001, d)))
    s.values["sum_violated_alpha"] = float(a[0])
    s.add("caveat: score 15 vs 1000 scores of 1 (sum 1000): alpha_j", a[0], "0.9992: not met, yet copies", a[0] > 0.999)

    values5 = values.copy()
    values5[0] = 1e7 * values[0] / np.linalg.norm(values[0])
    a, c = attend(12 * keys[j], keys, values5)
    s.values["big_value_alpha"] = float(a[j])
    s.values["big_value_err"] = float(np.linalg.norm(c - values5[j]))
    s.add("caveat: gap 12, one other value 1e7 long: alpha_j", a[j], "~1 - 7e^-12", a[j] > 0.9999)
    s.add("caveat:   ... and ||c - v_j|| (||v_j|| ~ 5.7)", s.values["big_value_err"], "large: values must be bounded",
          s.values["big_value_err"] > 10)
    return s


# --------------------------------------------------------------------------- (b.i)


def part_b1_subspace(d=32, m=5, p=7, trials=500, seed=SEED + 1) -> Section:
    """(b.i) M = A A^T extracts v_a from v_a + v_b when the subspaces are orthogonal."""
    rng = np.random.default_rng(seed)
    s = Section("B1-subspace", "(b.i) recovering v_a from s = v_a + v_b with M = A A^T")
    frame = orthonormal_rows(rng, m + p, d)
    A, B = frame[:m].T, frame[m:].T  # columns a_1..a_m and b_1..b_p
    M = A @ A.T
    coef_a = rng.normal(size=(trials, m))
    coef_b = rng.normal(size=(trials, p))
    va, vb = coef_a @ A.T, coef_b @ B.T
    sums = va + vb

    err = float(np.max(np.linalg.norm(sums @ M.T - va, axis=1) / np.linalg.norm(va, axis=1)))
    coef_err = float(np.abs(sums @ A - coef_a).max())
    s.values.update(recovery_err=err, coef_err=coef_err)
    s.add(f"max ||M s - v_a|| / ||v_a||, {trials} random pairs", err, "0 (< 1e-12)", err < 1e-12)
    s.add("max |A^T s - (c_1..c_m)| (hint's weight vector)", coef_err, "0 (< 1e-12)", coef_err < 1e-12)
    s.add("||M M - M|| (M is a projection)", np.linalg.norm(M @ M - M), "0 (< 1e-12)", np.linalg.norm(M @ M - M) < 1e-12)
    s.add("||M - M^T||", np.linalg.norm(M - M.T), "0", np.linalg.norm(M - M.T) < 1e-12)
    s.add("rank M", int(np.linalg.matrix_rank(M)), f"m = {m}", np.linalg.matrix_rank(M) == m)
    s.add("||M b_k|| max over k (B is sent to 0)", np.abs(M @ B).max(), "0 (< 1e-12)", np.abs(M @ B).max() < 1e-12)

    AtA = A.T @ A
    s.values["AtA_shape"] = AtA.shape
    s.add("A^T A (a slip in one answer): shape", f"{AtA.shape[0]}x{AtA.shape[1]}", f"{d}x{d} needed: it is I_m",
          AtA.shape != (d, d) and np.allclose(AtA, np.eye(m)))

    # negative checks: drop the assumptions and A A^T stops working
    Bt = B + 0.5 * A[:, [0]]
    Bt /= np.linalg.norm(Bt, axis=0)
    sums_t = va + coef_b @ Bt.T
    err_tilt = float(np.median(np.linalg.norm(sums_t @ M.T - va, axis=1) / np.linalg.norm(va, axis=1)))
    s.values["tilted_err"] = err_tilt
    s.add("subspaces NOT orthogonal: median ||M s - v_a||/||v_a||", err_tilt, "large: needs A perp B", err_tilt > 0.1)
    R = np.triu(rng.normal(size=(m, m)), 1) + np.diag(rng.uniform(0.5, 2.0, size=m))
    As = A @ R  # same subspace, basis neither unit nor orthogonal
    err_skew = float(np.max(np.linalg.norm(sums @ (As @ As.T).T - va, axis=1) / np.linalg.norm(va, axis=1)))
    Mg = As @ np.linalg.solve(As.T @ As, As.T)
    err_gen = float(np.max(np.linalg.norm(sums @ Mg.T - va, axis=1) / np.linalg.norm(va, axis=1)))
    s.values.update(skew_err=err_skew, general_err=err_gen)
    s.add("skewed basis of A: ||A A^T s - v_a||/||v_a|| max", err_skew, "large: needs orthonormal a_i", err_skew > 0.1)
    s.add("skewed basis: A (A^T A)^-1 A^T s, error", err_gen, "0 (general projector)", err_gen < 1e-10)
    return s


# --------------------------------------------------------------------------- (b.ii)


def part_b2_average(n=8, d=32, seed=SEED + 2) -> Section:
    """(b.ii) q = beta (k_a + k_b) averages v_a and v_b; subtracting the rest converges faster."""
    rng = np.random.default_rng(seed)
    s = Section("B2-average", "(b.ii) q = beta (k_a + k_b) with orthonormal keys: c -> (v_a + v_b)/2")
    keys = orthonormal_rows(rng, n, d)
    values = rng.normal(size=(n, d))
    a, b = 1, 5
    rest = [i for i in range(n) if i not in (a, b)]
    target = 0.5 * (values[a] + values[b])
    betas = [0.0, 1.0, 2.0, 5.0, 10.0, 20.0]
    plain, minus, errs = [], [], []
    for beta in betas:
        al, c = attend(beta * (keys[a] + keys[b]), keys, values)
        al2, _ = attend(beta * (keys[a] + keys[b] - keys[rest].sum(0)), keys, values)
        f1 = math.exp(beta) / (2 * math.exp(beta) + n - 2)
        f2 = math.exp(beta) / (2 * math.exp(beta) + (n - 2) * math.exp(-beta))
        plain.append(float(al[a]))
        minus.append(float(al2[a]))
        errs.append(rel_err(c, target))
        s.add(f"beta {beta:g}: alpha_a  (alpha_a - alpha_b = {al[a] - al[b]:.0e})", al[a],
              f"e^b/(2e^b+n-2) = {f1:.6g}", abs(al[a] - f1) < 1e-12 and abs(al[a] - al[b]) < 1e-12)
        s.add(f"beta {beta:g}: alpha_a, q also minus other keys", al2[a],
              f"e^b/(2e^b+(n-2)e^-b) = {f2:.6g}", abs(al2[a] - f2) < 1e-12)
    s.values.update(betas=betas, alpha_plain=plain, alpha_minus=minus, avg_err=errs)
    s.add("beta 20: ||c - (v_a+v_b)/2|| / ||(v_a+v_b)/2||", errs[-1], "-> 0 (< 1e-7)", errs[-1] < 1e-7)
    faster = all(abs(0.5 - m2) < abs(0.5 - m1) for m1, m2, bb in zip(plain, minus, betas) if bb > 0)
    s.add("|1/2 - alpha_a| smaller with subtraction, every beta>0", faster, "True", faster)
    doubled = [attend(2 * bb * (keys[a] + keys[b]), keys, values)[0][a] for bb in betas]
    gap2 = float(np.max(np.abs(np.array(minus) - np.array(doubled))))
    s.values["minus_equals_doubled"] = gap2
    s.add("max_beta |alpha'_a(beta) - alpha_a(2 beta)|", gap2, "0: subtracting = doubling beta", gap2 < 1e-12)
    ratio = abs(0.5 - minus[3]) / abs(0.5 - plain[3])
    s.values["ratio_beta5"] = ratio
    s.add("beta 5: |1/2 - alpha'_a| / |1/2 - alpha_a|", ratio, f"~e^-5 = {math.exp(-5):.4g}", 0.5 < ratio / math.exp(-5) < 1.5)

    grid = np.arange(0.0, 20.0, 0.01)
    need = []
    for sub in (False, True):
        for beta in grid:
            q = beta * (keys[a] + keys[b] - (keys[rest].sum(0) if sub else 0))
            al, _ = attend(q, keys, values)
            if abs(0.5 - al[a]) <= 1e-3:
                need.append(float(beta))
                break
    s.values["beta_needed"] = need
    s.add("smallest beta with |1/2 - alpha_a| <= 1e-3", need[0], "ln(1497) ~ 7.31", abs(need[0] - 7.31) < 0.02)
    s.add("   ... with the other keys subtracted", need[1], "~ln(1500)/2 ~ 3.66", abs(need[1] - 3.66) < 0.05)

    t = 1000.0  # the log(t) parametrisation of one answer is the same query with beta = ln t
    al, _ = attend(math.log(t) * (keys[a] + keys[b]), keys, values)
    s.add("q = ln(t)(k_a + k_b), t = 1000: alpha_a", al[a], f"t/(2t+n-2) = {t / (2 * t + n - 2):.6g}",
          abs(al[a] - t / (2 * t + n - 2)) < 1e-12)
    return s


# --------------------------------------------------------------------------- (c), (d)

CD = dict(n=8, d=32, a=0, b=1, eps=1e-8, samples=20000, betas=(20.0, 100.0))


@lru_cache(maxsize=None)
def _cd_setup(seed=SEED + 3):
    """Means mu_i (orthonormal), orthonormal values (orthogonal to the means), and key samples.

    stable:    k_i ~ N(mu_i, eps I) for all i
    stretched: same, but Sigma_a = eps I + 1/2 mu_a mu_a^T, i.e. k_a = mu_a + noise + w/sqrt(2) mu_a
    """
    n, d, a, eps, S = CD["n"], CD["d"], CD["a"], CD["eps"], CD["samples"]
    rng = np.random.default_rng(seed)
    frame = orthonormal_rows(rng, 2 * n, d)
    mu, values = frame[:n], frame[n:]
    stable = mu[None] + math.sqrt(eps) * rng.normal(size=(S, n, d))
    stretched = mu[None] + math.sqrt(eps) * rng.normal(size=(S, n, d))
    w = rng.normal(size=S)
    stretched[:, a] += math.sqrt(0.5) * w[:, None] * mu[a]
    for arr in (mu, values, stable, stretched):
        arr.setflags(write=False)
    return mu, values, stable, stretched


def _length_quadrature(beta, values, head, mask=None, npts=8001):
    """Exact (alpha -> 0) prediction by a 1-D integral over the random length of k_a.

    With alpha -> 0 the only randomness left is s = mu_a^T k_a ~ N(1, 1/2), and the scores
    are: single head  (beta s, beta, 0, ...);  head 1 (q1 = beta mu_a)  (beta s, 0, 0, ...);
    head 2 (q2 = beta mu_b)  (0, beta, 0, ...).  Returns E c and tr Cov c, and the density
    weights and outputs on the grid so that shares of samples can be integrated as well.
    """
    z = np.linspace(-8, 8, npts)
    w = np.exp(-0.5 * z * z)
    s_len = 1 + math.sqrt(0.5) * z
    if mask is not None:
        w = w * mask(s_len)
    w = w / w.sum()
    n = len(values)
    scores = np.zeros((npts, n))
    a, b = CD["a"], CD["b"]
    if head in ("single", "head1", "multi"):
        scores[:, a] = beta * s_len
    if head == "single":
        scores[:, b] = beta
    c = softmax(scores) @ values
    if head == "multi":
        s2 = np.zeros(n)
        s2[b] = beta
        c = 0.5 * (c + softmax(s2) @ values)
    mean = w @ c
    var = float(w @ (c * c).sum(1) - mean @ mean)
    return mean, var, w, c


def _heads(q1, q2, keys, values):
    _, c1 = attend(np.broadcast_to(q1, keys.shape[:1] + q1.shape), keys, values)
    _, c2 = attend(np.broadcast_to(q2, keys.shape[:1] + q2.shape), keys, values)
    return c1, c2


def part_c_single_head() -> Section:
    """(c) single head, q = beta (mu_a + mu_b): stable keys vs a key of random length."""
    n, a, b, eps = CD["n"], CD["a"], CD["b"], CD["eps"]
    mu, values, stable, stretched = _cd_setup()
    s = Section("C-single-head", f"(c) single head q = beta(mu_a + mu_b), {CD['samples']} key samples, alpha = {eps:g}")
    avg = 0.5 * (values[a] + values[b])
    gap_ab = np.linalg.norm(values[a] - values[b])

    proj = stretched[:, a] @ mu[a]
    s.add("sampled mu_a^T k_a: variance", proj.var(), "1/2 + alpha = 0.5", abs(proj.var() - 0.5) < 0.02)
    side = stretched[:, a] - proj[:, None] * mu[a]
    s.add("sampled k_a off the mu_a axis: per-coordinate var", side.var(axis=0).mean() * CD["d"] / (CD["d"] - 1),
          f"alpha = {eps:g}", abs(side.var(axis=0).mean() * CD["d"] / (CD["d"] - 1) - eps) < 0.1 * eps)

    for beta in CD["betas"]:
        q = beta * (mu[a] + mu[b])
        _, c_st = attend(np.broadcast_to(q, (len(stable), len(q))), stable, values)
        _, c = attend(np.broadcast_to(q, (len(stretched), len(q))), stretched, values)
        mean_err = rel_err(c_st.mean(0), avg)
        v_st, v = total_variance(c_st), total_variance(c)
        da = np.linalg.norm(c - values[a], axis=1) / gap_ab
        db = np.linalg.norm(c - values[b], axis=1) / gap_ab
        dm = np.linalg.norm(c - avg, axis=1) / gap_ab
        near_a, near_b, near_avg = float((da < 0.1).mean()), float((db < 0.1).mean()), float((dm < 0.1).mean())
        tag = f"beta {beta:g}"
        s.values[tag] = dict(stable_var=v_st, stable_mean_err=mean_err, var=v, near_a=near_a, near_b=near_b, near_avg=near_avg)
        _, pv, pw, pc = _length_quadrature(beta, values, "single")
        share = {name: float(pw @ (np.linalg.norm(pc - t, axis=1) / gap_ab < 0.1))
                 for name, t in (("a", values[a]), ("b", values[b]), ("avg", avg))}
        s.values[tag].update(pred_var=pv, pred_near=share)
        lin = eps * beta**2 / 2  # Var(alpha_a) |v_a - v_b|^2 with alpha_a ~ 1/2 + (score gap)/4
        s.add(f"(i) {tag}, Sigma = alpha I: ||E c - avg|| / ||avg||", mean_err, "~0 (< 1e-4)", mean_err < 1e-4)
        s.add(f"(i) {tag}, Sigma = alpha I: tr Cov(c)", v_st, f"alpha beta^2/2 = {lin:.3g} -> 0", abs(v_st / lin - 1) < 0.1)
        s.add(f"(ii) {tag}, stretched k_a: tr Cov(c)", v, f"{pv:.4f} (-> |v_a-v_b|^2/4 = 0.5)", abs(v / pv - 1) < 0.05)
        s.add(f"(ii) {tag}: tr Cov stretched / tr Cov alpha I", v / v_st, ">> 1", v / v_st > 1e3)
        s.add(f"(ii) {tag}: share of c within 0.1|v_a-v_b| of v_a", near_a, f"{share['a']:.4f} (-> 1/2)",
              abs(near_a - share["a"]) < 0.02)
        s.add(f"(ii) {tag}: share of c within 0.1|v_a-v_b| of v_b", near_b, f"{share['b']:.4f} (-> 1/2)",
              abs(near_b - share["b"]) < 0.02)
        s.add(f"(ii) {tag}: share of c within 0.1|v_a-v_b| of the avg", near_avg, f"{share['avg']:.4f} (-> 0)",
              abs(near_avg - share["avg"]) < 0.01 and near_avg < 0.05)

    # one answer ties the outcome to the length of k_a; it is the signed projection that decides
    q = CD["betas"][-1] * (mu[a] + mu[b])
    al, c = attend(np.broadcast_to(q, (len(stretched), len(q))), stretched, values)
    long_ = np.linalg.norm(stretched[:, a], axis=1) > 1
    wrong = float((al[long_, b] > al[long_, a]).mean())
    pred = phi(-2 * math.sqrt(2)) / (phi(-2 * math.sqrt(2)) + 0.5)
    s.values["long_but_b"] = wrong
    s.add("||k_a|| > 1 yet c nearer v_b (k_a flipped): share", wrong, f"P(mu_a.k_a<-1)/P(|.|>1) = {pred:.4f}",
          abs(wrong - pred) < 0.004)
    cos_mu = float(np.abs(c @ mu[a] / np.linalg.norm(c, axis=1)).max())
    s.values["cos_c_mu_a"] = cos_mu
    s.add("max |cos(c, mu_a)| over samples", cos_mu, "0: c is a mix of values, not keys", cos_mu < 1e-12)
    return s


def part_d_multi_head() -> Section:
    """(d) two heads q1 = beta mu_a, q2 = beta mu_b, output = their average."""
    n, a, b = CD["n"], CD["a"], CD["b"]
    mu, values, stable, stretched = _cd_setup()
    s = Section("D-multi-head", f"(d) two heads q1 = beta mu_a, q2 = beta mu_b, c = (c1 + c2)/2, same key samples as (c)")
    avg = 0.5 * (values[a] + values[b])
    proj = stretched[:, a] @ mu[a]
    neg = float((proj < 0).mean())
    p = phi(-math.sqrt(2))
    s.add("share of samples with k_a^T q1 < 0", neg, f"P(N(1,1/2) < 0) = {p:.4f}", abs(neg - p) < 0.01)
    others = [i for i in range(n) if i != a]
    # beta -> infinity: c = avg when k_a^T q1 > 0, else (mean of the other values + v_b)/2
    lim = p * (1 - p) * 0.25 * float(np.linalg.norm(values[a] - values[others].mean(0)) ** 2)
    s.values["limit_multi_var"] = lim

    for beta in CD["betas"]:
        tag = f"beta {beta:g}"
        c1s, c2s = _heads(beta * mu[a], beta * mu[b], stable, values)
        mean_err = rel_err((0.5 * (c1s + c2s)).mean(0), avg)
        _, c_single = attend(np.broadcast_to(beta * (mu[a] + mu[b]), (len(stretched), CD["d"])), stretched, values)
        c1, c2 = _heads(beta * mu[a], beta * mu[b], stretched, values)
        c = 0.5 * (c1 + c2)
        f1, f2 = _heads(beta * (mu[a] + mu[b]), beta * (mu[a] + mu[b]), stretched, values)  # q1 = q2 answer
        c_same = 0.5 * (f1 + f2)
        pos = proj > 0
        v_single, v_multi, v_same = total_variance(c_single), total_variance(c), total_variance(c_same)
        v_pos = total_variance(c[pos])
        v1, v2 = total_variance(c1), total_variance(c2)
        s.values[tag] = dict(single_var=v_single, multi_var=v_multi, same_q_var=v_same, multi_var_pos=v_pos,
                             head1_var=v1, head2_var=v2, stable_mean_err=mean_err,
                             single_var_pos=total_variance(c_single[pos]))
        p_single = _length_quadrature(beta, values, "single")[1]
        p_multi = _length_quadrature(beta, values, "multi")[1]
        p_pos = _length_quadrature(beta, values, "multi", mask=lambda x: x > 0)[1]
        p_head1 = _length_quadrature(beta, values, "head1")[1]
        s.values[tag].update(pred_single=p_single, pred_multi=p_multi, pred_multi_pos=p_pos, pred_head1=p_head1)
        s.add(f"(i) {tag}, Sigma = alpha I: ||E c - avg|| / ||avg||", mean_err, "~0 (< 1e-6)", mean_err < 1e-6)
        s.add(f"(ii) {tag}: tr Cov, single head (as in C)", v_single, f"{p_single:.4f}", abs(v_single / p_single - 1) < 0.05)
        s.add(f"(ii) {tag}: tr Cov, two heads", v_multi, f"{p_multi:.4f} (-> {lim:.4f})", abs(v_multi / p_multi - 1) < 0.1)
        s.add(f"(ii) {tag}: single / two heads", v_single / v_multi, f"{p_single / p_multi:.1f} (>> 1)",
              v_single / v_multi > 10)
        s.add(f"(ii) {tag}:   [what averaging 2 indep. noisy heads gives]", v_single / 2, "single / 2: only 2x")
        s.add(f"(ii) {tag}: tr Cov two heads, only k_a^T q1 > 0", v_pos, f"{p_pos:.2e} (-> 0)", abs(v_pos / p_pos - 1) < 0.2)
        s.add(f"(ii) {tag}:   single head on the same samples", total_variance(c_single[pos]), "still ~0.5",
              total_variance(c_single[pos]) > 0.3)
        s.add(f"(ii) {tag}: tr Cov(c1) head 1 alone", v1, f"{p_head1:.4f} (k_a^T q1 < 0 cases)", abs(v1 / p_head1 - 1) < 0.1)
        s.add(f"(ii) {tag}: tr Cov(c2) head 2 alone", v2, "~0 (k_a perp q2)", v2 < 1e-12)
        s.add(f"(ii) {tag}: q1 = q2 = beta(mu_a+mu_b): tr Cov", v_same, "= single head: no reduction",
              abs(v_same - v_single) < 1e-12 * max(1.0, v_single))
    return s


# --------------------------------------------------------------------------- (e)


def _e_vectors(beta, d=12, seed=SEED + 4):
    rng = np.random.default_rng(seed)
    ua, ub, uc, ud = beta * orthonormal_rows(rng, 4, d)
    return ua, ub, uc, ud


def self_attention(X, Q, K, V):
    """Rows of X are x_i; q_i = Q x_i etc.; c_i = sum_j softmax_j(k_j^T q_i) v_j."""
    q, k, v = X @ Q.T, X @ K.T, X @ V.T
    alpha = softmax(q @ k.T, axis=1)
    return alpha, alpha @ v


def part_e1_no_kqv(beta=5.0) -> Section:
    """(e.i) q = k = v = x: c_2 follows x_2; no addition of u_c/u_d gives u_b."""
    s = Section("E1-no-kqv", f"(e.i) q_i = k_i = v_i = x_i, |u| = beta = {beta:g}")
    ua, ub, uc, ud = _e_vectors(beta)
    I = np.eye(len(ua))
    cases = {"x2 = u_a": ua, "x2 = u_a + u_d": ua + ud, "x2 = u_a + u_c": ua + uc, "x2 = u_a + u_c + u_d": ua + uc + ud}
    for name, x2 in cases.items():
        X = np.stack([ud + ub, x2, uc + ub])
        al, c = self_attention(X, I, I, I)
        to_x2 = float(np.linalg.norm(c[1] - x2) / beta)
        to_ub = float(np.linalg.norm(c[1] - ub) / beta)
        extra = len(name.split("+")) - 1
        s.values[name] = dict(to_x2=to_x2, to_ub=to_ub, alpha=al[1].tolist())
        s.add(f"{name}: ||c_2 - x_2|| / beta", to_x2, "~0: c_2 copies x_2", to_x2 < 1e-8)
        s.add(f"{name}: ||c_2 - u_b|| / beta", to_ub, f"sqrt({2 + extra}) = {math.sqrt(2 + extra):.4f}",
              abs(to_ub - math.sqrt(2 + extra)) < 1e-8)
    al = s.values["x2 = u_a + u_d"]["alpha"]
    s.add("x2 = u_a + u_d: weight of c_2 on x_1 = u_d + u_b", al[0], f"e^-b^2 = {math.exp(-beta**2):.3g}",
          abs(al[0] / math.exp(-beta**2) - 1) < 0.01)

    # any mix x2 = u_a + s u_c + t u_d, and also a small beta. For every beta, writing
    # c_2 = a1 x1 + a2 x2 + a3 x3 in the u-basis shows ||c_2 - u_b|| / beta >= 1 / (3 + |s| + |t|).
    grid = np.linspace(-3, 3, 61)
    for bb in (1.0, beta):
        ua_, ub_, uc_, ud_ = _e_vectors(bb)
        best = np.inf
        for sc in grid:
            for tc in grid:
                X = np.stack([ud_ + ub_, ua_ + sc * uc_ + tc * ud_, uc_ + ub_])
                _, c = self_attention(X, I, I, I)
                best = min(best, float(np.linalg.norm(c[1] - ub_) / bb))
        s.values[f"grid_min_beta_{bb:g}"] = best
        s.add(f"beta {bb:g}: min over s,t in [-3,3] of ||c_2 - u_b||/beta", best,
              ">= 1/(3+|s|+|t|) >= 1/9", best >= 1 / 9)
    return s


def qk_pairs(ua, ub, uc, ud, beta):
    o = np.outer
    I = np.eye(len(ua))
    return {
        "handout: K=ud ud'+uc uc', Q=ud ua'+uc ud'": (o(ud, ua) + o(uc, ud), o(ud, ud) + o(uc, uc), True),
        "answer 004: K=I, Q=(uc ud'+ud ua')/b^2": ((o(uc, ud) + o(ud, ua)) / beta**2, I, True),
        "ours: K=(ua ud'+ub uc')/b^2, Q=(ub ud'+ua ua')/b^2": ((o(ub, ud) + o(ua, ua)) / beta**2,
                                                              (o(ua, ud) + o(ub, uc)) / beta**2, True),
        "handout's K<->Q swap ('interchangeable')": (o(ud, ud) + o(uc, uc), o(ud, ua) + o(uc, ud), False),
    }


def part_e2_kqv(beta=5.0) -> Section:
    """(e.ii) V = beta^-2 (u_b u_b^T - u_c u_c^T) with several published Q, K pairs."""
    s = Section("E2-kqv", f"(e.ii) key-query-value attention, |u| = beta = {beta:g}; targets c_1 = u_b - u_c, c_2 = u_b")
    ua, ub, uc, ud = _e_vectors(beta)
    X = np.stack([ud + ub, ua, uc + ub])
    V = (np.outer(ub, ub) - np.outer(uc, uc)) / beta**2
    v = X @ V.T
    s.add("v_1 = V x_1 vs u_b: rel err", rel_err(v[0], ub), "0", rel_err(v[0], ub) < 1e-12)
    s.add("v_2 = V x_2: norm", np.linalg.norm(v[1]), "0", np.linalg.norm(v[1]) < 1e-12)
    s.add("v_3 = V x_3 vs u_b - u_c: rel err", rel_err(v[2], ub - uc), "0", rel_err(v[2], ub - uc) < 1e-12)

    for name, (Q, K, valid) in qk_pairs(ua, ub, uc, ud, beta).items():
        al, c = self_attention(X, Q, K, V)
        e1, e2 = rel_err(c[0], ub - uc), rel_err(c[1], ub)
        s.values[name] = dict(c1_err=e1, c2_err=e2, valid=valid)
        if valid:
            s.add(f"{name}: c_1 rel err", e1, "~0 (< 1e-6)", e1 < 1e-6)
            s.add(f"{name}: c_2 rel err", e2, "~0 (< 1e-6)", e2 < 1e-6)
        else:
            s.add(f"{name}: c_1 rel err", e1, "fails: c_1 ~ v_2 = 0, err 1", abs(e1 - 1) < 1e-6)
            s.add(f"{name}: c_2 rel err", e2, "fails: c_2 = mean v, sqrt2/3", abs(e2 - math.sqrt(2) / 3) < 1e-6)

    Vb = np.outer(ub, ub) / beta**2  # the first step of the derivation alone
    Q, K, _ = qk_pairs(ua, ub, uc, ud, beta)["handout: K=ud ud'+uc uc', Q=ud ua'+uc ud'"]
    _, c = self_attention(X, Q, K, Vb)
    e1 = rel_err(c[0], ub - uc)
    s.values["V_ub_only_c1_err"] = e1
    s.add("V = u_b u_b'/b^2 only (no -u_c u_c'): c_1 rel err", e1, "fails: c_1 ~ u_b, 1/sqrt2", abs(e1 - 1 / math.sqrt(2)) < 1e-6)

    for bb in (1.0, 2.0):  # how fast each valid pair gets there
        vs = _e_vectors(bb)
        Xb = np.stack([vs[3] + vs[1], vs[0], vs[2] + vs[1]])
        Vbb = (np.outer(vs[1], vs[1]) - np.outer(vs[2], vs[2])) / bb**2
        for name, (Q, K, valid) in qk_pairs(*vs, bb).items():
            if valid:
                _, c = self_attention(Xb, Q, K, Vbb)
                err = max(rel_err(c[0], vs[1] - vs[2]), rel_err(c[1], vs[1]))
                s.values.setdefault("small_beta", {})[(bb, name)] = err
                s.add(f"beta {bb:g}, {name.split(':')[0]}: max rel err", err, "score b^6 vs b^2")
    return s


# --------------------------------------------------------------------------- positions


def sinusoidal(T, d):
    """Phi[t, 2i] = sin(t w_i), Phi[t, 2i+1] = cos(t w_i), w_i = 10000^(-2i/d)."""
    w = 10000.0 ** (-np.arange(0, d, 2) / d)
    ang = np.arange(T)[:, None] * w[None]
    P = np.empty((T, d))
    P[:, 0::2], P[:, 1::2] = np.sin(ang), np.cos(ang)
    return P


def offset_distance(delta, d):
    """||Phi[t] - Phi[t + delta]||, which does not depend on t: sqrt(sum_i 2 - 2 cos(w_i delta))."""
    w = 10000.0 ** (-np.arange(0, d, 2) / d)
    delta = np.atleast_1d(np.asarray(delta, dtype=float))
    out = np.empty(len(delta))
    for s0 in range(0, len(delta), 100_000):
        blk = delta[s0:s0 + 100_000]
        out[s0:s0 + 100_000] = np.sqrt(np.maximum((2 - 2 * np.cos(np.outer(blk, w))).sum(1), 0))
    return out


def closest_positions(T, d):
    """Smallest distance between the embeddings of two distinct positions among 0..T-1, and its offset."""
    dist = offset_distance(np.arange(1, T), d)
    k = int(np.argmin(dist))
    return float(dist[k]), k + 1


def lowest_period(d):
    return 2 * math.pi * 10000.0 ** ((d - 2) / d)


def transformer_layer(X, W, causal=False):
    """One self-attention layer (no residuals, no norm) and a ReLU feed-forward layer."""
    d = X.shape[1]
    A = (X @ W["q"]) @ (X @ W["k"]).T / math.sqrt(d)
    if causal:
        A = A + np.triu(np.full(A.shape, -np.inf), 1)
    H = softmax(A, axis=1) @ (X @ W["v"])
    return np.maximum(H @ W["w1"] + W["b1"], 0) @ W["w2"] + W["b2"]


def part_positions(T=12, d=16, seed=SEED + 5) -> Section:
    """Permutation equivariance without positions; sinusoidal embeddings break it; distinctness."""
    rng = np.random.default_rng(seed)
    s = Section("P-positions", f"position embeddings: permutation equivariance (T = {T}, d = {d}) and sinusoids")
    W = {k: rng.normal(size=(d, d)) / math.sqrt(d) for k in ("q", "k", "v", "w1", "w2")}
    W["b1"], W["b2"] = rng.normal(size=d), rng.normal(size=d)
    X = rng.normal(size=(T, d))
    Phi = sinusoidal(T, d)

    A = rng.normal(size=(T, T))
    perm = rng.permutation(T)
    P = np.eye(T)[perm]
    e_soft = float(np.abs(softmax(P @ A @ P.T, axis=1) - P @ softmax(A, axis=1) @ P.T).max())
    e_relu = float(np.abs(np.maximum(P @ A, 0) - P @ np.maximum(A, 0)).max())
    s.add("given identity softmax(P A P^T) = P softmax(A) P^T", e_soft, "0 (< 1e-15)", e_soft < 1e-15)
    s.add("given identity ReLU(P A) = P ReLU(A)", e_relu, "0", e_relu == 0)

    worst_plain, least_pos, least_causal = 0.0, np.inf, np.inf
    for _ in range(20):
        perm = rng.permutation(T)
        while np.all(perm == np.arange(T)):
            perm = rng.permutation(T)
        P = np.eye(T)[perm]
        Z = transformer_layer(X, W)
        scale = np.abs(Z).max()
        worst_plain = max(worst_plain, float(np.abs(transformer_layer(P @ X, W) - P @ Z).max() / scale))
        Zp = transformer_layer(X + Phi, W)
        least_pos = min(least_pos, float(np.abs(transformer_layer(P @ X + Phi, W) - P @ Zp).max() / np.abs(Zp).max()))
        Zc = transformer_layer(X, W, causal=True)
        least_causal = min(least_causal, float(np.abs(transformer_layer(P @ X, W, causal=True) - P @ Zc).max() / np.abs(Zc).max()))
    s.values.update(perm_err_plain=worst_plain, perm_err_pos=least_pos, perm_err_causal=least_causal)
    s.add("no positions: max |Z(PX) - P Z(X)| / max|Z|, 20 perms", worst_plain, "0 to float precision (< 1e-13)", worst_plain < 1e-13)
    s.add("X + Phi: min over perms of |Z(PX+Phi) - P Z(X+Phi)|", least_pos, "O(1): equivariance broken", least_pos > 1e-2)
    s.add("causal mask, no positions: same, min over perms", least_causal, "O(1): the mask breaks it too", least_causal > 1e-2)

    # embeddings of distinct positions
    P200 = sinusoidal(200, d)
    direct = np.linalg.norm(P200[:, None] - P200[None], axis=-1)
    idx = np.abs(np.subtract.outer(np.arange(200), np.arange(200)))
    via_offset = np.concatenate([[0.0], offset_distance(np.arange(1, 200), d)])[idx]
    e_off = float(np.abs(direct - via_offset).max())
    s.add("||Phi_t - Phi_t'|| depends only on t - t' (T = 200)", e_off, "0 (< 1e-12)", e_off < 1e-12)

    first = 1 - np.cos(np.arange(1, 1_000_001, dtype=float))
    k = int(np.argmin(first))
    s.values["first_pair_min"] = (float(first[k]), k + 1)
    s.add(f"min over 0 < delta <= 1e6 of 1 - cos(delta) (at {k + 1})", first[k], "> 0: (sin t, cos t) never repeats", first[k] > 0)

    for dd, mults in ((8, (1, 3, 10, 30)), (64, (1, 3, 10))):
        L = lowest_period(dd)
        near1 = float(offset_distance([1], dd)[0])
        s.add(f"d = {dd}: period of the lowest frequency", L, "2 pi 10000^((d-2)/d)")
        res = {}
        for T2 in (512,) + tuple(int(m * L) for m in mults):
            dist, off = closest_positions(T2, dd)
            res[T2] = (dist, off)
            within = T2 <= L
            if within:
                s.add(f"d = {dd}, T = {T2}: closest pair (offset {off})", dist, "> 0: all distinct", dist > 0.1)
            else:
                s.add(f"d = {dd}, T = {T2} ({T2 / L:.0f} periods): closest (offset {off})", dist,
                      "shrinks: near-collisions" if dd == 8 else f"still offset 1 ({near1:.4f})")
        s.values[f"closest_d{dd}"] = res
        s.values[f"period_d{dd}"] = L
        s.values[f"neighbour_d{dd}"] = near1
    r8 = s.values["closest_d8"]
    inside = min(v[0] for T2, v in r8.items() if T2 <= s.values["period_d8"])
    beyond = min(v[0] for v in r8.values())
    s.add("d = 8: closest beyond the period / closest within it", beyond / inside, "<< 1 (< 0.1)", beyond / inside < 0.1)
    r64 = s.values["closest_d64"]
    same = all(v[1] == 1 for v in r64.values())
    s.add("d = 64: closest pair is a neighbour up to 10 periods", same, "True", same)
    return s


# --------------------------------------------------------------------------- main

PARTS = (part_a_copy, part_b1_subspace, part_b2_average, part_c_single_head, part_d_multi_head,
         part_e1_no_kqv, part_e2_kqv, part_positions)


def run_all():
    return [part() for part in PARTS]


def main(argv=None) -> int:
    t0 = time.perf_counter()
    sections = run_all()
    for sec in sections:
        print(render(sec))
        print()
    rows = [r for sec in sections for r in sec.rows if r.ok is not None]
    failed = [(sec.key, r.quantity) for sec in sections for r in sec.failures]
    print(f"{len(rows)} checks, {len(rows) - len(failed)} PASS, {len(failed)} FAIL "
          f"in {time.perf_counter() - t0:.1f} s")
    for key, q in failed:
        print(f"FAIL [{key}] {q}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
