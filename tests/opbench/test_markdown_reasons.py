"""The Markdown says why each `---` is there (the JSON's `missing` reasons), not only that it is."""

import mxnet  # noqa: F401  (plainly: a broken MXNet fails these tests instead of skipping them)

from opbench.backends.mxnet.markdown import to_markdown


def test_every_dash_in_the_results_is_explained(tmp_path):
    from benchcore.report.model import Report
    from opbench.cli import main

    out = tmp_path / "r.json"
    assert main(["--ops", "argmax_channel,Custom,broadcast_add", "--tiny", "-w", "1", "-r", "3", "--no-isolation",
                 "-o", str(out)]) == 0
    text = to_markdown(Report.load(out))
    assert "Times: MXNet profiler's operator time per call" in text  # what the numbers are
    section = text.split("## Not measured", 1)[1].split("\n## ", 1)[0]
    assert "backward: not differentiable" in section and "argmax_channel (4,6)" in section
    assert "forward: the profiler recorded no operator" in section and "Custom (8,1)" in section
    assert "broadcast_add" not in section  # measured in full: nothing to explain
