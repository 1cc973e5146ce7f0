#!/usr/bin/env python3
"""Writes bench/cascade/questions.jsonl: short questions with checkable answers,
of graded difficulty, for measuring a query cascade (a small model first, the
large one when the small one is unsure). Written for folio, drawn from a fixed
seed so the file is the same on every run:

    python3 scripts/make_cascade_set.py

Each line: {"id", "kind", "level" (1 easy .. 3 hard), "question", "answer",
"split" ("calibration" or "held_out", alternating within each kind)}.
"""
import json
import random
from pathlib import Path

OUT = Path(__file__).resolve().parents[1] / "bench" / "cascade" / "questions.jsonl"

CAPITALS = [
    ("France", "Paris"), ("Germany", "Berlin"), ("Italy", "Rome"), ("Spain", "Madrid"), ("Japan", "Tokyo"),
    ("Canada", "Ottawa"), ("Australia", "Canberra"), ("Egypt", "Cairo"), ("Russia", "Moscow"), ("China", "Beijing"),
    ("Portugal", "Lisbon"), ("Greece", "Athens"), ("Norway", "Oslo"), ("Sweden", "Stockholm"), ("Poland", "Warsaw"),
    ("Austria", "Vienna"), ("Ireland", "Dublin"), ("Kenya", "Nairobi"), ("Peru", "Lima"), ("Chile", "Santiago"),
    ("Turkey", "Ankara"), ("Brazil", "Brasilia"), ("Switzerland", "Bern"), ("Finland", "Helsinki"),
    ("Hungary", "Budapest"), ("Argentina", "Buenos Aires"), ("Thailand", "Bangkok"), ("Vietnam", "Hanoi"),
    ("Morocco", "Rabat"), ("Nigeria", "Abuja"),
]
SYMBOLS = [
    ("oxygen", "O"), ("hydrogen", "H"), ("carbon", "C"), ("nitrogen", "N"), ("gold", "Au"), ("silver", "Ag"),
    ("iron", "Fe"), ("sodium", "Na"), ("potassium", "K"), ("copper", "Cu"), ("lead", "Pb"), ("tin", "Sn"),
    ("helium", "He"), ("calcium", "Ca"), ("zinc", "Zn"), ("mercury", "Hg"), ("sulfur", "S"), ("neon", "Ne"),
    ("chlorine", "Cl"), ("magnesium", "Mg"),
]
WORDS = ["apple", "river", "garden", "planet", "window", "silver", "yellow", "market", "orange", "dragon",
         "pencil", "forest", "candle", "basket", "rocket", "winter", "bridge", "castle", "lemon", "tiger",
         "guitar", "butter", "jacket", "monkey", "pepper"]
DAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]
MONTHS = ["January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
          "November", "December"]


def questions(rng):
    out = []

    def add(kind, level, question, answer):
        out.append({"kind": kind, "level": level, "question": question, "answer": str(answer)})

    for _ in range(30):
        a, b = rng.randint(2, 40), rng.randint(2, 40)
        add("add", 1, f"What is {a} + {b}?", a + b)
    for _ in range(30):
        a, b = rng.randint(12, 99), rng.randint(3, 9)
        add("multiply", 2, f"What is {a} * {b}?", a * b)
    for _ in range(30):
        a, b = rng.randint(101, 999), rng.randint(11, 99)
        add("multiply_big", 3, f"What is {a} * {b}?", a * b)
    for _ in range(20):
        km = rng.randint(2, 30)
        add("convert", 1, f"How many meters are in {km} kilometers?", km * 1000)
    for _ in range(20):
        h = rng.randint(2, 12)
        add("convert", 2, f"How many minutes are in {h} hours?", h * 60)
    for _ in range(20):
        d = rng.randint(2, 9)
        add("convert", 3, f"How many seconds are in {d} hours?", d * 3600)
    for country, capital in CAPITALS:
        add("capital", 1, f"What is the capital of {country}?", capital)
    for element, symbol in SYMBOLS:
        add("symbol", 2, f"What is the chemical symbol of {element}?", symbol)
    for w in WORDS:
        add("first_letter", 1, f"What is the first letter of the word \"{w}\"?", w[0])
    for w in WORDS:
        add("last_letter", 2, f"What is the last letter of the word \"{w}\"?", w[-1])
    for w in WORDS:
        add("length", 3, f"How many letters are in the word \"{w}\"?", len(w))
    for i in range(len(DAYS)):
        n = rng.randint(2, 5)
        add("day_after", 2, f"Which day of the week comes {n} days after {DAYS[i]}?", DAYS[(i + n) % 7])
    for i in range(len(MONTHS)):
        add("month_after", 1, f"Which month comes after {MONTHS[i]}?", MONTHS[(i + 1) % 12])
    return out


def main():
    rng = random.Random(46044)
    qs = questions(rng)
    seen = {}
    for i, q in enumerate(qs):
        k = seen.get(q["kind"], 0)
        seen[q["kind"]] = k + 1
        q["id"] = i
        q["split"] = "calibration" if k % 2 == 0 else "held_out"
    OUT.parent.mkdir(parents=True, exist_ok=True)
    with open(OUT, "w") as f:
        for q in qs:
            f.write(json.dumps({k: q[k] for k in ("id", "kind", "level", "question", "answer", "split")}) + "\n")
    print(f"{len(qs)} questions -> {OUT}")


if __name__ == "__main__":
    main()
