"""What an agent may name: the owner's roots (`roots`), local paths (`local`), remote paths
(`remote`) and the helpers both use (`shape`). docs/design.md sections 6 and 9."""
