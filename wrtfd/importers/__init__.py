"""Importers of other recorders' files (CARLA recorder, .zddsrec) into WRTF."""

__all__: list[str] = []
