"""A fleet of nodes: fetched copies of their files, checked together."""
