"""ACC's car model ids (the ``carModelType`` of entry lists and ENTRY_LIST_CAR) and their names.

Facts from the car model list in the appendix of Kunos' "ACC Server Admin Handbook" (the ids a
server's ``entrylist.json`` takes as ``forcedCarModel``), as of the game's 1.9/1.10 content,
cross-checked against several public ACC tools that list the same ids. The names are written
here; where the game has two versions of a car, its year tells them apart. An id not listed
(a car added later) is shown as its number (:func:`car_model_name`).
"""

from __future__ import annotations

__all__ = ["CAR_MODELS", "car_model_name"]

#: Car model id -> name.
CAR_MODELS: dict[int, str] = {
    # GT3
    0: "Porsche 991 GT3 R",
    1: "Mercedes-AMG GT3 (2015)",
    2: "Ferrari 488 GT3",
    3: "Audi R8 LMS",
    4: "Lamborghini Huracan GT3",
    5: "McLaren 650S GT3",
    6: "Nissan GT-R Nismo GT3 (2018)",
    7: "BMW M6 GT3",
    8: "Bentley Continental GT3 (2018)",
    10: "Nissan GT-R Nismo GT3 (2017)",
    11: "Bentley Continental GT3 (2016)",
    12: "Aston Martin V12 Vantage GT3",
    13: "Reiter Engineering R-EX GT3",
    14: "Emil Frey Jaguar G3",
    15: "Lexus RC F GT3",
    16: "Lamborghini Huracan GT3 Evo",
    17: "Honda NSX GT3",
    19: "Audi R8 LMS Evo",
    20: "Aston Martin V8 Vantage GT3",
    21: "Honda NSX GT3 Evo",
    22: "McLaren 720S GT3",
    23: "Porsche 991 II GT3 R",
    24: "Ferrari 488 GT3 Evo",
    25: "Mercedes-AMG GT3 (2020)",
    30: "BMW M4 GT3",
    31: "Audi R8 LMS GT3 Evo II",
    32: "Ferrari 296 GT3",
    33: "Lamborghini Huracan GT3 Evo 2",
    34: "Porsche 992 GT3 R",
    35: "McLaren 720S GT3 Evo",
    36: "Ford Mustang GT3",
    # one-make cups, challenge, TCX
    9: "Porsche 991 II GT3 Cup",
    18: "Lamborghini Huracan Super Trofeo",
    26: "Ferrari 488 Challenge Evo",
    27: "BMW M2 CS Racing",
    28: "Porsche 992 GT3 Cup",
    29: "Lamborghini Huracan Super Trofeo Evo 2",
    # GT4
    50: "Alpine A110 GT4",
    51: "Aston Martin V8 Vantage GT4",
    52: "Audi R8 LMS GT4",
    53: "BMW M4 GT4",
    55: "Chevrolet Camaro GT4.R",
    56: "Ginetta G55 GT4",
    57: "KTM X-Bow GT4",
    58: "Maserati MC GT4",
    59: "McLaren 570S GT4",
    60: "Mercedes-AMG GT4",
    61: "Porsche 718 Cayman GT4 Clubsport",
    # GT2
    80: "Audi R8 LMS GT2",
    82: "KTM X-Bow GT2",
    83: "Maserati MC20 GT2",
    84: "Mercedes-AMG GT2",
    85: "Porsche 911 GT2 RS CS Evo",
    86: "Porsche 935",
}


def car_model_name(model: int) -> str:
    """The name of car model ``model``, or ``car model N`` for an id the table lacks."""
    return CAR_MODELS.get(model) or f"car model {model}"
