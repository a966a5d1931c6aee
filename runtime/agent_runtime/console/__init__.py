"""The console: the web UI the OE serves under `/console` (issue 30).

Reviewers decide held calls in an inbox; agent teams watch their executions' live timelines, audit records,
Agents and connector types. Every request of the console is a request of the client API made with the
signed-in person's own bearer token (kept server-side: the browser holds only an opaque session id), so it
is authenticated and authorized exactly as that API is (`oe/client_auth.py`).
"""
