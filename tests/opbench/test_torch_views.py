"""The PyTorch report's Markdown says what the MXNet one says about its figures: how far to
trust them, the noisy phases, each phase's round spread, and the quantities with two speeds."""

from benchcore.measure.case import CaseSpec
from benchcore.report.model import CaseResult, Report
from opbench.backends.torch.markdown import to_markdown

# LeakyReLU gelu's forward calls in one quickstart sweep (tests/benchcore/test_modes.py): round 1
# alternated 16 and 0.8 ms
TWO_SPEEDS = [15.69, 0.848, 15.879, 0.837, 16.447, 0.742, 16.372, 0.855, 0.799, 0.854, 0.774, 0.721, 0.802, 0.858,
              0.828, 0.83, 0.814, 0.838, 0.815, 0.877]
STEADY = [1.0 + 0.001 * (i % 5) for i in range(20)]
NOISY = [1.0, 1.6, 1.1, 1.9, 1.2, 1.5, 1.0] * 2 + [1.3, 1.8, 1.1, 1.0, 1.7, 1.2]


def _result(name: str, forward, backward) -> CaseResult:
    def phase(samples):
        return {"per_call_ms": samples, "round_sizes": [7, 7, 6]}

    spec = CaseSpec("opbench", name, {"framework": "torch", "op": name, "category": "pointwise", "inputs": {}})
    return CaseResult(spec=spec, status="ok", metrics={"profiler": {"forward": phase(forward),
                                                                    "backward": phase(backward)}})


def _report(results) -> Report:
    settings = {"framework": "torch", "profiler": "native", "threads": 1, "warmup": 5, "runs": 20,
                "rounds": {"rounds": 3, "runs_per_round": [7, 7, 6], "warmup_per_round": 5}}
    return Report(suite="opbench", settings=settings, environment={"torch": {"version": "2.13.0"}}, results=results)


def test_the_torch_report_names_two_speeds_noise_and_both_round_spreads():
    md = to_markdown(_report([_result("gelu", TWO_SPEEDS, STEADY), _result("mul", STEADY, NOISY)]))
    lines = md.splitlines()
    sections = [line for line in lines if line.startswith("## ")]
    assert sections[:3] == ["## How far to trust these figures", "## Settings", "## Steady state and two speeds"]
    header = next(line for line in lines if line.startswith("| Operator")).split("|")
    cells = {line.split("|")[1].strip(): [c.strip() for c in line.split("|")] for line in lines
             if line.startswith("| gelu") or line.startswith("| mul")}
    column = {name.strip(): i for i, name in enumerate(header)}
    assert cells["gelu"][column["Fwd Round Spread"]] == "bimodal"
    assert cells["gelu"][column["Bwd Round Spread"]].endswith("%")
    assert cells["mul"][column["Noise"]] == "noisy bwd" and cells["gelu"][column["Noise"]] == ""
    assert "- `gelu` forward: bimodal within a round: 829 µs and 16.1 ms (round 1 with both speeds)" in md
    assert "2 quantities" not in md and "1 quantity runs at two speeds" in md
