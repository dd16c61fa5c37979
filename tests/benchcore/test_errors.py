"""error_summary: the one line a report, a table or a summary shows for a failure."""

from benchcore.errors import error_summary


class MXNetError(Exception):
    """Stands in for mxnet.base.MXNetError's text shape (the real one: tests/opbench)."""


def test_python_exceptions_keep_their_type_and_first_line():
    assert error_summary(ValueError("bad input for this case")) == "ValueError: bad input for this case"
    assert error_summary(RuntimeError("shape mismatch in layer 1\nlong detail")) == \
        "RuntimeError: shape mismatch in layer 1"
    assert error_summary(KeyError()) == "KeyError"


def test_an_embedded_traceback_gives_its_raised_line_not_its_header():
    text = ('Traceback (most recent call last):\n  File "../src/operator/tensor/./dot-inl.h", line 1241\n'
            "MXNetError: Check failed: L[!Ta].Size() == R[Tb].Size() (4 vs. 5) : dot shape error: [4,4] X [5,4]")
    assert error_summary(MXNetError(text)) == \
        "MXNetError: Check failed: L[!Ta].Size() == R[Tb].Size() (4 vs. 5) : dot shape error: [4,4] X [5,4]"


def test_the_summary_is_bounded():
    assert len(error_summary(ValueError("x" * 5000), limit=100)) == 100


def test_a_message_about_a_file_is_not_mistaken_for_a_traceback_frame():
    assert error_summary(ValueError('File "a.json" is malformed')) == 'ValueError: File "a.json" is malformed'
