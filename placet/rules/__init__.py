"""Standing rules: the owner approves routine proposals once, in a file no agent can touch.

`rules.toml` beside `config.toml` holds `[[rule]]` tables (`model`); `loading` reads the
file when `safety` lets it (not a link, the owner's, not writable by others, outside
every root, not moved by `PLACET_HOME`); `facts` says what placet itself established about
a proposal, `matcher` which rule decides it (default deny, a forbid wins), and `ledger`
keeps what the store must count: approvals per hour, the pause after a failed run.
A rule approval is still a proposal: it is approved through the same decision as the
owner's, audited with the rule's id and the rules file's SHA-256, and run like any other
(docs/decisions/0038-standing-rules.md). No MCP tool reads or writes rules.
"""
