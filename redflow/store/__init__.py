"""Redis access: connections, slot connections, Lua scripts and their typed wrappers."""
