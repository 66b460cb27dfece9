"""A loopback replica of chat.qwen.ai (and, via router.py, of the OpenAI-compatible router).

with Simulator(scenario="ok", answer_seconds=1).start() as sim:
    ...  # drive sim.base_url, then check sim.sends()
"""

from pipeline.simulator.server import Simulator

__all__ = ["Simulator"]
