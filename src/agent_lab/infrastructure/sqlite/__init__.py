"""The SQLite session store: one file, WAL mode, fenced single-writer claims."""
