"""The simulator's rotating sessions (pipeline/simulator/sessions.py), over real HTTP: a refresh
trades the session cookie for a 900 s access token and a new session, ending the old one; the
test moves the site's clock (clock_offset) instead of waiting."""

from __future__ import annotations

import json
from http.cookies import SimpleCookie

import pytest
from test_simulator_http import raw

from pipeline.simulator import Simulator
from pipeline.simulator.sessions import ACCESS_SECONDS, GRACE_SECONDS, REFRESH_PATH, SIGNED_OUT_BODY


@pytest.fixture
def sim():
    with Simulator(accounts=("a", "b"), rotating_sessions=True, stream=False).start() as running:
        yield running


def session_of(sim, account: str) -> str:
    return sim.login_state(account)["cookies"][0]["value"]


def refresh(sim, session: str) -> tuple[dict, str | None]:
    """(the refresh's JSON, the new session it set, or None)."""
    status, headers, text = raw(sim, "GET", REFRESH_PATH, headers={"Cookie": f"token={session}"})
    assert status == 200
    cookie = SimpleCookie(headers.get("Set-Cookie", ""))
    return json.loads(text), cookie["token"].value if "token" in cookie else None


def logged_in(sim, headers: dict) -> bool:
    return json.loads(raw(sim, "GET", "/api/v2/users/status", headers=headers)[2]).get("data") is True


def later(sim, seconds: float) -> None:
    sim.set(clock_offset=sim.store.snapshot().clock_offset + seconds)


def test_a_refresh_hands_back_a_new_session_and_the_old_one_stops_working(sim):
    first = session_of(sim, "a")
    body, second = refresh(sim, first)
    assert body["success"] is True and body["data"]["expires_in"] == ACCESS_SECONDS
    assert second and second != first
    later(sim, GRACE_SECONDS + 1)
    assert refresh(sim, first) == (SIGNED_OUT_BODY, None)  # HTTP 200, "401 Unauthorized"
    assert not logged_in(sim, {"Cookie": f"token={first}"})
    assert logged_in(sim, {"Cookie": f"token={second}"})
    assert logged_in(sim, {"Cookie": f"token={session_of(sim, 'b')}"})  # each account its own


def test_the_access_token_lives_900_seconds_of_the_sites_clock(sim):
    body, _ = refresh(sim, session_of(sim, "a"))
    bearer = {"Authorization": "Bearer " + body["data"]["access_token"]}
    assert logged_in(sim, bearer)
    later(sim, ACCESS_SECONDS + 1)
    assert not logged_in(sim, bearer)


def test_a_session_just_replaced_still_refreshes_to_the_current_one_for_pages_loading_side_by_side(sim):
    first = session_of(sim, "a")
    _, second = refresh(sim, first)
    body, again = refresh(sim, first)  # a second page of the same browser, a moment later
    assert body["success"] is True and logged_in(sim, {"Cookie": f"token={again}"})
