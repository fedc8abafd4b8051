"""The drive as rclone reaches it, composed of named parts, one module each.

`RcloneDrive` is the `Drive` placet uses (`placet.drive.drive_for`). It holds no logic of
its own: each method of the `Drive` interface is served by one part, and the table in
`RcloneDrive.__init__` says which. The parts: ``calls`` (`placet.drive.calls`: rcd and
CLI children, typed errors, capabilities), ``listing`` (`placet.drive.listing`: stats,
listings, digests), ``temps`` (`placet.drive.temps`: temporary objects and backups),
``transfers`` (`placet.drive.transfers`: uploads, downloads, reads, new folders) and
``batches`` (`placet.drive.batches`: many small new files at once).
"""

from __future__ import annotations

from typing import Self, Unpack

from placet.drive.batches import Batches
from placet.drive.calls import RcloneAccess, RcloneCalls
from placet.drive.listing import Listing
from placet.drive.temps import Temps
from placet.drive.transfers import Transfers

__all__ = ["RcloneDrive"]


class RcloneDrive:
    """A `Drive` over rclone, built from its parts (see the module docstring).

    Args:
        spec, access: how to reach rclone (`RcloneCalls`, `RcloneAccess`).
        verify_readback: as `Transfers` takes it.
    """

    # a misspelt or moved name (``drive.rcd_upload_max``) fails at once instead of
    # setting an attribute nothing reads
    __slots__ = (
        "batches",
        "calls",
        "capabilities",
        "cleanup_temps",
        "clear_caches",
        "close",
        "content_sha256",
        "digest_of",
        "discard_backup",
        "download_to_fd",
        "folders_from_raw",
        "list_folder",
        "list_folders_raw",
        "list_folders_rows",
        "list_rows",
        "list_tree",
        "listing",
        "mkdir",
        "read_head",
        "redact",
        "remove_temp",
        "restore_backup",
        "soft_memory_limit",
        "spec",
        "stat",
        "temps",
        "transfers",
        "upload_from_fd",
        "use_digest_store",
    )

    def __init__(
        self, spec: str, *, verify_readback: bool = True, **access: Unpack[RcloneAccess]
    ) -> None:
        self.spec = spec
        self.calls = RcloneCalls(spec, **access)
        self.listing = Listing(self.calls)
        self.temps = Temps(self.calls, self.listing)
        self.transfers = Transfers(
            self.calls, self.listing, self.temps, verify_readback=verify_readback
        )
        self.batches = Batches(self.calls, self.listing, self.temps, self.transfers)
        # the `Drive` interface (`placet.drive.base.Drive`), each method from one part
        self.capabilities = self.calls.capabilities
        self.redact = self.calls.redact
        self.clear_caches = self.calls.clear_caches
        self.close = self.calls.close
        self.stat = self.listing.stat
        self.digest_of = self.listing.digest_of
        self.content_sha256 = self.listing.content_sha256
        self.list_folder = self.listing.list_folder
        self.list_tree = self.listing.list_tree
        self.list_rows = self.listing.list_rows
        self.list_folders_rows = self.listing.list_folders_rows
        self.list_folders_raw = self.listing.list_folders_raw
        self.folders_from_raw = self.listing.folders_from_raw
        self.soft_memory_limit = self.listing.soft_memory_limit
        self.use_digest_store = self.listing.use_digest_store
        self.remove_temp = self.temps.remove_temp
        self.restore_backup = self.temps.restore_backup
        self.discard_backup = self.temps.discard_backup
        self.cleanup_temps = self.temps.cleanup_temps
        self.mkdir = self.transfers.mkdir
        self.read_head = self.transfers.read_head
        self.upload_from_fd = self.transfers.upload_from_fd
        self.download_to_fd = self.transfers.download_to_fd

    @property
    def rcd_pid(self) -> int | None:
        """pid of the running `rclone rcd`, None before the first metadata call."""
        return self.calls.rcd.pid

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"RcloneDrive({self.redact(self.spec)!r})"
