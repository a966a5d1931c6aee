"""A kubeconfig `exec` credential plugin for tests: prints an ExecCredential for the token held in a file.

`python tests/exec_credential.py TOKEN_FILE [CALLS_FILE]`: each run appends one line to CALLS_FILE (never
the token), so a test can count how often its user logged in. Lines of `TOKEN_FILE.first`, when it exists,
are handed out first, one per run (a test's way to give the first login a token that no longer works). It
stands in for `aws eks get-token`, `gke-gcloud-auth-plugin` or `kubelogin`, which print the same document.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

API_VERSION = "client.authentication.k8s.io/v1"


def exec_user(*, token_file: Path, calls_file: Path | None = None) -> dict[str, object]:
    """A kubeconfig user that runs this plugin."""
    args = [str(Path(__file__).resolve()), str(token_file), *([str(calls_file)] if calls_file else [])]
    return {
        "exec": {
            "apiVersion": API_VERSION,
            "command": sys.executable,
            "args": args,
            "interactiveMode": "Never",
            "provideClusterInfo": False,
        }
    }


def main(argv: list[str]) -> int:
    token = Path(argv[1]).read_text(encoding="utf-8").strip()
    first = Path(argv[1] + ".first")
    if first.exists():
        lines = first.read_text(encoding="utf-8").split()
        if lines:
            token = lines[0]
            first.write_text("\n".join(lines[1:]), encoding="utf-8")
    if len(argv) > 2:
        with open(argv[2], "a", encoding="utf-8") as calls:
            calls.write("login\n")
    request = json.loads(os.environ.get("KUBERNETES_EXEC_INFO") or "{}")
    credential = {
        "apiVersion": request.get("apiVersion", API_VERSION),
        "kind": "ExecCredential",
        "status": {"token": token},
    }
    print(json.dumps(credential))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
