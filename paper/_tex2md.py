"""The paper's LaTeX as Markdown (``paper/paper.md``), for machines without TeX.

Handles the subset ``paper/paper.tex`` and ``paper/sections/*.tex`` are written in: sections, paragraphs,
emphasis, ``\\texttt``, ``\\R{key}`` macros (replaced by their generated values), citations, references,
inline and display math (kept as ``$...$`` / ``$$...$$``), itemize / enumerate, ``\\input`` of section files
and of generated tables and figures (their ``.md`` twins), and the bibliography. Anything else is an error
naming the file and line, so the Markdown never silently drops content.
"""

from __future__ import annotations

import re
from pathlib import Path

__all__ = ["tex_to_md"]

_SIMPLE = [(r"\%", "%"), (r"\&", "&"), (r"\_", "_"), (r"\#", "#"), (r"\$", "\x00DOLLAR\x00"), (r"\ldots", "…"), (r"\,", " "), (r"\@", ""),
           (r"\textasciitilde{}", "~"), (r"\ ", " ")]
_WRAP = {"emph": "*{}*", "textit": "*{}*", "textbf": "**{}**", "texttt": "`{}`", "NA": "*{}*", "mbox": "{}",
         "text": "{}", "url": "<{}>", "textsc": "{}", "textsf": "{}"}
_DROP = {"label", "centering", "small", "footnotesize", "noindent", "maketitle", "medskip", "bigskip",
         "newpage", "clearpage", "tableofcontents", "par", "hline", "sloppy"}


def _arg(s: str, i: int) -> tuple[str, int]:
    """The brace group starting at s[i] == '{' and the index after it."""
    if i >= len(s) or s[i] != "{":
        raise ValueError("expected '{'")
    depth, j = 0, i
    while j < len(s):
        if s[j] == "\\":
            j += 2
            continue
        if s[j] == "{":
            depth += 1
        elif s[j] == "}":
            depth -= 1
            if depth == 0:
                return s[i + 1:j], j + 1
        j += 1
    raise ValueError("unbalanced braces")


def _strip_comments(text: str) -> str:
    return "\n".join(re.sub(r"(?<!\\)%.*$", "", line) for line in text.splitlines())


class _Converter:
    def __init__(self, root: Path, macros: dict[str, str], gen: Path) -> None:
        self.root, self.macros, self.gen = root, macros, gen

    def file(self, path: Path) -> str:
        return self.inline(_strip_comments(path.read_text(encoding="utf-8")), str(path))

    def include(self, name: str, where: str) -> str:
        if name.startswith("generated/"):
            p = self.gen / (name.split("/", 1)[1] + ".md")
            if not p.exists():
                raise ValueError(f"{where}: \\input{{{name}}}: no {p}")
            return "\n\n" + p.read_text(encoding="utf-8") + "\n\n"
        return "\n\n" + self.file(self.root / (name if name.endswith(".tex") else name + ".tex")) + "\n\n"

    def inline(self, s: str, where: str) -> str:
        out, i = [], 0
        while i < len(s):
            c = s[i]
            if c == "~":
                out.append(" ")
                i += 1
                continue
            if c == "$":  # inline math is Markdown math as it stands
                j = i + 1
                while j < len(s) and not (s[j] == "$" and s[j - 1] != "\\"):
                    j += 1
                if j >= len(s):
                    raise ValueError(f"{where}: unclosed $")
                out.append(s[i:j + 1])
                i = j + 1
                continue
            for a, b in (("---", "—"), ("--", "–"), ("``", "“"), ("''", "”")):
                if s.startswith(a, i):
                    out.append(b)
                    i += len(a)
                    break
            else:
                a = ""
            if a:
                continue
            if c != "\\":
                out.append(c)
                i += 1
                continue
            for a, b in _SIMPLE:
                if s.startswith(a, i):
                    out.append(b)
                    i += len(a)
                    break
            else:
                m = re.match(r"\\([A-Za-z]+)\*?", s[i:])
                if not m:
                    if s.startswith("\\[", i):
                        j = s.index("\\]", i)
                        out.append("\n\n$$" + s[i + 2:j].strip() + "$$\n\n")
                        i = j + 2
                        continue
                    if s.startswith("\\\\", i):
                        out.append("  \n")
                        i += 2
                        continue
                    raise ValueError(f"{where}: unsupported '{s[i:i + 12]}'")
                name, i = m.group(1), i + m.end()
                text, i = self.command(name, s, i, where)
                out.append(text)
        text = "".join(out).replace("\x00DOLLAR\x00", "\\$")
        return re.sub(r"\n{3,}", "\n\n", text)

    def command(self, name: str, s: str, i: int, where: str) -> tuple[str, int]:
        """(Markdown of the command ``name`` whose arguments start at s[i], index after them)."""
        if name in _DROP:
            return "", (_arg(s, i)[1] if name == "label" and s.startswith("{", i) else i)
        if name == "begin":
            env, j = _arg(s, i)
            end = s.index(f"\\end{{{env}}}", j)
            return self.environment(env, s[j:end], where), end + len(f"\\end{{{env}}}")
        if name not in ("section", "subsection", "subsubsection", "paragraph", "input", "R", "cite", "ref",
                        "eqref", *_WRAP):
            raise ValueError(f"{where}: unsupported command \\{name}")
        arg, after = _arg(s, i)
        if name in ("section", "subsection", "subsubsection", "paragraph"):
            level = {"section": "##", "subsection": "###", "subsubsection": "####"}.get(name)
            title = self.inline(arg, where)
            return (f"\n\n{level} {title}\n\n" if level else f"\n\n**{title}.** "), after
        if name == "input":
            return self.include(arg, where), after
        if name == "R":
            if arg not in self.macros:
                raise ValueError(f"{where}: \\R{{{arg}}} is not a generated macro")
            v = self.macros[arg]
            return (f"*{v}*" if v.startswith("n/a") else v), after
        if name == "cite":
            return "[" + ", ".join(a.strip() for a in arg.split(",")) + "]", after
        if name in ("ref", "eqref"):
            return arg, after
        inner = self.verbatim(arg, where) if name == "texttt" else self.inline(arg, where)
        return _WRAP[name].format(inner), after

    def verbatim(self, s: str, where: str) -> str:
        """Typewriter text: only ``\\R{key}`` and escaped characters are converted (``--`` stays two dashes)."""
        def macro(m: re.Match) -> str:
            return self.command("R", "{" + m.group(1) + "}", 0, where)[0]
        s = re.sub(r"\\R\{([^}]*)\}", macro, s)
        for a, b in ((r"\_", "_"), (r"\%", "%"), (r"\&", "&"), (r"\#", "#"), ("~", " ")):
            s = s.replace(a, b)
        return s

    def environment(self, env: str, body: str, where: str) -> str:
        if env in ("itemize", "enumerate"):
            items = re.split(r"\\item\s*", body)[1:]
            mark = "- " if env == "itemize" else "1. "
            return "\n\n" + "\n".join(mark + self.inline(x.strip(), where).replace("\n", " ").strip()
                                      for x in items) + "\n\n"
        if env in ("align*", "equation*", "align", "equation"):
            return "\n\n$$\\begin{aligned}" + body.strip() + "\\end{aligned}$$\n\n"
        if env == "abstract":
            return "\n\n**Abstract.** " + self.inline(body.strip(), where) + "\n\n"
        if env == "thebibliography":
            body = re.sub(r"^\{[^}]*\}", "", body.strip())
            items = re.split(r"\\bibitem\{([^}]*)\}", body)[1:]
            refs = [f"- [{items[k]}] " + self.inline(items[k + 1].strip(), where).replace("\n", " ")
                    for k in range(0, len(items), 2)]
            return "\n\n## References\n\n" + "\n".join(refs) + "\n\n"
        if env in ("center", "quote"):
            return self.inline(body, where)
        raise ValueError(f"{where}: unsupported environment {env}")


def tex_to_md(main: Path, macros: dict[str, str], gen: Path) -> str:
    """Markdown of ``main`` (the document body; title and author from the preamble), with ``\\R`` macros
    replaced from ``macros`` and generated tables / figures read from ``gen/*.md``. ValueError names the file
    of anything outside the subset."""
    main = Path(main)
    src = _strip_comments(main.read_text(encoding="utf-8"))
    title = re.search(r"\\title\{([^}]*)\}", src)
    author = re.search(r"\\author\{([^}]*)\}", src)
    body = src.split("\\begin{document}", 1)[1].split("\\end{document}", 1)[0]
    conv = _Converter(main.parent, macros, Path(gen))
    head = f"# {title.group(1) if title else main.stem}\n\n"
    if author:
        head += f"*{author.group(1)}*\n\n"
    head += "<!-- generated by paper/generate.py from runs/; do not edit -->\n\n"
    return head + conv.inline(body, str(main)).strip() + "\n"
