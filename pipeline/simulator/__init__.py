"""A loopback replica of chat.qwen.ai (and, via router.py, of the OpenAI-compatible router).

with Simulator(scenario="ok", answer_seconds=1).start() as sim:
    ...  # drive sim.base_url, then check sim.sends()
"""

__all__ = ["Simulator"]


def __getattr__(name: str):
    # The server (http.server and the page code) loads only when a simulator is wanted: the
    # command line reads the simulator's options at every start, cron's `cycle` included.
    if name == "Simulator":
        from .server import Simulator

        return Simulator
    raise AttributeError(f"module 'pipeline.simulator' has no attribute {name!r}")
