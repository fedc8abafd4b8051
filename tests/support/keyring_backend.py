"""Keyring backends for tests only (never a runtime dependency of placet).

* `MemoryKeyring`: in-process; install with `keyring.set_keyring(MemoryKeyring())`.
* `FileKeyring`: a JSON file named by ``KEYRING_PROPERTY_FILE`` (keyring's own way to
  set a backend property from the environment, which placet passes on to rclone and so
  to its hidden password command) or `PLACET_TEST_KEYRING_FILE`, so a `placet`
  subprocess started with ``PYTHON_KEYRING_BACKEND=tests.support.keyring_backend.FileKeyring`` and
  ``PYTHONPATH=<the repository>`` shares secrets with the test.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from keyring.backend import KeyringBackend
from keyring.errors import PasswordDeleteError

from tests.support import REPO


class MemoryKeyring(KeyringBackend):
    priority = 1  # type: ignore[assignment]

    def __init__(self) -> None:
        super().__init__()
        self.store: dict[tuple[str, str], str] = {}

    def get_password(self, service: str, username: str) -> str | None:
        return self.store.get((service, username))

    def set_password(self, service: str, username: str, password: str) -> None:
        self.store[(service, username)] = password

    def delete_password(self, service: str, username: str) -> None:
        if self.store.pop((service, username), None) is None:
            raise PasswordDeleteError(f"{service}/{username} not found")


class FileKeyring(KeyringBackend):
    priority = 1  # type: ignore[assignment]

    file: str | None = None  # set by keyring from KEYRING_PROPERTY_FILE

    def _path(self) -> Path:
        return Path(self.file or os.environ["PLACET_TEST_KEYRING_FILE"])

    def _load(self) -> dict[str, str]:
        p = self._path()
        return json.loads(p.read_text()) if p.exists() else {}

    def get_password(self, service: str, username: str) -> str | None:
        return self._load().get(f"{service}/{username}")

    def set_password(self, service: str, username: str, password: str) -> None:
        data = self._load()
        data[f"{service}/{username}"] = password
        self._path().write_text(json.dumps(data))

    def delete_password(self, service: str, username: str) -> None:
        data = self._load()
        if data.pop(f"{service}/{username}", None) is None:
            raise PasswordDeleteError(f"{service}/{username} not found")
        self._path().write_text(json.dumps(data))


def file_keyring_env(path: Path) -> dict[str, str]:
    """Variables that make keyring use `FileKeyring` over `path`: in a `placet`
    subprocess, and in the hidden password command rclone runs (placet passes them on)."""
    return {
        "PYTHON_KEYRING_BACKEND": "tests.support.keyring_backend.FileKeyring",
        "KEYRING_PROPERTY_FILE": str(path),
        "PYTHONPATH": str(REPO),
    }
