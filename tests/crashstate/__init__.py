"""Crash-state test of the real daemon's recordings (ALICE and CrashMonkey are the models).

``trace`` parses strace output into per-file operations, ``replay`` rebuilds each file from them,
``models`` builds the on-disk states a crash can leave, ``check`` runs the tools on each state and
holds the assertions, ``record`` runs the real daemon under strace. docs/crash-states.md says why.
"""
