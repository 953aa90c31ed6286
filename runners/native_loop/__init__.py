"""What the two native-loop runners share: `yaocode` (the loop in the orchestrator) and `tai`
(the loop as a CLI in the container) take the same `runner.options` and end a turn the same way.
"""
