import sys
from pathlib import Path

import numpy as np
import pytest

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@pytest.fixture
def ladder():
    """The matmul ladder example module (examples/matmul_ladder.py)."""
    sys.path.insert(0, str(EXAMPLES))
    try:
        import matmul_ladder
        yield matmul_ladder
    finally:
        sys.path.remove(str(EXAMPLES))


@pytest.fixture
def rng():
    return np.random.default_rng(0)
