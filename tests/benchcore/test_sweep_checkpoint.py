"""Where a sweep keeps its checkpoint: beside its first report in FORMATS' order, so a run that
writes only CSV rows (the README's `opbench ... -f csv -o bcast.csv`) has one too; it ended in
`KeyError: 'md'` when the checkpoint was taken from the JSON or else the Markdown path."""

import csv
from pathlib import Path

from benchcore.cli.options import sweep_checkpoint
from opbench.cli import main as opbench
from rnnbench.cli import main as rnnbench

RNN_SIZES = ["--seqLength", "2", "--numLayers", "1", "--inputSize", "4", "--hiddenSize", "4", "--miniBatch", "2"]


def test_the_checkpoint_sits_beside_the_first_report_of_json_md_csv():
    assert sweep_checkpoint({"csv": Path("r/rows.csv")}) == Path("r/rows.csv.checkpoint.jsonl")
    assert sweep_checkpoint({"md": Path("a.md"), "json": Path("a.json")}) == Path("a.json.checkpoint.jsonl")
    assert sweep_checkpoint({"csv": Path("a.csv"), "md": Path("a.md")}) == Path("a.md.checkpoint.jsonl")


def _rows(path: Path):
    with path.open(newline="") as handle:
        return list(csv.DictReader(handle))


def test_opbench_writes_a_csv_only_report(tmp_path):
    out = tmp_path / "bcast.csv"
    code = opbench(["--ops", "broadcast_add", "-p", "python", "-f", "csv", "-o", str(out), "--tiny", "-w", "1",
                    "-r", "2", "--rounds", "1", "--no-isolation", "--no-audit"])
    assert code == 0
    assert {row["case"] for row in _rows(out)} == {"broadcast_add"}
    assert not sweep_checkpoint({"csv": out}).exists()  # removed once the report is written


def test_rnnbench_writes_a_csv_only_report(tmp_path):
    out = tmp_path / "lstm.csv"
    code = rnnbench(["bench", "--rnns", "py", *RNN_SIZES, "--warmup", "0", "--nloops", "2", "--rounds", "1",
                     "--device", "cpu", "-f", "csv", "-o", str(out)])
    assert code == 0
    assert {row["phase"] for row in _rows(out)} == {"forward", "backward"}
    assert not sweep_checkpoint({"csv": out}).exists()
