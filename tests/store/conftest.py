from __future__ import annotations

import pytest
from store_places import OPENERS, new_place, open_place


@pytest.fixture(params=sorted(OPENERS))
def place(request, tmp_path):
    """A fresh store location, once per Store implementation (PostgreSQL: a fresh database on
    the session's throwaway server)."""
    server = request.getfixturevalue("postgres_server") if request.param == "postgres" else None
    return new_place(request.param, tmp_path, server)


@pytest.fixture
def store(place):
    opened = open_place(place)
    yield opened
    opened.close()
