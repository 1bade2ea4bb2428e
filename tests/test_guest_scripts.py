"""The guest's shell scripts as the initramfs holds them: the dispatcher
guest/init runs sources every other script the initramfs takes and no
other, and every function a script calls is defined, once, in a script
sourced before the call runs.  Read from the scripts' text (a small
shell lexer), so that a file left out of the initramfs, or a function
moved where the dispatcher does not source it, fails here rather than in
a guest."""
import re
import shutil
import subprocess

import pytest

from conftest import ROOT
from zdinit.kernel import initramfs

GUEST = ROOT / "guest"
REDIRECTIONS = ("<<", ">>", ">&", "<&", "<>", ">|", "<", ">")
OPERATORS = (";;", "&&", "||", ";", "&", "|", "(", ")", "\n")
# Words that open or close a compound command rather than name one.
RESERVED = {"if", "then", "else", "elif", "fi", "do", "done", "while",
            "until", "!", "esac"}
ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=")
# The builtins of busybox's sh that are not also applets.
SHELL_BUILTINS = {".", ":", "break", "cd", "continue", "exec", "exit",
                  "export", "read", "return", "set", "shift", "wait"}


def closing_paren(text, i):
    """The index after the parenthesis that closes the one at text[i]."""
    depth = 0
    while True:
        c = text[i]
        if c == "'":
            i = text.index(c, i + 1)
        elif c == '"':
            i = double_quoted(text, i)[0] - 1
        elif c == "\\":
            i += 1
        elif c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1


def expansion(text, i):
    """text[i] is '$': the index after the expansion and the text of each
    command substitution in it."""
    if text.startswith("$((", i):
        end, subs, j = closing_paren(text, i + 1), [], i + 3
        while (j := text.find("$", j, end)) >= 0:
            j, inner = expansion(text, j)
            subs += inner
        return end, subs
    if text.startswith("$(", i):
        end = closing_paren(text, i + 1)
        return end, [text[i + 2:end - 1]]
    if text.startswith("${", i):
        return text.index("}", i) + 1, []
    return i + 1, []


def double_quoted(text, i):
    """text[i] is '"': the index after the closing quote and the command
    substitutions inside."""
    i, subs = i + 1, []
    while text[i] != '"':
        if text[i] == "\\":
            i += 2
        elif text[i] == "$":
            i, inner = expansion(text, i)
            subs += inner
        else:
            i += 1
    return i + 1, subs


def tokens(text):
    """(kind, text, command substitutions) of each word ("word"),
    redirection target ("target") and operator ("op") of shell text;
    comments and here-documents left out."""
    toks, i, word, subs, target, heredocs = [], 0, "", [], None, []

    def end_word():
        nonlocal word, subs, target
        if word or subs:
            if target == "<<":
                heredocs.append(word.strip("'\""))
            toks.append(("target" if target else "word", word, subs))
            word, subs, target = "", [], None

    while i < len(text):
        c = text[i]
        if c == "\\":
            word += text[i:i + 2] if text[i + 1] != "\n" else ""
            i += 2
        elif c == "'":
            end = text.index("'", i + 1) + 1
            word, i = word + text[i:end], end
        elif c in '"$':
            end, inner = (double_quoted if c == '"' else expansion)(text, i)
            word, subs, i = word + text[i:end], subs + inner, end
        elif c == "#" and not word:
            i = text.find("\n", i)
            i = len(text) if i < 0 else i
        elif c in " \t":
            end_word()
            i += 1
        elif c in "<>":
            if word.isdigit():      # a file descriptor: 2>&1
                word = ""
            end_word()
            target = next(r for r in REDIRECTIONS if text.startswith(r, i))
            i += len(target)
            while text[i] in " \t":
                i += 1
        elif (op := next((o for o in OPERATORS if text.startswith(o, i)),
                         None)):
            end_word()
            toks.append(("op", op, []))
            i += len(op)
            if op == "\n":     # past the here-documents begun on the line
                for delimiter in heredocs:
                    end = text.index(f"\n{delimiter}\n", i - 1)
                    i = end + len(delimiter) + 2
                heredocs = []
        else:
            word += c
            i += 1
    end_word()
    return toks


def parse(text):
    """The functions text defines, {name: [command, ...]}, and its
    top-level commands, each a list of its words, in order: those inside
    command substitutions too; assignments, redirections, case patterns
    and the words of for loops left out."""
    defs, top = {}, []
    commands, function, depth, braces = top, None, 0, 0
    skip, words = None, []      # skip: what the next words are not
    toks = tokens(text)
    for n, (kind, word, subs) in enumerate(toks):
        for sub in subs:
            commands += parse(sub)[1]
        if kind == "target":
            continue
        if skip == "case":          # case WORD in
            skip = "pattern" if word == "in" else skip
        elif skip == "pattern":     # up to its ")"
            skip = None if word in (")", "esac") else skip
        elif skip == "for":         # for NAME in WORDS;
            skip = None if kind == "op" else skip
        elif skip == "()":          # NAME()
            skip = None
        elif kind == "op":
            if word == "(" and len(words) == 1 and toks[n + 1][1] == ")":
                function, braces, skip = words[0], depth, "()"
                commands = defs[function] = []
            elif words:
                commands.append(words)
            words = []
            skip = "pattern" if word == ";;" else skip
        elif words:
            words.append(word)
        elif word in ("{", "}"):
            depth += 1 if word == "{" else -1
            if word == "}" and function and depth == braces:
                commands, function = top, None
        elif word in ("case", "for"):
            skip = word
        elif not (word in RESERVED or ASSIGNMENT.match(word)):
            words.append(word)
    if words:
        commands.append(words)
    return defs, top


def runners(defs):
    """{name: n} of the functions that run their arguments as a command
    after the first n ("$@" after n shifts, or passed to such a function),
    like step and each_round."""
    found = {}
    while True:
        before = dict(found)
        for name, commands in defs.items():
            shifts = 0
            for words in commands:
                shifts += words == ["shift"]
                if words[0] == '"$@"':
                    found[name] = shifts
                elif words[1:2] == ['"$@"'] and words[0] in found:
                    found[name] = shifts + found[words[0]]
        if found == before:
            return found


def called(words, run):
    """The commands a command runs: its first word, and the command it
    hands a runner (step "label" rebind runs step and rebind)."""
    names = [words[0]]
    while names[-1] in run and len(words) > 1 + run[names[-1]]:
        words = words[1 + run[names[-1]]:]
        names.append(words[0])
    return names


def scripts():
    """Every guest script's (definitions, top-level commands) by name."""
    return {path.name: parse(path.read_text())
            for path in sorted(GUEST.glob("*.sh"))}


def definitions(every):
    """Every function of the scripts, {name: its commands}."""
    return {f: commands for defs, _ in every.values()
            for f, commands in defs.items()}


def sourced(top):
    return [words[1].removeprefix("/zdinit/") for words in top
            if words[0] == "."]


def test_the_initramfs_takes_the_dispatcher_and_what_it_sources():
    init = (GUEST / "init").read_text()
    assert f"\n/zdinit/{initramfs.DISPATCHER}\n" in init
    assert initramfs.GUEST_SCRIPTS[0] == initramfs.DISPATCHER
    dispatcher = scripts()[initramfs.DISPATCHER]
    assert sourced(dispatcher[1]) == list(initramfs.GUEST_SCRIPTS[1:])
    assert {p.name for p in GUEST.glob("*.sh")} == \
        set(initramfs.GUEST_SCRIPTS)


def test_no_function_is_defined_twice():
    seen = {}
    for name, (defs, _) in scripts().items():
        for function in defs:
            assert function not in seen, \
                f"{function} in both {seen[function]} and {name}"
            seen[function] = name


def test_every_function_called_is_sourced_before_the_call_runs():
    """Top-level commands run as the dispatcher reaches them (those of a
    sourced file when it is sourced); a function runs whatever it calls,
    so all of that must be defined by then."""
    every = scripts()
    graph = definitions(every)
    run = runners(graph)

    def closure(name, seen):
        if name in graph and name not in seen:
            seen.add(name)
            for words in graph[name]:
                for callee in called(words, run):
                    closure(callee, seen)
        return seen

    defs, top = every[initramfs.DISPATCHER]
    defined, checked = set(defs), 0
    steps = [(initramfs.DISPATCHER, words) for words in top]
    while steps:
        script, words = steps.pop(0)
        if words[0] == ".":
            name = sourced([words])[0]
            defs, its_top = every[name]
            defined |= set(defs)
            steps[:0] = [(name, w) for w in its_top]
            continue
        for name in called(words, run):
            missing = closure(name, set()) - defined
            assert not missing, (f"{script}: {' '.join(words)} needs "
                                 f"{sorted(missing)}, not sourced by then")
            checked += name in graph
    assert checked > 20       # the scenarios were seen


def test_every_other_command_is_in_the_guest():
    """What the scripts run that is none of their functions: a shell
    builtin, a busybox applet (the guest's busybox is the host's static
    one), a tool the initramfs adds (bash-static as bash), or a path."""
    busybox = shutil.which("busybox")
    if not busybox:
        pytest.skip("busybox not installed (make test installs it)")
    applets = subprocess.run([busybox, "--list"], capture_output=True,
                             text=True, check=True).stdout.split()
    known = set(applets) | set(initramfs.TOOLS) | {"bash"} | SHELL_BUILTINS
    every = scripts()
    graph = definitions(every)
    run = runners(graph)
    unknown = set()
    for words in [w for _, top in every.values() for w in top] + \
            [w for commands in graph.values() for w in commands]:
        for name in called(words, run):
            if not re.search(r"[$\"'/]", name) and \
                    name not in set(graph) | known:
                unknown.add(name)
    assert not unknown, f"neither a guest function nor in the guest: {unknown}"


def test_every_scenario_the_harness_declares_is_one_the_guest_runs():
    """A scenario added to families/scenarios.py without its case in the
    dispatcher would fail only in a guest, after the kernels are built."""
    from zdinit.families import scenarios
    dispatcher = (GUEST / initramfs.DISPATCHER).read_text()
    body = dispatcher[dispatcher.index('case "$SCENARIO" in'):]
    cases = {name for pattern in re.findall(r"^([a-z0-9|-]+)\)", body, re.M)
             for name in pattern.split("|")}
    declared = set(scenarios.SCENARIOS) | {"clear"}
    assert declared <= cases, sorted(declared - cases)
