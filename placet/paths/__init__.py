"""What an agent may name: the owner's roots (`roots`), local paths (`local`), remote paths
(`remote`) and the rules both share (`shape`). docs/design.md section 9."""
