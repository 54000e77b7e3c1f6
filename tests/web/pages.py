"""Helpers for the page tests (in-process, through the test client): sign in like the form does, read pages."""

from __future__ import annotations

import re
from typing import Any

from bs4 import BeautifulSoup
from fastapi.testclient import TestClient

PASSWORD = "correct horse"


def token_of(html: str) -> str:
    match = re.search(r'<meta name="csrf-token" content="([^"]+)"', html)
    assert match, html[:500]
    return match.group(1)


def sign_in(client: TestClient, username: str = "alice", password: str = PASSWORD) -> str:
    """Post the sign-in form as a browser does; returns the CSRF token the page carried."""
    token = token_of(client.get("/login").text)
    response = client.post("/login", data={"username": username, "password": password, "csrf_token": token},
                           follow_redirects=False)
    assert response.status_code == 303, response.text
    return token


def soup(response: Any) -> BeautifulSoup:
    return BeautifulSoup(response.text, "html.parser")


def text(element: Any) -> str:
    return " ".join(element.get_text(" ").split()) if element is not None else ""
