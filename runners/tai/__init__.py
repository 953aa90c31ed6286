"""The `tai` runner: Cage's native loop as a CLI inside the container (`cage-tai run`)."""

from runners.tai.adapter import TaiAdapter
from runners.tai.options import NativeOptions
from runners.tai.translator import TaiTranslator
from runners.tai.turn import TaiTurn

__all__ = ["NativeOptions", "TaiAdapter", "TaiTranslator", "TaiTurn"]
