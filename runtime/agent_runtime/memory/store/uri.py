"""A MongoDB URI made safe to show: the password and every query value hidden."""

from __future__ import annotations

from urllib.parse import urlsplit


def redact_uri(uri: str) -> str:
    """`uri` with `***` for its password and query values (a query may carry credentials too)."""
    try:
        parts = urlsplit(uri)
    except ValueError:
        return "<unparsable URI>"
    userinfo, at, hostinfo = parts.netloc.rpartition("@")
    netloc = parts.netloc
    if at:
        user, colon, _password = userinfo.partition(":")
        netloc = f"{user}{':***' if colon else ''}@{hostinfo}"
    query = "&".join(f"{pair.partition('=')[0]}=***" for pair in parts.query.split("&") if pair)
    return f"{parts.scheme}://{netloc}{parts.path}{'?' + query if query else ''}"
