"""The policy's greedy forward pass has three implementations; the torch module defines it.

- **torch**: `BranchingQNetwork.q_values` and `act` (eval mode: noisy layers at their mean
  weights, IQN at its midpoint taus). The backtest, evaluation and every fallback run it.
- **Numba** (`paper.forward.GreedyForward`): paper trading's per-bar decision on the CPU, in
  float64. It computes eval-mode C51 without variable selection; for anything else
  `GreedyForward.supports` is False and the paper decider asks torch for every decision. Where it
  runs it answers only where each branch's best action leads by at least `MARGIN` of the
  support's width, and leaves near ties to torch.
- **Triton** (`agents.dqn.act_kernel.greedy_c51`): C51's dueling centring, softmax, expectation
  and argmax in one kernel, which `BranchingQNetwork.act` runs for every C51 head where Triton
  runs (CUDA; the CPU under Triton's interpreter) and replaces by its torch reference elsewhere.
  IQN never goes through it: IQN acts by torch's argmax of its mean quantiles.

Every case of `CASES` (C51 and IQN, dueling or not, windows of 1/8/32 bars of 3/22/38 features
plus 6 position features: 9 to 1,222 inputs; hidden 32-512, 11/21/51 atoms) runs each path
against torch on the same observations; its `numba` and `triton` columns say whether the path
computes the case (KERNEL) or hands it to torch (TORCH), and the tests hold the code to that
column in both directions: no path silently skips a case.

Tolerances, as fractions of the C51 support's width (v_max - v_min):
- Numba vs torch float32: below MARGIN / 10 = 5e-6. Torch's float32 rounding error; measured
  at most 1.6e-6 on these networks (weights tripled, so the Q values spread over the
  support), 2-9e-8 at their initial size. MARGIN's certificate needs it well below MARGIN.
- Numba vs torch float64: below 1e-10. Numba computes in float64 from torch's float32 weights
  (exact in float64), so only float64 rounding is left: measured at most 5e-15.
- Triton vs torch: below 1e-6 (2e-5 for [-10, 10]): the same float32 softmax and expectation
  over at most 51 atoms, summed in another order: a few float32 rounding steps of the support's
  largest value (ulp(10) = 9.5e-7); measured at most 2.4e-7 interpreted, and 5.7e-7 compiled on
  an H200 (1 value in 90,000 above 5e-7, over 10,000 rows of a 51-atom head).
- Actions: equal wherever torch's best action leads its runner-up by more than twice the path's
  Q tolerance (so that no rounding can reorder them). On exact ties torch and Triton pick the
  lowest action; Numba declines and the paper decider asks torch.

What the fast paths earn: `time_decisions()` times torch against the Numba forward per paper
decision on the CPU, `time_act_kernel()` the Triton kernel against torch on CUDA (see their
docstrings; docs/benchmarks.md has the figures).
"""

from __future__ import annotations

import copy
import functools
import time
from dataclasses import dataclass, field
from unittest import mock

import numpy as np
import pytest
import torch

import foxhunt.agents.dqn.network as network_module
from foxhunt.agents.dqn import AgentConfig, BranchingQNetwork
from foxhunt.agents.dqn.act_kernel import greedy_c51, greedy_c51_reference
from foxhunt.paper import load_agent
from foxhunt.paper.forward import MARGIN, GreedyForward
from foxhunt.triton_support import HAS_TRITON, triton_runs_on
from tests.interpreted import run_interpreted

KERNEL, TORCH = "kernel", "torch"
"""What a path does with a case: computes it itself, or leaves it to the torch module."""

POS = 6  # the env's position features, after the window's market features

NUMBA_TOL = MARGIN / 10
NUMBA_F64_TOL = 1e-10
TRITON_TOL = 1e-6
"""Q tolerances as fractions of the support's width; see the module's docstring."""


@dataclass(frozen=True)
class Case:
    id: str
    head: str
    dueling: bool
    window: int
    features: int
    hidden: int
    atoms: int | None  # C51's; None for IQN
    numba: str  # what paper trading's Numba forward does with it
    triton: str  # what the Triton act kernel does with it
    extra: dict = field(default_factory=dict)  # other AgentConfig keys

    @property
    def obs_dim(self) -> int:
        return self.window * self.features + POS

    def config(self) -> AgentConfig:
        atoms = {} if self.atoms is None else {"atoms": self.atoms}
        return AgentConfig(head=self.head, dueling=self.dueling, hidden=self.hidden, **atoms,
                           **self.extra)


SELECTION = {"variable_selection": True}
CASES = [
    #    id              head   dueling window features hidden atoms numba   triton
    Case("cpu_profile",  "c51", True,   1,     22,      128,   11,   KERNEL, KERNEL),
    Case("bench_cpu",    "c51", True,   8,     38,      64,    11,   KERNEL, KERNEL),
    Case("h200_profile", "c51", True,   32,    38,      512,   51,   KERNEL, KERNEL),
    Case("plain_small",  "c51", False,  8,     3,       32,    11,   KERNEL, KERNEL,
         {"trunk_layers": 1, "noisy": False}),
    Case("plain_wide",   "c51", False,  1,     38,      512,   51,   KERNEL, KERNEL),
    Case("deep_noisy",   "c51", True,   32,    3,       128,   21,   KERNEL, KERNEL,
         {"trunk_layers": 3, "noisy_trunk": True}),
    Case("two_branches", "c51", True,   1,     3,       32,    11,   KERNEL, KERNEL,
         {"branches": (5, 5), "v_min": -3.0, "v_max": 7.0}),
    Case("selection",    "c51", True,   8,     22,      32,    11,   TORCH,  KERNEL, SELECTION),
    Case("iqn_cpu",      "iqn", True,   1,     22,      128,   None, TORCH,  TORCH),
    Case("iqn_plain",    "iqn", False,  8,     3,       32,    None, TORCH,  TORCH),
    Case("iqn_h200",     "iqn", True,   32,    38,      512,   None, TORCH,  TORCH),
]
"""cpu_profile: the shipped defaults under the CPU profile (window 1, the default 22 features,
hidden 128, 11 atoms); bench_cpu and h200_profile: benchmarks/bench_oms.py's `--agent cpu` and
`--agent h200` (the latter also bench_train's); branches are the shipped (3, 3, 3) except in
two_branches."""
IDS = [c.id for c in CASES]


def by_path(path: str, what: str) -> list[Case]:
    return [c for c in CASES if getattr(c, path) == what]


def network(case: Case, seed: int = 0) -> BranchingQNetwork:
    """The case's network in eval mode, random, with LayerNorm gains and shifts off their 1 and
    0 and every parameter tripled (as after training: Q values spread over the support)."""
    torch.manual_seed(seed)
    groups = None
    if case.extra.get("variable_selection"):
        half = case.features // 2
        groups = {"a": list(range(half)), "b": list(range(half, case.features))}
    net = BranchingQNetwork(case.obs_dim, case.config(), groups, case.window, POS)
    with torch.no_grad():
        for m in net.trunk:
            if isinstance(m, torch.nn.LayerNorm):
                m.weight.uniform_(-1.5, 1.5)
                m.bias.uniform_(-0.5, 0.5)
        for p in net.parameters():
            p.mul_(3.0)
    return net.eval()


def observations(case: Case, n: int, seed: int = 1) -> np.ndarray:
    """Normalised market features (z-scores clipped to +-5, as the pipeline clips them) and
    position features, float32 [n, obs]."""
    rng = np.random.default_rng(seed)
    return np.clip(rng.standard_normal((n, case.obs_dim)) * 2, -5, 5).astype(np.float32)


def width(net: BranchingQNetwork) -> float:
    return float(net.config.v_max - net.config.v_min)


def lead(q: torch.Tensor | np.ndarray) -> np.ndarray:
    """Each row's best Q over the runner-up, per branch: [N, Br, A] -> [N, Br]."""
    top2 = torch.as_tensor(q).topk(2, dim=-1).values
    return (top2[..., 0] - top2[..., 1]).numpy()


def torch_answers(net: BranchingQNetwork, obs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The torch module's (Q [N, Br, A] float64, greedy actions [N, Br]) on the CPU."""
    with torch.inference_mode():
        x = torch.from_numpy(obs)
        return net.q_values(x).double().numpy(), net.act(x).numpy()


def spy_on_greedy_c51():
    """Patches the network module's `greedy_c51` with a spy that calls through."""
    return mock.patch.object(network_module, "greedy_c51", wraps=greedy_c51)


# The table itself: each path computes what its column says, and hands the rest to torch.


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_each_path_computes_what_the_table_says_and_no_other_case(case):
    net = network(case)
    assert GreedyForward.supports(net) == (case.numba == KERNEL)
    with spy_on_greedy_c51() as spy:
        net.act(torch.from_numpy(observations(case, 2)))
    assert spy.called == (case.triton == KERNEL)


def test_the_table_covers_both_heads_dueling_or_not_and_every_window_and_feature_count():
    combos = {(c.head, c.dueling) for c in CASES}
    assert combos == {(h, d) for h in ("c51", "iqn") for d in (True, False)}
    assert {c.window for c in CASES} == {1, 8, 32}
    assert {c.features for c in CASES} == {3, 22, 38}
    assert {c.atoms for c in CASES if c.head == "c51"} == {11, 21, 51}


# torch: the reference, its act the argmax of its own Q values.


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_torch_acts_by_the_lowest_argmax_of_its_own_q_values(case):
    """On the CPU (no Triton interpreter in this process) C51's act is `greedy_c51_reference`,
    which is the module's own arithmetic: equal to its Q values' argmax on every row."""
    net = network(case)
    q, action = torch_answers(net, observations(case, 64))
    assert np.array_equal(action, q.argmax(axis=-1))


def test_where_triton_does_not_run_greedy_c51_is_the_torch_reference():
    case = CASES[0]
    net = network(case)
    assert not triton_runs_on("cpu")
    with torch.inference_mode():
        value, adv = net.heads.logits(net.features(torch.from_numpy(observations(case, 9))))
        for got, want in zip(greedy_c51(value, adv, net.support),
                             greedy_c51_reference(value, adv, net.support), strict=True):
            assert torch.equal(got, want)


# Numba: paper trading's forward.


@pytest.mark.parametrize("case", by_path("numba", KERNEL), ids=lambda c: c.id)
def test_numba_forward_equals_torch(case):
    net = network(case)
    fast = GreedyForward(net)
    obs = observations(case, 96)
    q_torch, a_torch = torch_answers(net, obs)
    with torch.inference_mode():
        q_torch64 = copy.deepcopy(net).double().q_values(torch.from_numpy(obs).double()).numpy()
    q = np.stack([fast.q_values(o) for o in obs])
    assert np.abs(q - q_torch).max() < NUMBA_TOL * width(net)
    assert np.abs(q - q_torch64).max() < NUMBA_F64_TOL * width(net)

    answers = [fast.act(o) for o in obs]
    for got, want in zip(answers, a_torch, strict=True):
        assert got is None or got == want.tolist()
    # it declines only near ties: a lead of 2 MARGIN in torch's Q is above MARGIN in its own
    clear = (lead(q_torch) > 2 * MARGIN * width(net)).all(axis=-1)
    assert clear.mean() > 0.9
    assert all(answers[i] is not None for i in np.flatnonzero(clear))


@pytest.mark.parametrize("case", by_path("numba", TORCH), ids=lambda c: c.id)
def test_numba_forward_refuses_what_it_does_not_compute(case):
    with pytest.raises(ValueError, match="eval-mode C51 network without variable selection"):
        GreedyForward(network(case))


def test_numba_forward_refuses_a_network_in_training_mode():
    """Training mode means fresh noise in the noisy layers; the forward holds their means."""
    net = network(CASES[0]).train()
    assert not GreedyForward.supports(net)
    with pytest.raises(ValueError, match="eval-mode"):
        GreedyForward(net)


def test_numba_forward_leaves_an_exact_tie_to_torch():
    """Advantage streams at zero: every action of a branch has the same Q. Torch takes the
    lowest action; the Numba forward declines and reports the tie's zero lead."""
    net = network(CASES[0])
    with torch.no_grad():
        net.heads.advantage.weight_mu.zero_()
        net.heads.advantage.bias_mu.zero_()
    fast = GreedyForward(net)
    obs = observations(CASES[0], 3)
    assert all(fast.act(o) is None for o in obs)
    assert float(fast.lead.min()) == 0.0
    assert not torch_answers(net, obs)[1].any()


def test_numba_forward_with_a_margin_above_every_lead_answers_nothing():
    net = network(CASES[0])
    fast = GreedyForward(net, margin=1e9)
    assert all(fast.act(o) is None for o in observations(CASES[0], 20))


# The paper decider: the Numba forward where the table says KERNEL, torch for every other
# decision. A checkpoint's agent on the features of synthetic bars, as `foxhunt paper` loads it.


@pytest.fixture(scope="module")
def market():
    from tests.backtest.builders import instrument, synth  # here: the interpreted run needs none

    return synth(900, signal=0.3).bars, instrument()


@pytest.mark.parametrize(
    ("agent", "numba"),
    [({}, KERNEL), ({"head": "iqn"}, TORCH), (SELECTION, TORCH)],
    ids=["c51", "iqn", "selection"],
)
def test_paper_decider_decides_as_torch_through_the_path_the_table_names(
        market, tmp_path, monkeypatch, agent, numba):
    from tests.backtest import builders

    bars, inst = market
    # builders.write_checkpoint saves a C51 agent; the other heads through its AgentConfig
    monkeypatch.setattr(builders, "AgentConfig", functools.partial(AgentConfig, **agent))
    decider = load_agent(builders.write_checkpoint(tmp_path / "fold0.pt", bars, inst,
                                                   fit_until=600), inst).decider
    assert (decider.fast is not None) == (numba == KERNEL)
    rng = np.random.default_rng(0)
    near_ties = decisions = 0
    for t in range(len(bars)):
        decider.observe(t, bars)
        if t < decider.first:
            continue
        got = decider.act(t, list(rng.integers(-8, 9, POS) / 8))  # exact in float32
        decisions += 1
        with torch.inference_mode():  # the observation it decided on, by torch
            assert list(got) == decider.network.act(decider.x)[0].tolist()
        near_ties += decider.fast is not None and decider.fast.act(decider.obs) is None
    assert decisions > 100
    assert decider.torch_calls == (near_ties if numba == KERNEL else decisions)
    if numba == KERNEL:
        assert near_ties < decisions // 20


# Triton: the act kernel, interpreted on the CPU (a process of its own) and compiled on CUDA.


def assert_triton_equals_torch(case: Case, device: torch.device | str, n: int) -> None:
    """The kernel on the network's own head outputs (strided as its grouped layers leave them)
    against the torch module's Q values and actions, on `device`."""
    net = network(case).to(device)
    x = torch.from_numpy(observations(case, n, seed=n)).to(device)
    with torch.inference_mode():
        value, adv = net.heads.logits(net.features(x))
        assert (value is None) == (not case.dueling)
        assert n == 1 or not adv.is_contiguous()
        action, q = greedy_c51(value, adv, net.support)
        want_q = net.q_values(x)
        assert q.dtype == torch.float32 and action.dtype == torch.long
        torch.testing.assert_close(q, want_q, atol=TRITON_TOL * width(net), rtol=0)
        clear = torch.from_numpy(lead(want_q.cpu()) > 2 * TRITON_TOL * width(net))
        assert clear.float().mean() > 0.9
        assert torch.equal(action.cpu()[clear], want_q.argmax(dim=-1).cpu()[clear])


def assert_triton_reads_bf16_heads_in_float32(case: Case, device: torch.device | str,
                                             n: int) -> None:
    """Under bf16 autocast (as the GPU profiles collect) the heads come out in bf16, strided:
    the kernel's Q is the torch formulation's (`greedy_c51_reference`) on the same bf16 values,
    computed in float32."""
    net = network(case).to(device)
    x = torch.from_numpy(observations(case, n, seed=n)).to(device)
    with torch.inference_mode(), torch.autocast(torch.device(device).type, torch.bfloat16):
        value, adv = net.heads.logits(net.features(x))
    assert adv.dtype == torch.bfloat16 and not adv.is_contiguous()
    with torch.inference_mode():
        action, q = greedy_c51(value, adv, net.support)
        want_action, want_q = greedy_c51_reference(value, adv, net.support)
    assert q.dtype == torch.float32
    torch.testing.assert_close(q, want_q, atol=TRITON_TOL * width(net), rtol=0)
    clear = torch.from_numpy(lead(want_q.cpu()) > 2 * TRITON_TOL * width(net))
    assert clear.any() and torch.equal(action.cpu()[clear], want_action.cpu()[clear])


def tied_heads(device: torch.device | str) -> list[tuple]:
    """(value, adv, support): every action of a branch with the same logits (all Q equal); and
    action 0 uniform over the atoms (Q = 0) with actions 1 and 2 leaning up equally."""
    g = torch.Generator().manual_seed(1)
    adv = torch.randn(5, 3, 1, 51, generator=g).expand(5, 3, 3, 51)
    all_equal = (torch.randn(5, 51, generator=g), adv)
    pair = torch.zeros(4, 3, 3, 51)
    pair[:, :, 1:] = torch.linspace(0.0, 3.0, 51)
    support = torch.linspace(-10.0, 10.0, 51, device=device)
    return [(all_equal[0].to(device), all_equal[1].to(device), support),
            (None, pair.to(device), support)]


def assert_ties_go_to_the_lowest_action(greedy, device: torch.device | str = "cpu") -> None:
    (all_equal, pair) = tied_heads(device)
    action, q = greedy(*all_equal)
    assert torch.equal(q, q[..., :1].expand_as(q))
    assert not action.any()
    action, q = greedy(*pair)
    assert torch.equal(q[..., 1], q[..., 2]) and (q[..., 1] > q[..., 0]).all()
    assert (action == 1).all()


def test_torch_gives_equal_q_values_to_the_lowest_action():
    assert_ties_go_to_the_lowest_action(greedy_c51_reference)


def interpreted_checks() -> None:
    """Run by the interpreter test in a process started with TRITON_INTERPRET=1 (Triton reads
    it when the kernel is defined), where `greedy_c51` on the CPU is the kernel."""
    assert triton_runs_on("cpu")
    assert_triton_equals_torch(CASES[0], "cpu", 1)
    for case in by_path("triton", KERNEL):
        assert_triton_equals_torch(case, "cpu", 33)
    assert_triton_reads_bf16_heads_in_float32(CASES[0], "cpu", 33)
    assert_ties_go_to_the_lowest_action(greedy_c51)


@pytest.mark.skipif(not HAS_TRITON, reason="needs triton, whose interpreter runs the kernel on "
                                           "the CPU (CI installs triton==3.7.1)")
def test_triton_kernel_equals_torch_interpreted_on_cpu():
    run_interpreted("tests.agents.test_forward_paths")


CUDA = torch.device("cuda") if torch.cuda.is_available() else None
needs_cuda = pytest.mark.skipif(CUDA is None, reason="needs CUDA: the compiled Triton kernel")


@pytest.mark.gpu
@needs_cuda
@pytest.mark.parametrize("n", [1, 7, 10_000])
@pytest.mark.parametrize("case", by_path("triton", KERNEL), ids=lambda c: c.id)
def test_triton_kernel_equals_torch_on_cuda(case, n):
    assert triton_runs_on(CUDA)
    assert_triton_equals_torch(case, CUDA, n)


@pytest.mark.gpu
@needs_cuda
@pytest.mark.parametrize("n", [7, 10_000])
@pytest.mark.parametrize("case", by_path("triton", KERNEL), ids=lambda c: c.id)
def test_triton_kernel_reads_bf16_heads_in_float32_on_cuda(case, n):
    assert_triton_reads_bf16_heads_in_float32(case, CUDA, n)


@pytest.mark.gpu
@needs_cuda
def test_triton_kernel_gives_equal_q_values_to_the_lowest_action_on_cuda():
    assert_ties_go_to_the_lowest_action(greedy_c51, CUDA)


# What the Numba forward earns: torch against it per decision, batch 1.


def time_decisions(cases: tuple[str, ...] = ("cpu_profile", "bench_cpu", "h200_profile"),
                   decisions: int = 2000, rounds: int = 5) -> dict[str, dict[str, float]]:
    """Microseconds a paper decision takes through torch (`act` on one [1, obs] row in
    inference mode, eager, one thread: what the paper decider runs on a near tie) and through
    the Numba forward (`GreedyForward.act`), the median of `rounds` alternating rounds of
    `decisions` each, on the same observations; in wall time and in this process's CPU time
    (which a loaded machine inflates less). Prints a line per case and returns them:
    `.venv/bin/python -c "from tests.agents.test_forward_paths import time_decisions as t; t()"`
    """
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return _time_decisions(cases, decisions, rounds)
    finally:
        torch.set_num_threads(threads)


def _time_decisions(cases: tuple[str, ...], decisions: int,
                    rounds: int) -> dict[str, dict[str, float]]:
    out = {}
    for case in (c for c in CASES if c.id in cases):
        net = network(case)
        fast = GreedyForward(net)
        obs = observations(case, 64)
        rows = [torch.from_numpy(o)[None] for o in obs]
        paths = {"torch": functools.partial(_by_torch, net, rows),
                 "numba": functools.partial(_by_numba, fast, obs)}
        runs: dict[str, list[float]] = {f"{p}_{c}": [] for p in paths for c in ("us", "cpu_us")}
        for _ in range(rounds):
            for name, run in paths.items():
                run(10)
                start, cpu = time.perf_counter(), time.process_time()
                run(decisions)
                runs[f"{name}_us"].append((time.perf_counter() - start) / decisions * 1e6)
                runs[f"{name}_cpu_us"].append((time.process_time() - cpu) / decisions * 1e6)
        row = {k: float(np.median(v)) for k, v in runs.items()}
        row["speedup"] = row["torch_us"] / row["numba_us"]
        row["cpu_speedup"] = row["torch_cpu_us"] / row["numba_cpu_us"]
        out[case.id] = row
        print(f"{case.id}: {case.obs_dim} inputs, hidden {case.hidden}, {case.atoms} atoms: "
              f"torch {row['torch_us']:.1f} us, Numba {row['numba_us']:.1f} us a decision, "
              f"{row['speedup']:.1f}x (CPU time: {row['torch_cpu_us']:.1f} / "
              f"{row['numba_cpu_us']:.1f} us, {row['cpu_speedup']:.1f}x)")
    return out


def _by_torch(net: BranchingQNetwork, rows: list[torch.Tensor], k: int) -> None:
    with torch.inference_mode():
        for i in range(k):
            net.act(rows[i % len(rows)])


def _by_numba(fast: GreedyForward, obs: np.ndarray, k: int) -> None:
    for i in range(k):
        fast.act(obs[i % len(obs)])


def time_act_kernel(rows: tuple[int, ...] = (1, 8192), calls: int = 50,
                    replays: int = 20) -> dict[str, dict[str, float]]:
    """Microseconds of GPU time one act takes on the h200_profile network's bf16 heads (as
    collect computes them, under autocast) through the Triton kernel, its torch reference
    eager, and the reference compiled by inductor (what acting would run without the kernel),
    each as `calls` calls captured in a CUDA graph (as collect runs) and replayed `replays`
    times. Needs CUDA:
    `python3 -c "from tests.agents.test_forward_paths import time_act_kernel as t; t()"`
    """
    case = next(c for c in CASES if c.id == "h200_profile")
    net = network(case).to(CUDA)
    compiled = torch.compile(greedy_c51_reference, fullgraph=True, dynamic=False)
    paths = {"triton": greedy_c51, "torch_eager": greedy_c51_reference,
             "torch_compiled": compiled}
    out = {}
    for n in rows:
        x = torch.from_numpy(observations(case, n)).to(CUDA)
        with torch.inference_mode(), torch.autocast("cuda", torch.bfloat16):
            value, adv = net.heads.logits(net.features(x))
        row = {}
        for name, greedy in paths.items():
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                for _ in range(3):
                    greedy(value, adv, net.support)
            torch.cuda.current_stream().wait_stream(side)
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                for _ in range(calls):
                    greedy(value, adv, net.support)
            graph.replay()
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            for _ in range(replays):
                graph.replay()
            end.record()
            torch.cuda.synchronize()
            row[name] = start.elapsed_time(end) * 1e3 / (replays * calls)
        out[str(n)] = row
        print(f"act on {n} rows ({torch.cuda.get_device_name()}): " + ", ".join(
            f"{k} {v:.1f} us" for k, v in row.items()))
    return out


def test_the_timing_runs():
    """`time_decisions` stays runnable (no timing is asserted: CI's cores are shared)."""
    row = time_decisions(("cpu_profile",), decisions=5, rounds=1)["cpu_profile"]
    assert row["torch_us"] > 0 and row["numba_us"] > 0
