#!/usr/bin/env python3
"""Whether two builds of an object file have the same machine code,
function by function: same_code.py OLD.o NEW.o [FUNCTION ...].

Each function is disassembled with objdump (relocations inline) and
compared instruction by instruction, with the offsets that only say
where the function or a jump target sits left out, so that a function
moved within the object still compares equal.  Prints one line per
function: "same", "differs" (with the first differing instruction of
each) or "only in OLD/NEW"; exits 1 if any named function, or with no
names any function, is not "same"."""
import re
import subprocess
import sys

FUNCTION = re.compile(r"^[0-9a-f]+ <(?P<name>[^>]+)>:$")
# "  1f:	mov    ..." -> "mov    ..."; relocation lines "R_X86_64_PLT32 foo-0x4"
INSN = re.compile(r"^\s*[0-9a-f]+:\s+(?P<text>.*)$")
# Targets within the object, "jmp 4c2 <foo+0x22>": the offset is where
# the code sits, not what it does.
LOCAL_TARGET = re.compile(r"\b[0-9a-f]+ <([^>+]+)(\+0x[0-9a-f]+)?>")
# Relocations against a section, "R_X86_64_32S .rodata.str1.1+0x16d":
# the addend says where in the section, which moves when anything
# before it does.
SECTION_ADDEND = re.compile(r"(\s\.[\w.]+)[+-]0x[0-9a-f]+$")


def functions(path):
    out = subprocess.run(["objdump", "-d", "-r", "--no-show-raw-insn",
                          path], capture_output=True, text=True,
                         check=True).stdout
    found, name = {}, None
    for line in out.splitlines():
        m = FUNCTION.match(line)
        if m:
            name = m.group("name")
            found[name] = []
            continue
        m = INSN.match(line)
        if name and m:
            text = LOCAL_TARGET.sub(r"<\1>", m.group("text")).strip()
            found[name].append(SECTION_ADDEND.sub(r"\1", text))
    return found


def main(argv):
    if len(argv) < 2:
        sys.exit(__doc__.split("\n\n")[0])
    old, new = functions(argv[0]), functions(argv[1])
    names = argv[2:] or sorted(set(old) | set(new))
    bad = 0
    for name in names:
        if name not in new or name not in old:
            print(f"{name}: only in {'OLD' if name in old else 'NEW'}"
                  if name in old or name in new else f"{name}: in neither")
            bad += 1
        elif old[name] == new[name]:
            print(f"{name}: same, {len(old[name])} lines")
        else:
            i = next((i for i, (a, b) in enumerate(zip(old[name], new[name]))
                      if a != b), min(len(old[name]), len(new[name])))
            print(f"{name}: differs at line {i}: "
                  f"{(old[name] + [''])[i]!r} vs {(new[name] + [''])[i]!r}")
            bad += 1
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
