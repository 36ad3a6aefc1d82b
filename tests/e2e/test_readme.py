"""The README's Python examples run as written (and the schedule example computes the same)."""
import os
import re

import numpy as np

README = os.path.join(os.path.dirname(__file__), "..", "..", "README.md")


def test_readme_examples_run(capsys):
    text = open(README).read()
    blocks = re.findall(r"```python\n(.*?)```", text, re.S)
    assert len(blocks) >= 2
    ns: dict = {}
    exec(blocks[0], ns)  # noqa: S102 - our own documentation
    exec(blocks[1], ns)  # the hand schedule of the same DAG
    a, b, d = ns["a"], ns["b"], ns["d"]
    np.testing.assert_allclose(ns["kernel"](a, b), d, rtol=1e-4, atol=1e-4)
