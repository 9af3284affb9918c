"""Pure-Python twins of the compiled modules in jmspy._cext."""
