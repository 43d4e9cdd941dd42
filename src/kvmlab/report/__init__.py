"""Reports of benchmark runs: the level table (L0/L1/L2 and their changes) as text, Markdown,
HTML with plots, and JSON."""
