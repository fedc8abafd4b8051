"""Content previews bound to the evidence: what an op's bytes say, shown to the owner.

The owner approves bytes by their digest; a preview shows those bytes (the first
`Settings.preview_op_bytes` of each file) so the decision is on content, not metadata
(docs/design.md section 4). `capture` keeps them when a proposal is made, from the
read that computes the digest; `opening` gives one op's preview later, checked against
the evidence (`reading`), so a file changed since proposed is said to have changed and
never shown as what would land; `model` and `render` turn it into lines (text, a
difflib diff of a replacement with its counts, or a binary's type by magic number:
`magic`, `diffing`), pure and inert, that the CLI, the review UI and the web page show.
"""
