"""Counts the locked instructions that callgrind profiles executed, per function and per
operation (scripts/locked-ops.sh).

usage: locked_ops.py LOCKED_ADDRESSES PROGRAM CALLGRIND_FILE...

LOCKED_ADDRESSES: one hexadecimal address per line, the program's locked instructions
(from objdump). The callgrind files must come from --dump-instr=yes; the initiator is the
rank whose profile calls `AnyNi::put_from`, and its put and get calls are the operations.
"""
import collections
import re
import sys

NAMED = re.compile(r"^(c?)(ob|fn)=\((\d+)\)(?: (.*))?$")


def position(token, last):
    """A callgrind position: absolute (0x..), relative (+n / -n), or the same (*)."""
    if token == "*":
        return last
    if token[0] in "+-":
        return last + int(token, 0)
    return int(token, 0)


def profile(path, program, locked):
    """(command line, locked count per function, calls per called function)."""
    names = {"ob": {}, "fn": {}}
    obj = fn = None
    addr = 0
    call_line_next = False
    cmd = ""
    per_fn = collections.Counter()
    calls = collections.Counter()
    callee = None
    with open(path, encoding="utf-8", errors="replace") as f:
        for raw in f:
            s = raw.rstrip("\n")
            if not s:
                continue
            if s.startswith("cmd:"):
                cmd = s[4:].strip()
                continue
            m = NAMED.match(s)
            if m:
                called, kind, ident, name = m.groups()
                if name:
                    names[kind][ident] = name
                if not called:
                    if kind == "ob":
                        obj = names["ob"].get(ident, "")
                    else:
                        fn = names["fn"].get(ident, "?")
                elif kind == "fn":
                    callee = names["fn"].get(ident, "?")
                continue
            if s.startswith("calls="):
                calls[callee] += int(s.split("=")[1].split()[0])
                call_line_next = True
                continue
            if not (s[0].isdigit() or s[0] in "+-*"):
                continue
            # "ADDRESS LINE COST": only the address and the cost matter here.
            parts = s.split()
            addr = position(parts[0], addr)
            if call_line_next:
                # The cost line of a call: the callee's inclusive cost, not this address's.
                call_line_next = False
                continue
            if obj and obj.endswith(program) and addr in locked and len(parts) > 2:
                per_fn[fn] += int(parts[2])
    return cmd, per_fn, calls


def main():
    locked = {int(l.split()[0], 16) for l in open(sys.argv[1]) if l.strip()}
    program = "/" + sys.argv[2].rsplit("/", 1)[-1]
    ranks = [profile(p, program, locked) for p in sys.argv[3:]]
    ranks = [r for r in ranks if program.strip("/") in r[0].split(" ")[0]]
    ops = 0
    for _, _, calls in ranks:
        n = sum(c for name, c in calls.items() if name and re.search(r"AnyNi::(put_from|get)$", name))
        ops = max(ops, n)
    if ops == 0:
        sys.exit("locked_ops.py: no rank called AnyNi::put_from or AnyNi::get")
    print(f"operations (8 B puts and gets of the initiator): {ops}")
    roles = []
    for _, per_fn, calls in ranks:
        initiator = any(n and "AnyNi::put_from" in n for n in calls)
        roles.append((0 if initiator else 1, "initiator" if initiator else "target", per_fn))
    for _, role, per_fn in sorted(roles, key=lambda r: r[0]):
        total = sum(per_fn.values())
        print(f"\n{role}: {total / ops:.1f} locked instructions per operation ({total} in all)")
        for name, n in per_fn.most_common(15):
            if n / ops >= 0.05:
                print(f"  {n / ops:6.2f}  {name[:110]}")

main()
