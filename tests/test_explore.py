"""Numerical checks of the written answers (written/explore.py).

Every claim of written/README.md that rests on a number is asserted here, with tolerances
tight enough that a wrong construction fails; the negative tests build the wrong
constructions (published or plausible) and assert that they do fail.
"""

import importlib.util
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("written_explore", ROOT / "written" / "explore.py")
ex = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = ex  # dataclasses need the module registered
_spec.loader.exec_module(ex)


@pytest.fixture(scope="module")
def sec():
    return {s.key: s for s in ex.run_all()}


def test_every_printed_check_passes(sec):
    failed = [(k, r.quantity) for k, s in sec.items() for r in s.failures]
    assert failed == []
    assert set(sec) == {"A-copy", "B1-subspace", "B2-average", "C-single-head", "D-multi-head",
                        "E1-no-kqv", "E2-kqv", "P-positions"}


def test_script_runs_and_exits_zero():
    out = subprocess.run([sys.executable, "written/explore.py"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    assert "0 FAIL" in out.stdout
    for key in ("A-copy", "B1-subspace", "B2-average", "C-single-head", "D-multi-head", "E1-no-kqv", "E2-kqv", "P-positions"):
        assert f"[{key}]" in out.stdout


def test_main_signals_a_failure(monkeypatch, capsys):
    bad = ex.Section("X", "deliberately failing")
    bad.add("a check that fails", 1.0, "0", False)
    monkeypatch.setattr(ex, "PARTS", (lambda: bad,))
    assert ex.main([]) == 1
    assert "FAIL [X]" in capsys.readouterr().out


# ----------------------------------------------------------------- helpers


def test_softmax_is_stable_and_shift_invariant():
    x = np.array([1e4, 1e4 - 1.0, -1e4])
    w = ex.softmax(x)
    assert np.all(np.isfinite(w))
    assert w[0] == pytest.approx(1 / (1 + math.exp(-1)), abs=1e-15)
    y = np.random.default_rng(0).normal(size=(5, 7))
    np.testing.assert_allclose(ex.softmax(y), ex.softmax(y + 123.0), atol=1e-15)


# ----------------------------------------------------------------- (a)


def test_a_weights_form_a_distribution(sec):
    v = sec["A-copy"].values
    assert v["min_weight"] >= 0 and v["sum_err"] < 1e-12


def test_a_weight_on_aligned_key_follows_formula_and_goes_to_one(sec):
    v = sec["A-copy"].values
    n = 8
    for g, a in zip(v["gaps"], v["alpha_j"]):
        assert a == pytest.approx(math.exp(g) / (math.exp(g) + n - 1), abs=1e-12)
    assert np.all(np.diff(v["alpha_j"]) > 0)
    assert v["alpha_j"][-1] > 1 - 1e-12
    assert v["copy_err"][-1] < 1e-10
    assert v["copy_err"][0] > 0.5  # no gap: c is an average, not a copy


def test_a_alignment_or_sum_criteria_are_not_the_condition(sec):
    v = sec["A-copy"].values
    assert v["short_aligned_alpha"] < 0.2  # perfectly aligned, too short
    assert v["longer_key_alpha"] < 1e-3  # perfectly aligned, beaten by a longer key
    assert v["sum_criterion_alpha"] == pytest.approx(0.5, abs=1e-12)  # "score >> sum of others" met
    assert v["sum_violated_alpha"] > 0.999  # not met, copies anyway
    assert v["big_value_alpha"] > 0.9999 and v["big_value_err"] > 10  # values matter too


# ----------------------------------------------------------------- (b.i)


def test_b1_projection_recovers_va(sec):
    v = sec["B1-subspace"].values
    assert v["recovery_err"] < 1e-12 and v["coef_err"] < 1e-12
    assert v["AtA_shape"] == (5, 5)  # A^T A cannot act on s in R^32


def test_b1_fails_without_its_assumptions(sec):
    v = sec["B1-subspace"].values
    assert v["tilted_err"] > 0.1
    assert v["skew_err"] > 0.1
    assert v["general_err"] < 1e-10


def test_b1_independent_construction():
    rng = np.random.default_rng(7)
    frame = ex.orthonormal_rows(rng, 6, 10)
    A, B = frame[:3].T, frame[3:].T
    va, vb = A @ rng.normal(size=3), B @ rng.normal(size=3)
    np.testing.assert_allclose(A @ A.T @ (va + vb), va, atol=1e-12)
    assert np.linalg.norm(B @ B.T @ (va + vb) - va) > 0.1  # the wrong subspace's projector


# ----------------------------------------------------------------- (b.ii)


def test_b2_weights_match_closed_forms(sec):
    v = sec["B2-average"].values
    n = 8
    for b, p, m in zip(v["betas"], v["alpha_plain"], v["alpha_minus"]):
        assert p == pytest.approx(math.exp(b) / (2 * math.exp(b) + n - 2), abs=1e-12)
        assert m == pytest.approx(math.exp(b) / (2 * math.exp(b) + (n - 2) * math.exp(-b)), abs=1e-12)
    assert v["avg_err"][-1] < 1e-7
    assert v["avg_err"][0] > 0.3


def test_b2_subtracting_other_keys_converges_faster(sec):
    v = sec["B2-average"].values
    for b, p, m in zip(v["betas"], v["alpha_plain"], v["alpha_minus"]):
        if b > 0:
            assert abs(0.5 - m) < abs(0.5 - p)
    assert v["minus_equals_doubled"] < 1e-12  # subtracting the other keys = doubling beta
    assert v["ratio_beta5"] == pytest.approx(math.exp(-5), rel=0.1)
    plain, minus = v["beta_needed"]
    assert plain == pytest.approx(math.log(1497), abs=0.02)
    assert minus == pytest.approx(0.5 * math.log(1500), abs=0.05)
    assert minus < 0.55 * plain


# ----------------------------------------------------------------- (c), (d)


@pytest.mark.parametrize("beta", [20.0, 100.0])
def test_c_single_head_stable_then_swinging(sec, beta):
    v = sec["C-single-head"].values[f"beta {beta:g}"]
    assert v["stable_var"] < 1e-4 and v["stable_mean_err"] < 1e-4
    assert v["stable_var"] == pytest.approx(1e-8 * beta**2 / 2, rel=0.1)
    assert v["var"] > 0.4 and v["var"] == pytest.approx(v["pred_var"], rel=0.05)
    assert v["near_a"] > 0.4 and v["near_b"] > 0.4 and v["near_avg"] < 0.05


def test_c_output_lives_in_value_space(sec):
    assert sec["C-single-head"].values["cos_c_mu_a"] < 1e-12
    assert sec["C-single-head"].values["long_but_b"] > 0  # a long k_a can still lose (negative projection)


@pytest.mark.parametrize("beta", [20.0, 100.0])
def test_d_two_heads_cut_variance(sec, beta):
    v = sec["D-multi-head"].values[f"beta {beta:g}"]
    assert v["stable_mean_err"] < 1e-6
    assert v["multi_var"] < v["single_var"] / 10
    assert v["multi_var"] == pytest.approx(v["pred_multi"], rel=0.1)
    assert v["multi_var_pos"] < 0.01 and v["multi_var_pos"] < v["single_var_pos"] / 50
    assert v["head2_var"] < 1e-12
    # halving by averaging two equally noisy heads would not reach this
    assert v["multi_var"] < v["single_var"] / 4


@pytest.mark.parametrize("beta", [20.0, 100.0])
def test_d_identical_queries_do_not_help(sec, beta):
    v = sec["D-multi-head"].values[f"beta {beta:g}"]
    assert v["same_q_var"] == pytest.approx(v["single_var"], rel=1e-12)
    assert v["same_q_var"] > 10 * v["multi_var"]


# ----------------------------------------------------------------- (e)


def test_e1_c2_copies_x2_never_ub(sec):
    v = sec["E1-no-kqv"].values
    for name, extra in (("x2 = u_a", 0), ("x2 = u_a + u_d", 1), ("x2 = u_a + u_c", 1), ("x2 = u_a + u_c + u_d", 2)):
        assert v[name]["to_x2"] < 1e-8
        assert v[name]["to_ub"] == pytest.approx(math.sqrt(2 + extra), abs=1e-8)
    assert v["grid_min_beta_1"] > 0.3 and v["grid_min_beta_5"] > 1.3


@pytest.mark.parametrize("name", [
    "handout: K=ud ud'+uc uc', Q=ud ua'+uc ud'",
    "answer 004: K=I, Q=(uc ud'+ud ua')/b^2",
    "ours: K=(ua ud'+ub uc')/b^2, Q=(ub ud'+ua ua')/b^2",
])
def test_e2_valid_pairs(sec, name):
    v = sec["E2-kqv"].values[name]
    assert v["valid"] and v["c1_err"] < 1e-6 and v["c2_err"] < 1e-6


def test_e2_swapped_pair_and_partial_v_fail(sec):
    v = sec["E2-kqv"].values
    bad = v["handout's K<->Q swap ('interchangeable')"]
    assert bad["c1_err"] == pytest.approx(1.0, abs=1e-6)
    assert bad["c2_err"] == pytest.approx(math.sqrt(2) / 3, abs=1e-6)
    assert v["V_ub_only_c1_err"] == pytest.approx(1 / math.sqrt(2), abs=1e-6)


def test_e2_identity_qk_fails():
    beta = 5.0
    ua, ub, uc, ud = ex._e_vectors(beta)
    X = np.stack([ud + ub, ua, uc + ub])
    V = (np.outer(ub, ub) - np.outer(uc, uc)) / beta**2
    I = np.eye(len(ua))
    _, c = ex.self_attention(X, I, I, V)  # no learned Q, K: each token attends to itself
    assert ex.rel_err(c[1], ub) > 0.9
    assert ex.rel_err(c[0], ub - uc) > 0.3


# ----------------------------------------------------------------- positions


def _equivariant(X, W, perm, causal=False, pos=None):
    P = np.eye(len(X))[perm]
    add = 0 if pos is None else pos
    Z = ex.transformer_layer(X + add, W, causal)
    return np.allclose(ex.transformer_layer(P @ X + add, W, causal), P @ Z, rtol=0, atol=1e-12 * np.abs(Z).max())


def test_positions_equivariance_and_its_breaking(sec):
    v = sec["P-positions"].values
    assert v["perm_err_plain"] < 1e-13 and v["perm_err_pos"] > 1e-2 and v["perm_err_causal"] > 1e-2
    rng = np.random.default_rng(3)
    T, d = 9, 8
    W = {k: rng.normal(size=(d, d)) for k in ("q", "k", "v", "w1", "w2")}
    W["b1"], W["b2"] = rng.normal(size=d), rng.normal(size=d)
    X = rng.normal(size=(T, d))
    perm = np.roll(np.arange(T), 2)
    assert _equivariant(X, W, perm)
    assert not _equivariant(X, W, perm, pos=ex.sinusoidal(T, d))
    assert not _equivariant(X, W, perm, causal=True)


def test_sinusoids_distinct_and_near_collisions(sec):
    v = sec["P-positions"].values
    assert v["first_pair_min"][0] > 0
    L8 = v["period_d8"]
    within = [dist for T, (dist, _) in v["closest_d8"].items() if T <= L8]
    beyond = [dist for T, (dist, _) in v["closest_d8"].items() if T > L8]
    assert min(within) > 0.5 and min(beyond) < 0.01
    assert all(off == 1 for _, off in v["closest_d64"].values())
    P = ex.sinusoidal(300, 16)
    D = np.linalg.norm(P[:, None] - P[None], axis=-1)
    assert D[~np.eye(300, dtype=bool)].min() > 0.5
    assert ex.offset_distance([7], 16)[0] == pytest.approx(np.linalg.norm(P[10] - P[17]), abs=1e-12)
