"""CARLA recorder files (``.log``): reading, summarising, and the channels wrtfd imports."""

__all__: list[str] = []
