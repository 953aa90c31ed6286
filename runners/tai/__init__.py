"""The `tai` runner: Cage's native loop as a CLI inside the container (`cage-tai run`).

The host side (adapter, translator, the stdin document, the control-line format) is here; the
code that runs inside the container is `runners.tai.incontainer`.
"""

from runners.tai.adapter import TaiAdapter
from runners.tai.translator import TaiTranslator
from runners.tai.turn import TaiTurn

__all__ = ["TaiAdapter", "TaiTranslator", "TaiTurn"]
