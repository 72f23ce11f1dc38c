"""containerd's config.toml: its versions, reading it, facts about it, and planned edits."""
