#!/usr/bin/python3
"""build_corpus.py: chat turns from text that Debian packages ship.

Questions about words and commands, with answers drawn from the text:
  - WordNet 3.0 (Debian package wordnet-base): every lemma's most frequent
    sense, its gloss (the definition) and the gloss's first example;
  - the NAME line of the manual pages of a fixed list of packages (read with
    man-db's lexgrog): what a command does.
A handful of hand-written turns say what the demo model is.

Held out: every word or command whose name hashes into 1 of 50 buckets goes
to the test split only, so the test questions are about unseen words.

Writes OUT/train_pairs.jsonl and OUT/test_pairs.jsonl (one [question,
answer] a line; prepare.py makes conversations of them),
OUT/sources.json (what was read, with versions and licences) and
OUT/words.txt (the 15,000 most frequent words of the answers, for the
English-words test).

Usage: build_corpus.py OUT_DIR [--seed N]
"""
import argparse
import hashlib
import json
import os
import random
import re
import subprocess
import sys

WORDNET = "/usr/share/wordnet"
# Packages whose section 1 and 8 manual pages give the command questions:
# basic tools of every Debian system whose licences (GPL-3+, GPL-2+, LGPL,
# BSD, ISC) combine under GPL-3.0-or-later (util-linux, bzip2 and xz-utils
# are left out: parts of them are GPL-2 only).
MAN_PACKAGES = ["coreutils", "findutils", "grep", "sed", "tar", "gzip", "procps", "diffutils", "less",
                "man-db", "bash", "tmux"]

# ---- helpers ---------------------------------------------------------------

def bucket(name):
    """Stable split: 0..49 from the name's sha256."""
    return int(hashlib.sha256(name.encode()).hexdigest()[:8], 16) % 50


def ascii_clean(s):
    s = s.replace("`", "'").replace("\t", " ")
    s = "".join(c for c in s if 32 <= ord(c) < 127)
    return re.sub(r"\s+", " ", s).strip()


def article(word):
    return "an" if word[0].lower() in "aeiou" else "a"


def cap(s):
    return s[:1].upper() + s[1:]


def pkg_version(pkg):
    try:
        return subprocess.run(["dpkg-query", "-W", "-f", "${Version}", pkg], capture_output=True,
                              text=True, check=True).stdout.strip()
    except (subprocess.CalledProcessError, FileNotFoundError):
        return None


def pkg_licences(pkg):
    """The License: short names of the package's machine-readable copyright file."""
    path = "/usr/share/doc/%s/copyright" % pkg
    names = []
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.startswith("License:"):
                    n = line.split(":", 1)[1].strip()
                    if n and n not in names:
                        names.append(n)
    except OSError:
        pass
    return names

# ---- WordNet ---------------------------------------------------------------

POS_FILES = {"n": "noun", "v": "verb", "a": "adj", "r": "adv"}


def read_glosses(pos):
    """synset offset -> gloss text, from data.<pos>."""
    out = {}
    with open(os.path.join(WORDNET, "data." + POS_FILES[pos]), encoding="latin-1") as f:
        for line in f:
            if line.startswith("  "):
                continue  # the licence header
            head, _, gloss = line.partition(" | ")
            out[head.split(" ", 1)[0]] = gloss.strip()
    return out


def split_gloss(gloss):
    """(definition, first example or None): the gloss is definitions and
    quoted examples separated by semicolons."""
    parts = [p.strip() for p in gloss.split(";")]
    defs = [p for p in parts if p and not p.startswith('"')]
    exs = [p.strip('"').strip() for p in parts if p.startswith('"')]
    if not defs:
        return None, None
    d = ascii_clean(defs[0])
    d = re.sub(r"\s*\(\s*\)", "", d)
    d = d.rstrip(" .,:")
    ex = ascii_clean(exs[0]).rstrip(" .") if exs else None
    if ex and ('"' in ex or len(ex.split()) < 3):
        ex = None
    return d, ex


def read_wordnet():
    """One entry per (lemma, pos): the first (most frequent) sense."""
    entries = []
    for pos in "nvar":
        glosses = read_glosses(pos)
        with open(os.path.join(WORDNET, "index." + POS_FILES[pos]), encoding="latin-1") as f:
            for line in f:
                if line.startswith("  "):
                    continue
                fields = line.split()
                lemma = fields[0]
                if not re.fullmatch(r"[a-z][a-z'-]*(_[a-z][a-z'-]*)?", lemma) or len(lemma) < 2:
                    continue
                n_syn = int(fields[2])
                n_ptr = int(fields[3])
                tagged = int(fields[5 + n_ptr])
                offsets = fields[6 + n_ptr:6 + n_ptr + n_syn]
                d, ex = split_gloss(glosses[offsets[0]])
                if not d or len(d.split()) < 2:
                    continue
                entries.append({"word": lemma.replace("_", " "), "pos": pos, "def": d, "ex": ex,
                                "common": tagged > 0})
    return entries


def wordnet_turns(e, rng):
    """A few (question, answer) pairs for one entry."""
    w, d, pos = e["word"], e["def"], e["pos"]
    ex = " For example: \"%s\"." % cap(e["ex"]) if e["ex"] else ""
    out = []
    if pos == "n":
        a = article(w)
        out.append(("What is %s %s?" % (a, w), "%s %s is %s.%s" % (cap(a), w, d, ex)))
        out.append(("What does %s mean?" % w, "The word %s means %s.%s" % (w, d, ex)))
        q = rng.choice(["Define %s.", "What is the meaning of %s?", "Tell me what %s means.",
                        "What is meant by %s?", "Explain the word %s."]) % w
        out.append((q, "%s: %s.%s" % (cap(w), d, ex)))
    elif pos == "v":
        out.append(("What does %s mean?" % w, "To %s means to %s.%s" % (w, d, ex)))
        out.append(("What does it mean to %s?" % w, "To %s is to %s.%s" % (w, d, ex)))
        q = rng.choice(["Define the verb %s.", "What is the meaning of %s?", "Explain the word %s."]) % w
        out.append((q, "The verb %s means to %s.%s" % (w, d, ex)))
    else:
        kind = "adjective" if pos == "a" else "adverb"
        out.append(("What does %s mean?" % w, "The word %s means %s.%s" % (w, d, ex)))
        q = rng.choice(["Define %s.", "What is the meaning of %s?", "Explain the word %s."]) % w
        out.append((q, "%s is an %s that means %s.%s" % (cap(w), kind, d, ex)))
    return out

# ---- manual pages ------------------------------------------------------------

def read_commands(sources):
    cmds = {}
    for pkg in MAN_PACKAGES:
        ver = pkg_version(pkg)
        if ver is None:
            sys.exit("build_corpus: package %s is not installed (apt-get install %s)" % (pkg, pkg))
        files = subprocess.run(["dpkg", "-L", pkg], capture_output=True, text=True).stdout.split()
        pages = sorted(p for p in files if re.search(r"/usr/share/man/man[18]/[^/]+\.[18]\.gz$", p))
        n = 0
        for page in pages:
            r = subprocess.run(["lexgrog", page], capture_output=True, text=True)
            m = re.match(r'[^:]+: "(.*)"$', r.stdout.strip().split("\n")[0]) if r.stdout else None
            if not m:
                continue
            for desc in m.group(1).split('", "'):  # pages naming several commands
                nm, sep, what = desc.partition(" - ")
                what = ascii_clean(what).rstrip(" .")
                for name in nm.split(","):
                    name = name.strip()
                    if sep and re.fullmatch(r"[a-z][a-z0-9_.+-]*", name) and name not in cmds and \
                            len(what.split()) >= 2:
                        cmds[name] = {"name": name, "what": what, "pkg": pkg}
                        n += 1
        sources.append({"package": pkg, "version": ver, "licences": pkg_licences(pkg),
                        "used": "%d command descriptions (NAME lines of its manual pages)" % n})
    return list(cmds.values())


def command_turns(c, verbs, rng):
    name, what = c["name"], c["what"]
    first = what.split()[0].lower()
    low = what[0].lower() + what[1:]
    if first in verbs:
        ans = "The %s command is used to %s." % (name, low)
        ans2 = "%s is a command used to %s." % (name, low)
    else:
        ans = "The %s command is %s %s." % (name, article(low), low) if not re.match(r"(a|an|the) ", low) \
            else "The %s command is %s." % (name, low)
        ans2 = ans
    return [("What does the %s command do?" % name, ans),
            (rng.choice(["What is %s?", "What is the %s command?", "What does %s do?"]) % name, ans2)]

# ---- the demo model itself ---------------------------------------------------

ABOUT = [
    (["Hello", "Hi", "Hello!", "Hi there", "Good morning", "Hey"],
     ["Hello! I am a small demo model. Ask me what a word means, or what a command does.",
      "Hi! I am the glmchat demo model. You can ask me about words and commands."]),
    (["Who are you?", "What are you?", "What is this?", "Tell me about yourself."],
     ["I am a small demo model built into glmchat. I was trained on dictionary definitions and manual "
      "pages, so I can tell you what a word means or what a command does."]),
    (["What can you do?", "How can you help me?", "What do you know?"],
     ["I can answer short questions about words and commands, for example: What is a river? or "
      "What does the ls command do?"]),
    (["Thank you", "Thanks", "Thank you!", "Thanks a lot"],
     ["You are welcome! Ask me about another word if you like.", "You are welcome."]),
]


def about_turns(rng):
    out = []
    for qs, ans in ABOUT:
        for q in qs:
            out.append((q, rng.choice(ans)))
    return out

def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--seed", type=int, default=4747)
    args = ap.parse_args()
    rng = random.Random(args.seed)
    os.makedirs(args.out, exist_ok=True)

    sources = []
    entries = read_wordnet()
    sources.append({"package": "wordnet-base", "version": pkg_version("wordnet-base"),
                    "licences": pkg_licences("wordnet-base") or ["WordNet"],
                    "used": "%d definitions and examples (first sense of each lemma)" % len(entries)})
    verbs = {e["word"] for e in entries if e["pos"] == "v"}
    cmds = read_commands(sources)

    # A model this small learns what it sees several times: every common
    # word (seen in WordNet's sense-tagged texts), a tenth of the rare single
    # words, no rare phrases (genus names...); the commands and the turns
    # about the demo itself repeated.
    train, test = [], []
    kept = 0
    for e in entries:
        if not e["common"] and (" " in e["word"] or rng.random() >= 0.1):
            continue
        kept += 1
        (test if bucket(e["word"]) == 0 else train).extend(wordnet_turns(e, rng))
    sources[0]["used"] = ("%d lemmas' first-sense definitions and examples (of %d; every common word, a tenth "
                          "of the rare single words)" % (kept, len(entries)))
    for c in cmds:
        turns = command_turns(c, verbs, rng)
        (test if bucket(c["name"]) == 0 else train).extend(turns * 4)
    train.extend(about_turns(rng) * 20)
    for split, pairs in (("train", train), ("test", test)):
        with open(os.path.join(args.out, split + "_pairs.jsonl"), "w") as f:
            for q, a in pairs:
                f.write(json.dumps([q, a]) + "\n")
    words = {}
    for q, a in train:
        for w in re.findall(r"[A-Za-z]+", a):
            words[w.lower()] = words.get(w.lower(), 0) + 1
    # the English-words check of tests/t_demo_model.sh: the answers' most
    # frequent words (a model this small says little else)
    common = sorted(words, key=lambda w: (-words[w], w))[:15000]
    with open(os.path.join(args.out, "words.txt"), "w") as f:
        for w in sorted(common):
            f.write(w + "\n")
    with open(os.path.join(args.out, "sources.json"), "w") as f:
        json.dump({"seed": args.seed, "sources": sources,
                   "pairs": {"train": len(train), "test": len(test)},
                   "entries": {"wordnet": len(entries), "commands": len(cmds)}}, f, indent=1)
    print("corpus: %d WordNet entries, %d commands; %d train / %d test pairs"
          % (len(entries), len(cmds), len(train), len(test)))


if __name__ == "__main__":
    main()
