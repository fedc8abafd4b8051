"""Local file I/O at execution time: the descriptor walk from a root (`walk`), hashing
(`hashing`), temporary files and their no-replace commit (`atomic`). docs/design.md
sections 6 and 9."""
