"""What kind of binary file some bytes are, told by their magic number, never by a name.

A file's name and the agent's words say nothing placet can trust; its first bytes say
what programs will make of it. `sniff` matches the leading bytes against the signatures
below. Strong signatures (four bytes or more, or bytes text never starts with) are
matched first; weak ones (``MZ``, ``BM``, ``ID3``...) only once the bytes are known not
to be text (`placet.preview.render` decides that), so a text file starting "MZ is" stays
text. Only PNG, JPEG, GIF and WebP are `thumbnail` types: the only ones `placet web`
serves as an image (never SVG, which is a document that can hold script).
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["THUMBNAIL_TYPES", "FileType", "sniff", "sniff_weak"]


@dataclass(frozen=True)
class FileType:
    """A file type told by its magic number.

    Attributes:
        name: what the owner is told (``PNG image``, ``ELF executable``).
        category: image, document, archive, executable, database, audio, video.
        mime: the content type served for a thumbnail; "" for the other types.
    """

    name: str
    category: str
    mime: str = ""

    @property
    def thumbnail(self) -> bool:
        return self.mime in THUMBNAIL_TYPES


THUMBNAIL_TYPES = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})

_STRONG: tuple[tuple[int, bytes, FileType], ...] = (
    (0, b"\x89PNG\r\n\x1a\n", FileType("PNG image", "image", "image/png")),
    (0, b"\xff\xd8\xff", FileType("JPEG image", "image", "image/jpeg")),
    (0, b"GIF87a", FileType("GIF image", "image", "image/gif")),
    (0, b"GIF89a", FileType("GIF image", "image", "image/gif")),
    (0, b"%PDF-", FileType("PDF document", "document")),
    (0, b"PK\x03\x04", FileType("zip archive (or docx, xlsx, jar, apk)", "archive")),
    (0, b"PK\x05\x06", FileType("zip archive (empty)", "archive")),
    (0, b"\x1f\x8b", FileType("gzip archive", "archive")),
    (0, b"\xfd7zXZ\x00", FileType("xz archive", "archive")),
    (0, b"7z\xbc\xaf\x27\x1c", FileType("7z archive", "archive")),
    (0, b"\x28\xb5\x2f\xfd", FileType("zstd archive", "archive")),
    (0, b"Rar!\x1a\x07", FileType("RAR archive", "archive")),
    (257, b"ustar", FileType("tar archive", "archive")),
    (0, b"\x7fELF", FileType("ELF executable", "executable")),
    (0, b"\xfe\xed\xfa\xce", FileType("Mach-O executable", "executable")),
    (0, b"\xfe\xed\xfa\xcf", FileType("Mach-O executable", "executable")),
    (0, b"\xce\xfa\xed\xfe", FileType("Mach-O executable", "executable")),
    (0, b"\xcf\xfa\xed\xfe", FileType("Mach-O executable", "executable")),
    (0, b"\xca\xfe\xba\xbe", FileType("Mach-O universal executable or Java class", "executable")),
    (0, b"\x00asm", FileType("WebAssembly module", "executable")),
    (0, b"SQLite format 3\x00", FileType("SQLite database", "database")),
    (0, b"OggS", FileType("Ogg media", "audio")),
    (0, b"fLaC", FileType("FLAC audio", "audio")),
    (0, b"\x1aE\xdf\xa3", FileType("Matroska/WebM video", "video")),
    (0, b"II*\x00", FileType("TIFF image", "image")),
    (0, b"MM\x00*", FileType("TIFF image", "image")),
    (0, b"\x00\x00\x01\x00", FileType("ICO image", "image")),
)

_WEAK: tuple[tuple[int, bytes, FileType], ...] = (
    (0, b"MZ", FileType("Windows executable (PE)", "executable")),
    (0, b"BZh", FileType("bzip2 archive", "archive")),
    (0, b"BM", FileType("BMP image", "image")),
    (0, b"ID3", FileType("MP3 audio", "audio")),
)


def _riff(data: bytes) -> FileType | None:
    if data[:4] != b"RIFF" or len(data) < 12:
        return None
    form = data[8:12]
    if form == b"WEBP":
        return FileType("WebP image", "image", "image/webp")
    if form == b"WAVE":
        return FileType("WAV audio", "audio")
    if form == b"AVI ":
        return FileType("AVI video", "video")
    return None


def _iso_media(data: bytes) -> FileType | None:
    if data[4:8] != b"ftyp":
        return None
    brand = data[8:12]
    if brand in (b"heic", b"heix", b"mif1", b"avif"):
        return FileType("HEIF/AVIF image", "image")
    if brand[:2] == b"M4" and brand != b"M4V ":
        return FileType("MPEG-4 audio", "audio")
    return FileType("MPEG-4/QuickTime video", "video")


def sniff(data: bytes) -> FileType | None:
    """The type the strong signatures give `data`'s leading bytes, or None."""
    for offset, magic, kind in _STRONG:
        if data[offset : offset + len(magic)] == magic:
            return kind
    return _riff(data) or _iso_media(data)


def sniff_weak(data: bytes) -> FileType | None:
    """The type a weak signature gives bytes already known not to be text, or None."""
    for offset, magic, kind in _WEAK:
        if data[offset : offset + len(magic)] == magic:
            return kind
    return None
