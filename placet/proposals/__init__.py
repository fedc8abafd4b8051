"""Making a proposal and judging one: the context of a call (`context`), its evidence
(`evidence`), the propose tools' core (`making`), risk flags (`risk`, `confusables`) and the
checks every accept repeats (`vetting`). docs/design.md sections 4, 6 and 9."""
