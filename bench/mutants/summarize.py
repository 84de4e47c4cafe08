#!/usr/bin/env python3
"""Summarises a bench/mutants/run of one group, finished or cut short (cargo-mutants writes
outcomes.json as it goes): counts, kill rate and every missed mutant, as bench/results holds.

    summarize.py UNIT_OUTCOMES FINAL_OUTCOMES GROUP FILES TESTS SECONDS COMMIT SHARD [LISTED]

UNIT_OUTCOMES is stage 1's outcomes.json (unit tests), FINAL_OUTCOMES stage 2's (the same file
when stage 2 did not run); a mutant's outcome is stage 2's when it has one. LISTED is how many
mutants the group has, so that a run cut short says how far it got.
"""
import json
import os
import sys
unit_path, path, group, files, tests, took, commit, shard = sys.argv[1:9]
listed = sys.argv[9] if len(sys.argv) > 9 else None

def outcomes(p):
    """Each mutant's outcome in one run's outcomes.json, by its name."""
    if not os.path.exists(p):
        return {}
    out = {}
    for o in json.load(open(p))["outcomes"]:
        if o["scenario"] != "Baseline":
            out[o["scenario"]["Mutant"]["name"]] = o["summary"]
    return out

unit = outcomes(unit_path)
final = dict(unit)
# Stage 2 tried again what stage 1 did not catch; its outcome is the final one.
final.update(outcomes(path) if path != unit_path else {})
by = {}
for name, summary in final.items():
    by.setdefault(summary, []).append(name)
caught = len(by.get("CaughtMutant", []))
unit_caught = sum(1 for v in unit.values() if v == "CaughtMutant")
missed, timeouts = sorted(by.get("MissedMutant", [])), sorted(by.get("Timeout", []))
viable = caught + len(missed) + len(timeouts)
print(f"# cargo-mutants, group {group}, commit {commit}, shard {shard}, {took} s")
print(f"files: {files}")
if shard != "all":
    print(f"a sample: shard {shard} of the group's mutants, round-robin (every n-th, in file order)")
print(f"tests: cargo test --lib, then for what it missed cargo test --test it -- {tests}")
if os.environ.get("DROVER_FIDELITY_PATHS"):
    print(f"fidelity matrix paths: {os.environ['DROVER_FIDELITY_PATHS']}")
if listed and int(listed) != len(final):
    print(f"cut short: {len(final)} of the group's {listed} mutants tested, in file order")
print(f"mutants {len(final)}: caught {caught} ({unit_caught} by the unit tests), missed {len(missed)}, timeout {len(timeouts)}, unviable {len(by.get('Unviable', []))}")
if viable:
    print(f"kill rate (caught + timeout over viable): {100 * (caught + len(timeouts)) / viable:.1f} %")
for title, items in (("missed", missed), ("timeout", timeouts)):
    if items:
        print(f"\n{title}:")
        for i in items:
            print(f"- {i}")
