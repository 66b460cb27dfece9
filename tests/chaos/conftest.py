import pytest


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "chaos: SIGKILLs real qwenpipe processes (real Chromium) against the simulator"
    )
