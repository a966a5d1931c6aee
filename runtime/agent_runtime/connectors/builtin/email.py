"""`email`: send over SMTP (`email.send`), save a draft over IMAP (`email.draft`), search a mailbox over
IMAP (`email.search`). Both writes are sensitive (Decision 15, `email.draft` included).

The standard library's smtplib and imaplib run in worker threads, one connection per call: mail is not a
hot path, and a fresh connection never carries another call's state. Search criteria are built from typed
arguments only (no raw IMAP), quoted, and refuse line breaks.
"""

from __future__ import annotations

import asyncio
import contextlib
import email.message
import email.policy
import email.utils
import imaplib
import re
import smtplib
import ssl
import time
from collections.abc import Mapping
from email.header import decode_header, make_header
from typing import Any

from agent_runtime.connectors.framework import BuiltinConnector, BuiltinToolError, TestResult, tool

_SECURITY = {"type": "string", "enum": ["none", "starttls", "ssl"], "default": "starttls"}
_ADDRESS = {"type": "string", "minLength": 3, "maxLength": 320, "pattern": r"^[^@\s<>,;]+@[^@\s<>,;]+$"}
_ADDRESSES = {"type": "array", "items": _ADDRESS, "maxItems": 50}
_MESSAGE = {
    "to": {**_ADDRESSES, "minItems": 1},
    "cc": _ADDRESSES,
    "bcc": _ADDRESSES,
    "subject": {"type": "string", "maxLength": 998},
    "body": {"type": "string", "maxLength": 1_000_000},
    "reply_to": _ADDRESS,
}
_FETCH_ITEMS = "(UID FLAGS BODY.PEEK[HEADER.FIELDS (FROM TO SUBJECT DATE MESSAGE-ID)] BODY.PEEK[TEXT]<0.500>)"
_SAFE_TEXT = re.compile(r"^[^\r\n\x00]*$")


class EmailConnector(BuiltinConnector):
    type = "email"
    description = "A mailbox over SMTP and IMAP: send mail, save drafts, search messages."
    config_schema = {
        "type": "object",
        "required": ["username", "from_address"],
        "additionalProperties": False,
        "properties": {
            "smtp_host": {"type": "string", "minLength": 1},
            "smtp_port": {"type": "integer", "minimum": 1, "maximum": 65535, "default": 587},
            "smtp_security": _SECURITY,
            "imap_host": {"type": "string", "minLength": 1},
            "imap_port": {"type": "integer", "minimum": 1, "maximum": 65535, "default": 993},
            "imap_security": {**_SECURITY, "default": "ssl"},
            "username": {"type": "string", "minLength": 1, "maxLength": 320},
            "from_address": _ADDRESS,
            "drafts_mailbox": {"type": "string", "minLength": 1, "maxLength": 200, "default": "Drafts"},
            "timeout_s": {"type": "number", "minimum": 1, "maximum": 120, "default": 30},
            "verify_tls": {"type": "boolean", "default": True},
        },
    }
    secrets = {"password": "the mailbox password (or app password), used for SMTP and IMAP"}
    required_secrets = frozenset({"password"})
    tools = (
        tool(
            "email.send",
            "Send an email from the connector's address. Needs approval.",
            properties=_MESSAGE,
            required=["to", "subject", "body"],
            sensitive=True,
        ),
        tool(
            "email.draft",
            "Save an email as a draft in the mailbox's Drafts folder, for a person to send. Needs approval.",
            properties=_MESSAGE,
            required=["to", "subject", "body"],
            sensitive=True,
        ),
        tool(
            "email.search",
            "Search a mailbox: messages matching all given criteria, newest first (from, to, subject, text, "
            "since/before as YYYY-MM-DD, unseen).",
            properties={
                "mailbox": {"type": "string", "minLength": 1, "maxLength": 200, "default": "INBOX"},
                "from": {"type": "string", "maxLength": 320},
                "to": {"type": "string", "maxLength": 320},
                "subject": {"type": "string", "maxLength": 998},
                "text": {"type": "string", "maxLength": 998},
                "since": {"type": "string", "pattern": r"^\d{4}-\d{2}-\d{2}$"},
                "before": {"type": "string", "pattern": r"^\d{4}-\d{2}-\d{2}$"},
                "unseen": {"type": "boolean"},
                "limit": {"type": "integer", "minimum": 1, "maximum": 100, "default": 20},
            },
            sensitive=False,
        ),
    )

    def offers(self, tool: str) -> bool:
        if tool == "email.send":
            return bool(self.config.get("smtp_host"))
        return bool(self.config.get("imap_host"))

    def _tls(self) -> ssl.SSLContext:
        context = ssl.create_default_context()
        if not self.config["verify_tls"]:
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
        return context

    async def _call(self, tool: str, arguments: dict[str, Any], env: Mapping[str, str]) -> Any:
        password = self.secret("password", env) or ""
        if tool == "email.search":
            return await asyncio.to_thread(self._search, arguments, password)
        message = self._message(arguments)
        if tool == "email.send":
            return await asyncio.to_thread(self._send, message, arguments, password)
        return await asyncio.to_thread(self._draft, message, password)

    def _message(self, arguments: Mapping[str, Any]) -> email.message.EmailMessage:
        for key in ("subject",):
            if not _SAFE_TEXT.match(arguments.get(key, "")):
                raise BuiltinToolError("invalid_arguments", f"{key} must be one line")
        message = email.message.EmailMessage(policy=email.policy.SMTP)
        message["From"] = self.config["from_address"]
        message["To"] = ", ".join(arguments["to"])
        if arguments.get("cc"):
            message["Cc"] = ", ".join(arguments["cc"])
        if arguments.get("reply_to"):
            message["Reply-To"] = arguments["reply_to"]
        message["Subject"] = arguments["subject"]
        message["Date"] = email.utils.formatdate(localtime=False)
        message["Message-ID"] = email.utils.make_msgid(domain=self.config["from_address"].split("@", 1)[1])
        message.set_content(arguments["body"])
        return message

    # SMTP -------------------------------------------------------------------------------------------

    def _send(self, message: email.message.EmailMessage, arguments: Mapping[str, Any], password: str) -> Any:
        config = self.config
        recipients = [*arguments["to"], *arguments.get("cc", []), *arguments.get("bcc", [])]
        where = f"the SMTP server {config['smtp_host']}:{config['smtp_port']}"
        try:
            smtp_class = smtplib.SMTP_SSL if config["smtp_security"] == "ssl" else smtplib.SMTP
            kwargs: dict[str, Any] = {"timeout": config["timeout_s"]}
            if config["smtp_security"] == "ssl":
                kwargs["context"] = self._tls()
            with smtp_class(config["smtp_host"], config["smtp_port"], **kwargs) as smtp:
                smtp.ehlo()
                if config["smtp_security"] == "starttls":
                    smtp.starttls(context=self._tls())
                    smtp.ehlo()
                if smtp.has_extn("auth"):
                    smtp.login(config["username"], password)
                refused = smtp.send_message(message, from_addr=config["from_address"], to_addrs=recipients)
        except smtplib.SMTPAuthenticationError:
            raise BuiltinToolError("auth", f"{where} refused the login of {config['username']!r}") from None
        except smtplib.SMTPRecipientsRefused as exc:
            codes = "; ".join(f"{rcpt}: {code}" for rcpt, (code, _) in exc.recipients.items())
            raise BuiltinToolError("rejected", f"{where} refused every recipient ({codes})") from None
        except smtplib.SMTPSenderRefused as exc:
            raise BuiltinToolError("rejected", f"{where} refused the sender ({exc.smtp_code})") from None
        except smtplib.SMTPDataError as exc:
            raise BuiltinToolError(
                "rejected", f"{where} refused the message: {exc.smtp_code} {_text(exc.smtp_error)}"
            ) from None
        except (smtplib.SMTPConnectError, smtplib.SMTPServerDisconnected, ConnectionError, OSError) as exc:
            if isinstance(exc, TimeoutError):
                raise BuiltinToolError("timeout", f"{where} did not answer in time") from None
            raise BuiltinToolError(
                "connection", f"{where} could not be reached ({type(exc).__name__})"
            ) from None
        except smtplib.SMTPException as exc:
            raise BuiltinToolError("server_error", f"{where} failed: {type(exc).__name__}") from None
        return {
            "message_id": message["Message-ID"],
            "accepted": [r for r in recipients if r not in refused],
            "refused": sorted(refused),
        }

    # IMAP -------------------------------------------------------------------------------------------

    def _imap(self, password: str) -> imaplib.IMAP4:
        config = self.config
        where = f"the IMAP server {config['imap_host']}:{config['imap_port']}"
        try:
            if config["imap_security"] == "ssl":
                imap: imaplib.IMAP4 = imaplib.IMAP4_SSL(
                    config["imap_host"],
                    config["imap_port"],
                    ssl_context=self._tls(),
                    timeout=config["timeout_s"],
                )
            else:
                imap = imaplib.IMAP4(config["imap_host"], config["imap_port"], timeout=config["timeout_s"])
                if config["imap_security"] == "starttls":
                    imap.starttls(ssl_context=self._tls())
        except TimeoutError:
            raise BuiltinToolError("timeout", f"{where} did not answer in time") from None
        except (OSError, imaplib.IMAP4.error) as exc:
            raise BuiltinToolError(
                "connection", f"{where} could not be reached ({type(exc).__name__})"
            ) from None
        try:
            imap.login(config["username"], password)
        except imaplib.IMAP4.error:
            _logout(imap)
            raise BuiltinToolError("auth", f"{where} refused the login of {config['username']!r}") from None
        return imap

    def _draft(self, message: email.message.EmailMessage, password: str) -> Any:
        imap = self._imap(password)
        mailbox = _quote(self.config["drafts_mailbox"])
        try:
            status, data = imap.append(
                mailbox, r"(\Draft)", imaplib.Time2Internaldate(time.time()), message.as_bytes()
            )
            if status != "OK":
                raise BuiltinToolError("rejected", f"the IMAP server refused the draft: {_text(data)}")
        except imaplib.IMAP4.error as exc:
            raise BuiltinToolError("rejected", f"the IMAP server refused the draft: {_text(exc)}") from None
        finally:
            _logout(imap)
        return {"saved": True, "mailbox": self.config["drafts_mailbox"], "message_id": message["Message-ID"]}

    def _search(self, arguments: Mapping[str, Any], password: str) -> Any:
        criteria: list[str] = []
        for key, word in (("from", "FROM"), ("to", "TO"), ("subject", "SUBJECT"), ("text", "TEXT")):
            if arguments.get(key):
                criteria += [word, _quote(arguments[key])]
        for key, word in (("since", "SINCE"), ("before", "BEFORE")):
            if arguments.get(key):
                criteria += [word, _imap_date(arguments[key])]
        if arguments.get("unseen"):
            criteria.append("UNSEEN")
        imap = self._imap(password)
        try:
            status, _ = imap.select(_quote(arguments["mailbox"]), readonly=True)
            if status != "OK":
                raise BuiltinToolError("not_found", f"the mailbox {arguments['mailbox']!r} does not exist")
            status, data = imap.uid("SEARCH", "CHARSET", "UTF-8", *(criteria or ["ALL"]))
            if status != "OK":
                raise BuiltinToolError("client_error", f"the IMAP server refused the search: {_text(data)}")
            uids = (data[0] or b"").split()
            total = len(uids)
            chosen = list(reversed(uids))[: arguments["limit"]]
            messages = []
            if chosen:
                fetch = b",".join(chosen).decode()
                status, parts = imap.uid(
                    "FETCH",
                    fetch,
                    _FETCH_ITEMS,
                )
                messages = _parse_fetch(parts)
                messages.sort(key=lambda m: int(m.get("uid") or 0), reverse=True)
        except imaplib.IMAP4.error as exc:
            raise BuiltinToolError(
                "client_error", f"the IMAP server refused the search: {_text(exc)}"
            ) from None
        finally:
            _logout(imap)
        return {"total": total, "messages": messages, "truncated": total > len(chosen)}

    async def test_connection(self, *, env: Mapping[str, str] | None = None) -> TestResult:
        password = self.secret("password", env or self._env, required=False) or ""
        try:
            if self.config.get("imap_host"):
                await asyncio.to_thread(lambda: _logout(self._imap(password)))
        except BuiltinToolError as exc:
            return TestResult(ok=False, detail=f"{exc.category}: {exc.explanation}")
        return TestResult(ok=True, detail="logged in")

    @classmethod
    def egress(cls, config: Mapping[str, Any]) -> list[tuple[str, int]]:
        out = []
        if config.get("smtp_host"):
            out.append((config["smtp_host"], int(config.get("smtp_port") or 587)))
        if config.get("imap_host"):
            out.append((config["imap_host"], int(config.get("imap_port") or 993)))
        return out


def _quote(value: str) -> str:
    """An IMAP quoted string; line breaks and NUL cannot be quoted and are refused."""
    if not _SAFE_TEXT.match(value):
        raise BuiltinToolError("invalid_arguments", "search text and mailbox names must be one line")
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _imap_date(value: str) -> str:
    return time.strftime("%d-%b-%Y", time.strptime(value, "%Y-%m-%d"))


def _logout(imap: imaplib.IMAP4) -> None:
    with contextlib.suppress(OSError, imaplib.IMAP4.error):
        imap.logout()


def _text(value: Any) -> str:
    if isinstance(value, list | tuple):
        value = b" ".join(v for v in value if isinstance(v, bytes))
    if isinstance(value, bytes):
        value = value.decode("utf-8", errors="replace")
    return " ".join(str(value).split())[:200]


def _header(value: str | None) -> str:
    if not value:
        return ""
    try:
        return str(make_header(decode_header(value)))
    except (ValueError, LookupError):
        return value


def _parse_fetch(parts: list[Any]) -> list[dict[str, Any]]:
    """FETCH answers as `{uid, flags, from, to, subject, date, message_id, snippet}`."""
    by_uid: dict[str, dict[str, Any]] = {}
    entry: dict[str, Any] | None = None
    for part in parts:
        if not isinstance(part, tuple) or len(part) < 2:
            continue
        head = part[0].decode("utf-8", errors="replace")
        uid_match = re.search(r"UID (\d+)", head)
        if uid_match is not None:
            entry = by_uid.setdefault(uid_match.group(1), {"uid": uid_match.group(1)})
        elif not re.match(r"^\d+ \(", head) and entry is not None:
            pass  # a later item of the same message's FETCH answer
        else:
            continue
        if entry is None:
            continue
        flags = re.search(r"FLAGS \(([^)]*)\)", head)
        if flags:
            entry["flags"] = flags.group(1).split()
        if "HEADER.FIELDS" in head:
            parsed = email.message_from_bytes(part[1], policy=email.policy.default)
            entry.update(
                {
                    "from": _header(parsed.get("From")),
                    "to": _header(parsed.get("To")),
                    "subject": _header(parsed.get("Subject")),
                    "date": parsed.get("Date", ""),
                    "message_id": parsed.get("Message-ID", ""),
                }
            )
        elif "TEXT" in head:
            entry["snippet"] = " ".join(part[1].decode("utf-8", errors="replace").split())[:300]
    return list(by_uid.values())
